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
  label smoothing  each softmax cross-entropy's labels: y (1 - e) + e / K, or as fed

porting.layer_mismatches says each difference between the two sides' in one line.
"""

import dataclasses
import re

import numpy as np
import tensorflow as tf

from porting.graph_values import constant as _const
from porting.graph_values import source as _source
from porting.graph_values import through as _through

# tf.nn.batch_normalization's variance + epsilon: `.../batchnorm/add` (tf_slim's second
# call in a scope: `batchnorm_1/add`).
BATCHNORM_ADD = re.compile(r"/batchnorm(_\d+)?/add$")
FUSED = ("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")
ASSIGNS = ("AssignSubVariableOp", "AssignSub", "AssignVariableOp", "Assign")


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
  the side shows none through its framework (penalties added by hand); debiased {variable:
  momentum} of those updated zero-debiased (assign_moving_average's default); unread
  [variable] assigned by the step in a form the kit does not know (not compared); roles
  {variable: what it is} of a debiased average's own state (`biased`, `local_step`)."""
  dropout: list
  batch_norm: list
  moving: dict
  regularization: dict = None
  debiased: dict = dataclasses.field(default_factory=dict)
  unread: list = dataclasses.field(default_factory=list)
  roles: dict = dataclasses.field(default_factory=dict)
  # [(scope, epsilon, kind)] of the normalizations over each example's own values the kit
  # recognises, kind "layer norm" (tf.contrib / tf_slim's, BERT's, Keras's), "group norm"
  # (over a grouped reshape) or "instance norm" (over the positions): statistics from one
  # example, through tf.nn.batch_normalization or rsqrt(variance + epsilon).
  layer_norm: list = dataclasses.field(default_factory=list)
  # The label smoothing of each softmax cross-entropy, in call order: e where its labels are
  # y (1 - e) + e / K (tf.compat.v1.losses.softmax_cross_entropy's label_smoothing, Keras's,
  # by hand), 0.0 where they are one-hot or integer labels as fed, None where not read.
  label_smoothing: list = dataclasses.field(default_factory=list)


def _per_example(variance):
  """The kind of normalization whose variance this is, where its statistics are each
  example's own ("layer norm", "group norm", "instance norm"), or None (a batch norm's, over
  the batch; a moving variance; a form not read)."""
  while variance.op.type in ("Squeeze", "Identity") and variance.op.inputs:
    variance = variance.op.inputs[0]
  op = variance.op
  if op.type != "Mean":
    return None
  axes, rank = tf.get_static_value(op.inputs[1]), op.inputs[0].shape.rank
  if axes is None or not rank:
    return None
  axes = {int(a) % rank for a in np.ravel(axes)}
  if 0 in axes:
    return None
  if rank - 1 in axes:
    return "group norm" if rank >= 5 else "layer norm"
  return "instance norm"


CROSS_ENTROPY = "SoftmaxCrossEntropyWithLogits"  # inputs: (logits, labels)
LABEL_PATH = ("StopGradient", "Identity", "Cast", "Reshape", "PreventGradient")


def _label_smoothing(labels):
  """e of labels computed as y (1 - e) + e / K (a Mul by the constant 1 - e, added to the
  share of every class); 0.0 for labels as fed or one-hot; None for any other form."""
  while labels.op.type in LABEL_PATH and labels.op.inputs:
    labels = labels.op.inputs[0]
  op = labels.op
  if op.type in ("OneHot", "Placeholder", "_Arg"):
    return 0.0
  if op.type not in ("Add", "AddV2"):
    return None
  for term in op.inputs:
    if term.op.type == "Mul":
      consts = [c for c in map(_const, term.op.inputs) if c is not None]
      if len(consts) == 1:
        return float(np.float32(1.0) - np.float32(consts[0]))
  return None


def _scope(name, suffix):
  for end in ("/dropout" + suffix, suffix):  # tf.layers' drop1/dropout: the layer, drop1
    if name.endswith(end):
      return name[:-len(end)]
  return name.rsplit("/", 1)[0]


def read(ops, variable_of, statistics, run=lambda op: True, updates=None):
  """Settings of `ops` (one tower's or replica's forward ops, in graph order);
  `variable_of(resource tensor)` -> the side's model variable name or None; `statistics` the
  names of its non-trainable variables (what a moving average may update); `run(op)` whether
  the step runs an assign op; `updates` the ops whose assigns are read (default `ops`: the
  towers whose UPDATE_OPS the train op runs need not be tower 0)."""
  dropout, batch_norm, layer_norm = [], [], []
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
        kind = _per_example(variance)
        if kind:  # tf.nn.batch_normalization over each example's values: a layer norm, ...
          layer_norm.append((BATCHNORM_ADD.sub("", op.name), epsilon, kind))
          continue
        batch_norm.append(BatchNorm(BATCHNORM_ADD.sub("", op.name), epsilon,
                                    variable_of(variance) is None))
    elif op.type in ("Rsqrt", "Sqrt") or (op.type == "Pow" and _const(op.inputs[1]) in (
        0.5, -0.5)):
      # rsqrt(variance + epsilon) outside tf.nn.batch_normalization: Keras 3's layer and
      # group norms, tf_slim's group_norm; (variance + epsilon) ** 0.5 or its sqrt, the
      # layer norms TF1 Transformers wrote by hand. A batch's statistics here are a hand-written
      # batch norm's, not read (its numbers are compared).
      add = _source(op.inputs[0])
      if add.op.type in ("Add", "AddV2") and not BATCHNORM_ADD.search(add.op.name):
        a, b = add.op.inputs[0], add.op.inputs[1]
        for v, e in ((a, b), (b, a)):
          epsilon, kind = _const(e), _per_example(_source(v))
          if epsilon is not None and kind:
            layer_norm.append((op.name.rsplit("/", 1)[0], epsilon, kind))
            break
  smoothing = [_label_smoothing(op.inputs[1]) for op in ops if op.type == CROSS_ENTROPY]
  smoothing += [0.0 for op in ops if op.type == "Sparse" + CROSS_ENTROPY]  # integer labels
  found = Settings(dropout, batch_norm, {}, layer_norm=layer_norm, label_smoothing=smoothing)
  for op in ops if updates is None else updates:
    if op.type in ASSIGNS and run(op):
      name = variable_of(op.inputs[0])
      if name in statistics:
        _update(op, name, variable_of, found)
  for name, role in found.roles.items():  # a debiased average's own state, not a statistic
    found.moving.pop(name, None)
    if name in found.unread:
      found.unread.remove(name)
  return found


def _update(op, name, variable_of, found):
  """Records in `found` the moving-average update `op` makes of variable `name`: its momentum
  (and whether it is zero-debiased), or `name` as unread where the form is not one known."""
  value = _through(op.inputs[1])
  delta = None
  if op.type in ("AssignSubVariableOp", "AssignSub"):  # TF1: v -= (v - x)(1 - m)
    delta = value
  elif value.op.type == "Sub" and _is(value.op.inputs[0], name, variable_of):
    delta = _through(value.op.inputs[1])  # Keras 3's assign_sub: v.assign(v - (v - x) d)
  if delta is not None and delta.op.type == "Mul":
    consts = [c for c in map(_const, delta.op.inputs) if c is not None]
    if len(consts) == 1:
      found.moving[name] = 1.0 - consts[0]
      return
  elif value.op.type in ("Add", "AddV2"):  # Keras 3: v m + x (1 - m)
    for term in value.op.inputs:
      if term.op.type != "Mul":
        continue
      consts = [_const(t) for t in term.op.inputs]
      others = [t for t, c in zip(term.op.inputs, consts) if c is None]
      if len(others) == 1 and _is(others[0], name, variable_of):
        found.moving[name] = next(c for c in consts if c is not None)
        return
  elif value.op.type == "RealDiv":  # zero-debiased: v = biased / (1 - m ** local_step)
    debiased = _debiased(value.op, variable_of)
    if debiased is not None:
      momentum, biased, step = debiased
      found.moving[name] = momentum
      found.debiased[name] = momentum
      found.roles.update({biased: f"{name}'s biased average (zero_debias)",
                          step: f"{name}'s update count (zero_debias)"})
      return
  if name not in found.unread:
    found.unread.append(name)


def _debiased(div, variable_of):
  """(momentum, biased variable, local_step variable) of assign_moving_average's
  zero-debiased update, biased / (1 - pow(m, local_step)), or None."""
  biased = variable_of(_source(_through(div.inputs[0])))
  factor = _through(div.inputs[1]).op
  if biased is None or factor.type != "Sub" or _const(factor.inputs[0]) != 1.0:
    return None
  power = _through(factor.inputs[1]).op
  if power.type != "Pow":
    return None
  momentum = _const(power.inputs[0])
  step = variable_of(_source(_through(power.inputs[1])))
  return None if momentum is None or step is None else (momentum, biased, step)


def _is(tensor, name, variable_of):
  return variable_of(_source(_through(tensor))) == name
