"""TF1BatchNorm: a Keras 3 layer that normalizes and updates its moving statistics as TF1's
batch-norm code did, to the bit, so that a port of it compares EQUAL.

What Keras's BatchNormalization does otherwise:
- it updates v m + x (1 - m); TF1's `assign_moving_average` v - (v - x)(1 - m), which
  rounds apart (1 ULP in the first steps);
- `assign_moving_average` is zero-debiased by default (Inception's slim ops, a hand-written
  batch norm, `ExponentialMovingAverage(zero_debias=True)`): a `biased` average from zeros
  and a `local_step` count, the statistic biased / (1 - m ** local_step). The first update
  is the batch's statistic itself; a plain average from the initial value is another number;
- each replica updates its own copy from its own batch (the checkpoint saves replica 0's),
  where the TF1 train op ran one tower's UPDATE_OPS (the first, or the last: Inception kept
  the last tower's).

  bn = porting.TF1BatchNorm(momentum=0.9997, epsilon=0.001, scale=False,
                            zero_debias=True, update_from="last_tower")

The forward pass is TF1's: tf.nn.moments over every axis but the last, then
tf.nn.batch_normalization. Its variables are created in the order of
tf.contrib.layers.batch_norm's own path: beta, gamma (as center/scale say), moving_mean,
moving_variance, then each statistic's `biased` and `local_step` where zero-debiased.
tf.layers' batch norm (and tf_slim's by default) makes gamma before beta; porting pairs
them by shape and order, each role with its own (gamma with gamma: porting.matching).
"""

import tensorflow as tf

from porting import errors
from porting.errors import PortError

keras = errors.keras_for("porting.batch_norm")  # on TF 1.15 (the recorder): one line, not a crash

# Not "all_towers": TF1's train op runs every tower's UPDATE_OPS with no order between them, so
# their read-modify-writes of one variable may interleave, which no sequence of updates is.
UPDATE_FROM = ("own_replica", "first_tower", "last_tower")


class TF1BatchNorm(keras.layers.Layer):
  """Batch norm over the last axis with TF1's moving-average update.

  momentum: TF1's `decay`. zero_debias: `assign_moving_average`'s (True, its default;
  tf.layers and tf_slim's batch_norm pass False). update_from: whose batch statistics update
  the moving ones in a training step: "own_replica" (Keras's way), or as the TF1 train op ran
  one tower's UPDATE_OPS: "first_tower", "last_tower". Those two gather every replica's
  statistics (one all-gather) so that every replica's copy holds what TF1's one variable
  holds."""

  def __init__(self, momentum=0.999, epsilon=0.001, center=True, scale=True,
               zero_debias=True, update_from="own_replica", **kwargs):
    super().__init__(**kwargs)
    if update_from not in UPDATE_FROM:
      raise PortError(f"update_from must be one of {', '.join(UPDATE_FROM)}, got "
                      f"{update_from!r}")
    self.momentum, self.epsilon = float(momentum), float(epsilon)
    self.center, self.scale = center, scale
    self.zero_debias, self.update_from = zero_debias, update_from

  def build(self, input_shape):
    shape = (input_shape[-1],)
    zeros, ones = keras.initializers.Zeros(), keras.initializers.Ones()
    self.beta = self.add_weight(shape=shape, initializer=zeros, name="beta") if (
        self.center) else None
    self.gamma = self.add_weight(shape=shape, initializer=ones, name="gamma") if (
        self.scale) else None
    state = dict(shape=shape, trainable=False, autocast=False)
    self.moving_mean = self.add_weight(initializer=zeros, name="moving_mean", **state)
    self.moving_variance = self.add_weight(initializer=ones, name="moving_variance", **state)
    if self.zero_debias:  # created as assign_moving_average creates them: per statistic
      # Attributes, not a dict of them: tf.train.Checkpoint reaches a layer's variables
      # through its attributes only.
      for base in ("moving_mean", "moving_variance"):
        setattr(self, f"{base}_biased",
                self.add_weight(initializer=zeros, name=f"{base}_biased", **state))
        setattr(self, f"{base}_local_step",
                self.add_weight(shape=(), initializer=zeros, name=f"{base}_local_step",
                                trainable=False, autocast=False))

  def call(self, inputs, training=False):
    if not training:
      return tf.nn.batch_normalization(inputs, self.moving_mean, self.moving_variance,
                                       self.beta, self.gamma, self.epsilon)
    axes = list(range(len(inputs.shape) - 1))
    mean, variance = tf.nn.moments(inputs, axes)
    for base, value in (("moving_mean", mean), ("moving_variance", variance)):
      for batch_value in self._sources(value):
        self._update(base, batch_value)
    return tf.nn.batch_normalization(inputs, mean, variance, self.beta, self.gamma,
                                     self.epsilon)

  def _sources(self, value):
    """The batch statistics, in update order, that move this replica's copy."""
    if self.update_from == "own_replica":
      return [value]
    ctx = tf.distribute.get_replica_context()
    n = ctx.num_replicas_in_sync if ctx is not None else 1
    if n == 1:
      return [value]
    gathered = ctx.all_gather(value[None], axis=0)  # replica order: tower order
    return [gathered[0] if self.update_from == "first_tower" else gathered[n - 1]]

  def _update(self, base, value):
    # assign_moving_average's arithmetic, op for op: decay is float32(1 - momentum).
    statistic = getattr(self, base)
    decay = tf.constant(1.0 - self.momentum, statistic.dtype)
    if not self.zero_debias:
      statistic.assign_sub((statistic - value) * decay)
      return
    biased, local_step = getattr(self, f"{base}_biased"), getattr(self, f"{base}_local_step")
    biased.assign_sub((biased - value) * decay)
    local_step.assign_add(tf.constant(1, local_step.dtype))
    factor = 1 - tf.pow(1.0 - decay, local_step)
    statistic.assign(biased / factor)
