"""Every layer's settings, read from both sides' graphs and compared before a step runs.

A port whose batch norm keeps another momentum or epsilon, normalizes with its moving
statistics where the TF1 code used the batch's, or whose dropout has another rate differs
from the first step, and the numbers do not say why. The settings are read where they are
certain, the ops both sides' code leaves in a graph (tower 0's in TF1, replica 0's in the
traced TF2 step), not from layer objects a port may not have:

  dropout       GreaterEqual(uniform draw, rate), which tf.nn.dropout, tf.compat.v1.layers'
                and Keras 3's Dropout all build: the rate, in call order
  batch norm    FusedBatchNorm* (its epsilon and is_training attributes), or
                tf.nn.batch_normalization's `batchnorm/add` (variance + epsilon; the variance
                read from a variable: the moving statistics, not the batch's)
  moving stats  TF1's AssignMovingAvg: assign_sub(v, (v - x) * (1 - momentum)); Keras 3's
                assign(v, v * momentum + x * (1 - momentum)): the momentum of each moving
                statistic, and whether the step updates it (TF1: the train op reaches it)
  regularizers  the gradient of the regularization losses alone, per variable, at the
                starting weights (TF1's REGULARIZATION_LOSSES collection, Keras 3's
                variable.regularizer): which variables, and how strongly

porting.layer_mismatches says each difference between the two sides' in one line.
"""

import dataclasses
import re

import numpy as np
import tensorflow as tf

# tf.nn.batch_normalization's variance + epsilon: `.../batchnorm/add` (tf_slim's second
# call in a scope: `batchnorm_1/add`).
BATCHNORM_ADD = re.compile(r"/batchnorm(_\d+)?/add$")
FUSED = ("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")
PASS_THROUGH = ("Cast", "Identity", "ReadVariableOp")


@dataclasses.dataclass
class BatchNorm:
  scope: str
  epsilon: float
  training: bool  # normalizes with the batch's statistics (not the moving ones)


@dataclasses.dataclass
class Settings:
  """One side's: dropout [(scope, rate)] and batch_norm [BatchNorm] in call order; moving
  {variable: momentum} of every moving-average update the step runs; regularization
  {trainable variable: its regularization gradient at the starting weights}, or None where
  the side shows none through its framework (penalties added by hand)."""
  dropout: list
  batch_norm: list
  moving: dict
  regularization: dict = None


_FOLDED = {"Sub": np.subtract, "Mul": np.multiply, "Add": np.add, "AddV2": np.add}


def _const(tensor, depth=4):
  """A scalar the graph computes from constants alone (tf.layers' fused batch norm writes
  its decay as Sub(1, momentum)), or None."""
  op = tensor.op
  if op.type == "Const":
    value = tf.get_static_value(tensor)
    return None if value is None or np.ndim(value) else float(value)
  if depth and op.type in PASS_THROUGH[:2] and op.inputs:
    return _const(op.inputs[0], depth - 1)
  if depth and op.type in _FOLDED and len(op.inputs) == 2:
    a, b = (_const(t, depth - 1) for t in op.inputs)
    if a is not None and b is not None:
      dtype = tensor.dtype.as_numpy_dtype
      return float(_FOLDED[op.type](dtype(a), dtype(b)))
  return None


def _source(tensor):
  """The op behind Cast/Identity/ReadVariableOp chains."""
  while tensor.op.type in PASS_THROUGH and tensor.op.inputs:
    tensor = tensor.op.inputs[0]
  return tensor


def _scope(name, suffix):
  for end in ("/dropout" + suffix, suffix):  # tf.layers' drop1/dropout: the layer, drop1
    if name.endswith(end):
      return name[:-len(end)]
  return name.rsplit("/", 1)[0]


def read(ops, variable_of, statistics, run=lambda op: True):
  """Settings of `ops` (one tower's or replica's forward ops, in graph order);
  `variable_of(resource tensor)` -> the side's model variable name or None; `statistics` the
  names of its non-trainable variables (what a moving average may update); `run(op)` whether
  the step runs an assign op."""
  dropout, batch_norm, moving = [], [], {}
  for op in ops:
    if op.type == "GreaterEqual" and "dropout" in op.name:
      rate = _const(op.inputs[1])
      if rate is not None:
        dropout.append((_scope(op.name, "/GreaterEqual"), rate))
    elif op.type in FUSED:
      batch_norm.append(BatchNorm(op.name.rsplit("/", 1)[0], float(op.get_attr("epsilon")),
                                  bool(op.get_attr("is_training"))))
    elif op.type in ("Add", "AddV2") and BATCHNORM_ADD.search(op.name):
      epsilon = _const(op.inputs[1])
      if epsilon is not None:
        variance = _source(op.inputs[0])
        batch_norm.append(BatchNorm(BATCHNORM_ADD.sub("", op.name), epsilon,
                                    variable_of(variance) is None))
    elif op.type in ("AssignSubVariableOp", "AssignSub", "AssignVariableOp") and run(op):
      name = variable_of(op.inputs[0])
      momentum = _momentum(op, name, variable_of) if name in statistics else None
      if momentum is not None:
        moving[name] = momentum
  return Settings(dropout, batch_norm, moving)


def _momentum(op, name, variable_of):
  """The momentum of a moving-average update of variable `name`, or None (another assign)."""
  value = op.inputs[1].op
  if op.type in ("AssignSubVariableOp", "AssignSub") and value.type == "Mul":  # v -= (v-x) d
    consts = [c for c in map(_const, value.inputs) if c is not None]
    return 1.0 - consts[0] if len(consts) == 1 else None
  if op.type == "AssignVariableOp" and value.type in ("Add", "AddV2"):  # v m + x (1 - m)
    for term in value.inputs:
      if term.op.type != "Mul":
        continue
      consts = [_const(t) for t in term.op.inputs]
      others = [t for t, c in zip(term.op.inputs, consts) if c is None]
      if len(others) == 1 and variable_of(_source(others[0])) == name:
        return next(c for c in consts if c is not None)
  return None


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
