"""Walks of the graphs the kit reads the two sides by: what an op depends on, which ops are a
tower's (a replica's) forward pass, which towers' assigns a train op runs, the order a
forward pass first reads its variables in."""

import tensorflow as tf

from porting.layer_settings import ASSIGNS


def reached(targets):
  """The names of every op `targets` (ops) depend on, data and control edges alike."""
  seen, stack = set(), list(targets)
  while stack:
    op = stack.pop()
    if op.name in seen:
      continue
    seen.add(op.name)
    stack += [t.op for t in op.inputs] + list(op.control_inputs)
  return seen


def forward(op, skip_prefix):
  """Whether `op` is one tower's or replica's forward op: not a gradient's, nor (by name
  prefix `skip_prefix`) another tower's or replica's."""
  parts = op.name.split("/")
  return not skip_prefix(op.name) and not any(
      p.startswith(("gradients", "gradient_tape")) for p in parts)


def tower_updates(graph, train_op):
  """(the towers whose assign ops the train op runs, whether any of those is in place), read
  from the graph in one walk. In place: none of UPDATE_OPS' (nor an op they run: a
  zero-debiased average's own assigns), as a batch norm with updates_collections=None
  assigns its statistics as it runs, which the train op reaches through the forward pass of
  every tower whatever update_ops says."""
  runs = reached([train_op])
  assigns = [op for op in graph.get_operations()
             if op.type in ASSIGNS and op.name in runs and
             op.name.startswith("tower_") and op.name.split("/")[0][6:].isdigit()]
  listed = reached([getattr(u, "op", u)
                    for u in graph.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)])
  return (sorted({int(op.name.split("/")[0][len("tower_"):]) for op in assigns}),
          any(op.name not in listed for op in assigns))


def first_reads(ops, variable_of):
  """The variables `ops` (a forward pass, in graph order: the order its code ran) read, in
  the order they are first read; `variable_of(tensor)`: the name of the variable whose
  handle (or ref) the tensor is, or None. Reads through Identity, ReadVariableOp and Cast."""
  order = []
  for op in ops:
    for tensor in op.inputs:
      while variable_of(tensor) is None and tensor.op.type in (
          "Identity", "ReadVariableOp", "Cast") and tensor.op.inputs:
        tensor = tensor.op.inputs[0]
      name = variable_of(tensor)
      if name is not None and name not in order:
        order.append(name)
  return order
