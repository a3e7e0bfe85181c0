"""A Saver that restores our graph variables from either trainer's checkpoint keys.

A tf.compat.v1 Saver maps checkpoint keys to variables, so the object-based keys of a
strategies.train checkpoint restore into get_variable variables as well as the plain names of
a compat_v1 checkpoint do (cifar10.checkpoints finds the keys). This is how compat_v1.eval and
`compat_v1.train --init_from` read both worlds.
"""

import tensorflow as tf

from cifar10 import checkpoints
from cifar10 import model


def saver(path, global_step, weights=None, averages=None):
  """Saver restoring {name: variable} dicts `weights` / `averages` and the global step."""
  kinds = ["step"] + (["weights"] if weights else []) + (["ema"] if averages else [])
  where = checkpoints.keys(path, kinds)
  var_list = {where[("step", "global_step")]: global_step}
  for kind, variables in (("weights", weights), ("ema", averages)):
    for name in model.VARIABLE_NAMES if variables else []:
      var_list[where[(kind, name)]] = variables[name]
  return tf.compat.v1.train.Saver(var_list)
