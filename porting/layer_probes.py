"""Step 0's forward pass again, layer by layer, on both sides: where the forward passes part
and no cause is known, each side runs step 0 again from its starting weights (the draws of
step 0: porting.random_ops keys them by the step) and fetches each layer's input and output;
porting.parting compares them. A fetched tensor can keep grappler from fusing its ops, so the
probe counts only where it gives the step's own losses on both sides.

  probes(ops, variable_of, names)   the first op reading each variable: the layer
  tf1_probe, tf2_probe              one side's step 0 again, its layers' inputs and outputs,
                                    and its loss's terms (porting.loss_terms)
  probe_both                        both, into the traces' facts
"""

import numpy as np
import tensorflow as tf

from porting import graph_walks
from porting import loss_terms
from porting import random_ops
from porting import spec
from porting.keras_variables import numpy_of as _numpy


def probes(ops, variable_of, names):
  """{variable: (op type, input, output)}: for each of `names`, the first of `ops` (one
  tower's or replica's forward ops, in graph order) that reads it, with its first input that
  is not the variable (the layer's input) and its output: where the layers are compared
  when the forward pass parts. A variable is read through its ReadVariableOp and any Casts
  and Identities after it, wherever those sit: a float16 script's custom getter casts each
  weight outside the tower's name scope (TF1's official ResNet: `tf.cast(var, float16,
  name=name + '_cast')`), and the tower's convolutions read only the casts."""
  found = {}
  for op in ops:
    if op.type in _READS or not op.outputs:
      continue
    read = [_variable_of_value(t, variable_of) for t in op.inputs]
    inputs = [t for t, name in zip(op.inputs, read) if name is None]
    for name in read:
      if name in names and name not in found and inputs:
        found[name] = (op.type, inputs[0], op.outputs[0])
  return found


_READS = ("ReadVariableOp", "Identity", "Cast")


def _variable_of_value(t, variable_of):
  """The variable `t` is the value of (read, then cast or passed through Identity), or None."""
  for _ in range(8):  # a read, a cast or two, identities: never a long chain
    name = variable_of(t)
    if name is not None:
      return name
    if t.op.type not in _READS or not t.op.inputs:
      return None
    t = t.op.inputs[0]
  return None


def tf1_probe(towers, images, labels):
  """Step 0's forward pass again (the weights as they were then, the draws of step 0),
  fetching each layer's input and output: (the towers' losses, {TF1 variable: (op type,
  input, output)})."""
  feed = {towers.feeds[0]: images, towers.feeds[1]: labels, towers.step_number: 0,
          **towers.draw_feed}
  form, leaves = towers.loss_terms
  losses, values, terms = towers.sess.run(
      [towers.losses, {n: (x, y) for n, (_, x, y) in towers.probes.items()}, leaves], feed)
  return (losses, {n: (towers.probes[n][0], x, y) for n, (x, y) in values.items()},
          loss_terms.measured(form, leaves, terms, losses[0]))


def tf2_probe(replicas, images, labels):
  """Step 0's forward pass again (the weights as they were then, the draws of step 0),
  returning each layer's input and output of replica 0: (the replicas' losses, {TF2
  variable: (op type, input, output)}). Traced only when asked: the comparison runs it
  where step 0's forward passes part and no cause is known."""
  handles = replicas.handles()
  names = set(replicas.names)

  def forward(images, labels, step):
    if replicas.source is not None:
      replicas.source.step = step
      replicas.source.drawn.clear()
      replicas.source.ops.clear()
    n = replicas.strategy.num_replicas_in_sync
    per = tf.shape(images)[0] // n

    def slice_of(ctx):
      i = ctx.replica_id_in_sync_group
      return images[i * per:(i + 1) * per], labels[i * per:(i + 1) * per]

    def replica(x, y):
      graph = tf.compat.v1.get_default_graph()
      before = len(graph.get_operations())
      loss, _ = spec.loss_and_outputs(
          replicas.port.replica_loss(replicas.model, x, y, tf.shape(images)[0]))
      ctx = tf.distribute.get_replica_context()
      if tf.get_static_value(ctx.replica_id_in_sync_group) == 0:  # replica 0's own ops
        captured = {id(inner): handles.get(id(outer)) for outer, inner in graph.captures}
        ops = [op for op in graph.get_operations()[before:]
               if graph_walks.forward(op, lambda name: name.startswith("replica_"))]
        found.update(probes(ops, lambda t: captured.get(id(t)), names))
        terms[:] = [loss_terms.split(loss)]
      return loss

    x, y = replicas.strategy.experimental_distribute_values_from_function(slice_of)
    loss = replicas.strategy.run(replica, (x, y))
    # Replica 0's tensors, of the same graph: returned by the function, not per replica.
    return loss, {k: (v[1], v[2]) for k, v in found.items()}, terms[0][1]

  found, terms = {}, []
  with random_ops.aligned(replicas.source):
    loss, values, leaves = tf.function(forward)(tf.constant(images), tf.constant(labels),
                                                tf.constant(0, tf.int64))
  local = replicas.strategy.experimental_local_results
  first = {k: (found[k][0], _numpy(x), _numpy(y)) for k, (x, y) in values.items()}
  form, traced = terms[0]
  losses = [_numpy(l) for l in local(loss)]
  return losses, first, loss_terms.measured(form, traced, [_numpy(t) for t in leaves], losses[0])


def probe_both(towers, tf2, pairs, start, batch, trace1, trace2):
  """Both sides' step-0 forward passes again from the starting weights, layer by layer
  (probes), into the traces' facts, where each side's probe gives the losses
  its step 0 gave; else the facts say the probe could not reproduce the step."""
  towers.assign({a: start[b] for a, b in pairs})
  tf2.assign(start)
  losses1, probes1, terms1 = tf1_probe(towers, *batch)
  losses2, probes2, terms2 = tf2_probe(tf2, *batch)
  same = lambda xs, ys: all(np.array_equal(x, y) for x, y in zip(xs, ys))
  if same(losses1, trace1.steps[0].losses) and same(losses2, trace2.steps[0].losses):
    trace1.facts["probes"], trace2.facts["probes"] = probes1, probes2
    trace1.facts["loss_terms"], trace2.facts["loss_terms"] = terms1, terms2
  else:
    trace1.facts["probes"] = None  # measured: the probe is another computation
