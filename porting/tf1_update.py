"""What the TF1 side's train op applies: the towers' gradients averaged as the original's
`average_gradients` does, the script's own transform of them (Port.tf1_gradients: its
clipping), and the rate the optimizer reads."""

import tensorflow as tf

from porting.errors import PortError


def average_gradients(tower_grads):
  """The original's: per variable, the mean over towers of each tower's gradient."""
  averaged = []
  for grads_and_vars in zip(*tower_grads):
    grads = [tf.expand_dims(g, 0) for g, _ in grads_and_vars]
    averaged.append((tf.reduce_mean(tf.concat(grads, 0), 0), grads_and_vars[0][1]))
  return averaged


def applied(port, grads):
  """What apply_gradients gets: the averaged gradients through port.tf1_gradients (the
  script's clipping), checked to hold the same variables in the same order."""
  if port.tf1_gradients is None:
    return grads
  out = list(port.tf1_gradients(list(grads)))
  if not all(isinstance(p, (tuple, list)) and len(p) == 2 for p in out) or (
      [id(v) for _, v in out] != [id(v) for _, v in grads]):
    raise PortError("tf1_gradients must return the [(gradient, variable)] it is given, "
                    "with each gradient transformed (tf.clip_by_global_norm's): the same "
                    "variables in the same order")
  return out


def rate(optimizer):
  """The optimizer's learning rate as a float32 tensor: GradientDescent and Momentum keep it
  as `_learning_rate`, Adam as `_lr`, RMSProp, Adagrad and the others as one of the two."""
  for attribute in ("_learning_rate", "_lr"):
    if hasattr(optimizer, attribute):
      value = optimizer._call_if_callable(getattr(optimizer, attribute))  # pylint: disable=protected-access
      return tf.convert_to_tensor(value, tf.float32)
  raise PortError(f"tf1_optimizer returned {type(optimizer).__name__}, which keeps no learning "
                  "rate where tf.compat.v1.train's optimizers do (_learning_rate or _lr): "
                  "set self._learning_rate to its rate (a float or a tensor) in its __init__")
