"""The moving averages of the weights (the original's EMA) under any strategy.

`Shadows(strategy, shards, decay, num_updates)` holds one shadow variable per weight shard;
`apply()` moves them towards the shards (in the step, in cross-replica context); `of(shard)`
is a shard's shadow.

Under MirroredStrategy, tf.train.ExponentialMovingAverage mirrors every shadow: one copy per
replica, each updated every step to the same numbers (N x the work and the memory). Nothing in
a replica's step reads a shadow (checkpoints, evaluation and export read one value), so there
the shadows are one plain variable each on the first replica's device, updated once per step
from that device's copy of the weights, with the ops of TF's EMA: the same bits, since every
replica holds the same weights (tests/test_shadows.py). At 4 replicas on 2 CPU cores, batch 8:
1.0-5.2 ms less CPU per step of ~68 (BENCHMARKS.md). Under the other strategies a variable
is one copy already (one device, central storage) or lives on ps tasks or in other worker
processes: TF's EMA there, as the original's.
"""

import tensorflow as tf


def one_copy(strategy):
  """Whether `strategy` gets one copy of the shadows beside its first replica."""
  return isinstance(strategy, tf.distribute.MirroredStrategy)


class Shadows:
  """The shadows of `shards` (created now, eagerly: an EMA cannot create them inside a
  tf.function), with num_updates = the variable `num_updates` (the global step)."""

  def __init__(self, strategy, shards, decay, num_updates):
    self.strategy, self.shards = strategy, list(shards)
    self.decay, self.num_updates = decay, num_updates
    self.ema = None
    if one_copy(strategy):
      with tf.device(strategy.extended.worker_devices[0]):
        self.copies = [tf.Variable(s.read_value(), trainable=False,
                                   name=s.name.split(":")[0] + "/ExponentialMovingAverage")
                       for s in self.shards]
    else:
      with strategy.scope():
        self.ema = tf.train.ExponentialMovingAverage(decay, num_updates=num_updates)
        # Each shard's shadow is colocated with the shard (never partitioned again).
        self.ema.apply(self.shards)
      self.copies = [self.ema.average(s) for s in self.shards]

  def of(self, shard):
    return self.copies[[s.ref() for s in self.shards].index(shard.ref())]

  def apply(self):
    """One EMA step of every shadow, reading the shards as they are now."""
    if self.ema is not None:
      with self.strategy.scope():  # EMA looks its shadows up by the scoped variables.
        self.ema.apply(self.shards)
      return
    # tf.train.ExponentialMovingAverage.apply with num_updates and no zero debias, op for op:
    # decay = min(decay, (1 + n) / (10 + n)) in float32, then assign_moving_average's
    # shadow -= (shadow - value) * (1 - decay).
    n = tf.cast(self.num_updates, tf.float32)
    decay = tf.minimum(tf.constant(self.decay, tf.float32), (1.0 + n) / (10.0 + n))
    complement = 1.0 - decay
    for shard, shadow in zip(self.shards, self.copies):
      value = self.strategy.experimental_local_results(shard)[0]  # the first replica's copy
      shadow.assign_sub((shadow - value) * complement)
