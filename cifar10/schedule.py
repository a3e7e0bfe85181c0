"""The learning-rate schedule both trainers use: the tutorial's staircase exponential decay.

decay_steps = int(50000 / batch_size * 350) as in the original `cifar10.train()`, where
batch_size is the PER-TOWER batch. Known quirk of the original: the multi-GPU trainer
processes batch_size * num_gpus examples per step but keeps that decay_steps, so with N GPUs
the rate decays after N times as many epochs as intended. `decay_steps(...,
per_global_batch=True)` counts epochs of the global batch instead.
"""

import tensorflow as tf

from cifar10.hparams import DEFAULT


def decay_steps(batch_size, num_replicas=1, per_global_batch=False, hparams=DEFAULT):
  """Steps between decays: int(examples_per_epoch / batch * epochs_per_decay)."""
  batch = batch_size * num_replicas if per_global_batch else batch_size
  return int(hparams.num_examples_per_epoch_for_train / batch * hparams.num_epochs_per_decay)


def learning_rate(global_step, steps_between_decays, hparams=DEFAULT):
  """initial * factor ** floor(step / decay_steps), as a float32 scalar tensor.

  Written with the same ops in the same order as `tf.compat.v1.train.exponential_decay(...,
  staircase=True)` so both trainers get the same float32 bits at every step.
  """
  step = tf.cast(global_step, tf.float32)
  initial = tf.constant(hparams.initial_learning_rate, tf.float32)
  p = tf.floor(step / tf.cast(steps_between_decays, tf.float32))
  return tf.multiply(initial, tf.pow(tf.cast(hparams.learning_rate_decay_factor, tf.float32), p))
