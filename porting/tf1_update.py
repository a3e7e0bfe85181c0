"""What the TF1 side's train op applies: each tower's loss as the script makes it, the towers'
gradients combined as its TowerCombination says (the original's `average_gradients`, or
model_deploy's sum of the clones'), the script's own transform of them (Port.tf1_gradients:
its clipping), and the rate the optimizer reads."""

import tensorflow as tf

from porting.errors import PortError


def average_gradients(tower_grads):
  """The original's: per variable, the mean over towers of each tower's gradient."""
  averaged = []
  for grads_and_vars in zip(*tower_grads):
    grads = [tf.expand_dims(g, 0) for g, _ in grads_and_vars]
    averaged.append((tf.reduce_mean(tf.concat(grads, 0), 0), grads_and_vars[0][1]))
  return averaged


def tower_loss(combination, loss, i, n, regularization):
  """Tower i's loss as the script hands it to compute_gradients: `loss` (tower_loss's) divided
  by N where the combination divides it (model_deploy's tf.div(clone_loss, 1.0 * N)), then the
  sum of `regularization` (the REGULARIZATION_LOSSES collection) added where the combination
  adds it to tower i, as model_deploy's _gather_clone_loss adds it."""
  if combination.tower_scale(n) != 1:
    loss = tf.math.divide(loss, 1.0 * n, name="scaled_tower_loss")
  adds = {"first_tower": i == 0, "every_tower": True}.get(combination.regularization, False)
  if adds and regularization:
    loss = tf.add_n([loss, tf.add_n(regularization, name="regularization_loss")])
  return loss


def combine(combination, tower_grads):
  """The towers' [(gradient, variable)] lists as one, by the combination's mean or sum."""
  if combination.gradients == "mean":
    return average_gradients(tower_grads)
  summed = sum_gradients(tower_grads)
  if combination.gradients == "scaled_sum" and len(tower_grads) > 1:
    # tf_cnn_benchmarks' aggregate_single_gradient_using_copy(use_mean=True): the float32
    # 1/N times the sum.
    return [(tf.scalar_mul(1.0 / len(tower_grads), g), v) for g, v in summed]
  return summed


def sum_gradients(tower_grads):
  """model_deploy's _sum_clones_gradients (and replicate_model_fn's dense sum): per variable,
  add_n of the towers' gradients; one tower's as it is."""
  summed = []
  for grads_and_vars in zip(*tower_grads):
    grads = [g for g, _ in grads_and_vars]
    summed.append((tf.add_n(grads) if len(grads) > 1 else grads[0], grads_and_vars[0][1]))
  return summed


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
