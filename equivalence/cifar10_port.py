"""This project's CIFAR-10 pair as a porting.Port: the kit's first user.

The TF1 side is compat_v1's tower (`tower_params`: get_variable on /cpu:0, reused by every
tower) with the shared model and the tutorial's tower loss; the TF2 side the same model's
variables in a tf.Module, with strategies' step's reduction: each replica's loss is the
tower's, its gradients averaged as average_gradients averages (gradient_reduction="mean"; or
the TF2 idiom, "sum", to see where it differs); on both the staircase schedule (TF1's
GradientDescentOptimizer, a Keras SGD) and the moving averages of the weights.
`python -m equivalence` prints the kit's report of it; tests/test_equivalence.py holds it to
the bit.
"""

import keras
import tensorflow as tf

from cifar10 import data_sources as sources
from cifar10 import devices as device_plan
from cifar10 import input_pipeline as ip
from cifar10 import losses
from cifar10 import model
from cifar10 import schedule
from cifar10.hparams import DEFAULT
from compat_v1.step import tower_params
import porting

v1 = tf.compat.v1


class Cifar10(tf.Module):
  """The model's variables under their TF1 names ('conv1/weights', ...)."""

  def __init__(self, initial_values):
    super().__init__(name=None)
    self.params = {n: tf.Variable(initial_values[n], name=n) for n in model.VARIABLE_NAMES}


class _Schedule(keras.optimizers.schedules.LearningRateSchedule):
  """cifar10.schedule on the optimizer's step count (TF1: the global step)."""

  def __init__(self, decay_steps):
    self.decay_steps = decay_steps

  def __call__(self, step):
    return schedule.learning_rate(step, self.decay_steps)

  def get_config(self):
    return {"decay_steps": self.decay_steps}


def port(seed, decay_steps, ema_order="after_update", gradient_reduction="mean"):
  """The Port of the two trainers' shared core at `seed`, decaying every `decay_steps`, with
  the moving averages of the weights (the EMA applied after the update, as both trainers do
  by default; ema_order="before_update" is the original's usual order on the TF1 side).

  gradient_reduction="mean" is strategies' step (each replica the tower's loss, the gradients
  averaged as average_gradients averages them); "sum" is the TF2 idiom instead
  (losses.replica_loss: the sum over the global batch, 1/N of the weight decay, summed), which
  rounds differently where N is not a power of two.
  """
  initial = model.initial_values(seed)

  def tower_loss(images, labels):
    # Where compat_v1 keeps them: the first of the kit's devices if they are GPUs, else /cpu:0.
    params = tower_params(initial, device_plan.parameter_device(porting.replica_devices(1)))
    logits = model.inference(params, images)
    return losses.tower_loss(logits, labels, params), logits

  def replica_loss(net, images, labels, global_batch_size):
    logits = model.inference(net.params, images)
    if gradient_reduction == "sum":
      replicas = tf.distribute.get_strategy().num_replicas_in_sync
      return losses.replica_loss(logits, labels, net.params, global_batch_size,
                                 replicas), logits
    return losses.tower_loss(logits, labels, net.params), logits  # over this replica's slice

  return porting.Port(
      tower_loss=tower_loss,
      tf1_optimizer=lambda step: v1.train.GradientDescentOptimizer(
          schedule.learning_rate(step, decay_steps)),
      build_model=lambda: Cifar10(initial),
      replica_loss=replica_loss,
      tf2_optimizer=lambda: keras.optimizers.SGD(_Schedule(decay_steps)),
      tf1_ema=lambda step: v1.train.ExponentialMovingAverage(DEFAULT.moving_average_decay,
                                                             num_updates=step),
      tf2_ema=lambda optimizer: tf.train.ExponentialMovingAverage(
          DEFAULT.moving_average_decay, num_updates=optimizer.iterations),
      ema_order=ema_order, gradient_reduction=gradient_reduction)


def batches(seed, global_batch_size, steps):
  """The first `steps` global batches of the shared synthetic training stream, as numpy."""
  stream = ip.train_dataset(sources.synthetic_source(seed), seed=seed,
                            global_batch_size=global_batch_size)
  return [(x.numpy(), y.numpy()) for x, y in stream.take(steps)]
