"""Loads a checkpoint of any origin into graph variables: the bridge for --init_from and eval.

A tf.compat.v1 Saver restores a key only into a variable of the same dtype, so it refuses the
original tutorial's checkpoints (its `global_step` is a float32 `get_variable`, and with
`--use_fp16` every weight and average is float16). `cifar10.checkpoints.read` finds the values
under any of the three key layouts (original, compat_v1, strategies.train) and gives them as
float32 / int numpy; `Loader` assigns them through placeholders, so a `.meta` never embeds
them and one graph loads checkpoint after checkpoint.
"""

import tensorflow as tf

from cifar10 import checkpoints
from cifar10 import model

v1 = tf.compat.v1


class Loader:
  """Assigns a checkpoints.State to graph variables; build it before the graph is finalized.

  weights / averages: {TF1 name: variable} (either may be None); global_step: a variable.
  """

  def __init__(self, global_step, weights=None, averages=None):
    self.kinds = ("step",) + (("weights",) if weights else ()) + (("ema",) if averages else ())
    targets = {("step", "global_step"): global_step}
    for kind, variables in (("weights", weights), ("ema", averages)):
      for name in model.VARIABLE_NAMES if variables else ():
        targets[(kind, name)] = variables[name]
    self.feeds = {}
    ops = []
    for key, variable in targets.items():
      value = v1.placeholder(variable.dtype.base_dtype, variable.shape)
      self.feeds[key] = value
      ops.append(variable.assign(value, read_value=False))
    self.op = tf.group(*ops)

  def load(self, sess, path):
    """Reads checkpoint `path` (UsageError if it lacks a variable) and assigns it; returns
    its checkpoints.State."""
    state = checkpoints.read(path, kinds=self.kinds)
    self.assign(sess, state)
    return state

  def assign(self, sess, state):
    """Assigns checkpoints.State `state` (read by the caller) to the variables."""
    values = {("step", "global_step"): state.global_step}
    values.update({("weights", n): v for n, v in state.weights.items()})
    values.update({("ema", n): v for n, v in state.averages.items()})
    sess.run(self.op, {self.feeds[k]: v for k, v in values.items() if k in self.feeds})
