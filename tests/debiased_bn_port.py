"""A sixth model for the porting kit: tf.compat.v1.layers with a batch norm written by hand
whose moving statistics are zero-debiased, a residual block, momentum on a piecewise-constant
rate, an EMA of the weights; and its Keras 3 port.

TF1 (`tower_loss`): tf.compat.v1.layers.conv2d (no bias, an L2 kernel_regularizer into
REGULARIZATION_LOSSES) followed by `batch_norm`, the team's own function: gamma and beta
get_variables, the batch's moments, normalization written out as (x - mean) x rsqrt(var + eps)
x gamma + beta (no tf.nn.batch_normalization), and the moving statistics updated by
`moving_averages.assign_moving_average(..., zero_debias=True)` (named explicitly: it makes
`biased` and `local_step` variables) into UPDATE_OPS; a residual block (the block's input is
read by its first convolution and by the skip connection); global average pooling;
tf.compat.v1.layers.dense logits; MomentumOptimizer(0.9) on tf.train.piecewise_constant.
TF2 (`Net`): Keras Conv2D/Dense and `HandBatchNorm`, the same arithmetic and the same update
op for op; the TF2 idiom's loss (gradient_reduction "sum": the global batch's mean, the
regularization scaled by the replicas); porting.optimizers.TF1Momentum.

The team's script keeps a float32 global step (get_variable): Port(tf1_global_step=...).
"""

import warnings

import numpy as np
import tensorflow as tf
import keras
from tensorflow.python.training import moving_averages

from porting import Port
from porting.optimizers import TF1Momentum
from porting.tf1_layers import layers as _tf1_layers

# Written as TF1 code was; the deprecation notices are TensorFlow telling the team to port it.
warnings.filterwarnings("ignore", message="`tf.layers.(conv2d|dense)` is deprecated")

v1 = tf.compat.v1
SIZE, FILTERS, CLASSES, PER_REPLICA = 8, 4, 5, 4
BN_MOMENTUM, EPSILON = 0.99, 1e-3
WEIGHT_DECAY = 5e-4
BOUNDARIES, RATES = [1], [0.1, 0.01]  # steps 0 and 1 at 0.1, then 0.01
MOMENTUM = 0.9
EMA_DECAY = 0.999


# --- TF1 ---------------------------------------------------------------------------------------

def _l2(weights):
  return WEIGHT_DECAY * tf.nn.l2_loss(weights)


def batch_norm(x, name):
  """The team's batch norm: the batch's moments, normalized by hand; the moving statistics
  zero-debiased by assign_moving_average into UPDATE_OPS."""
  with v1.variable_scope(name):
    shape = x.get_shape()[-1:]
    gamma = v1.get_variable("gamma", shape, initializer=v1.ones_initializer())
    beta = v1.get_variable("beta", shape, initializer=v1.zeros_initializer())
    moving_mean = v1.get_variable("moving_mean", shape, initializer=v1.zeros_initializer(),
                                  trainable=False)
    moving_variance = v1.get_variable("moving_variance", shape, trainable=False,
                                      initializer=v1.ones_initializer())
    mean, variance = tf.nn.moments(x, [0, 1, 2])
    for variable, value in ((moving_mean, mean), (moving_variance, variance)):
      v1.add_to_collection(v1.GraphKeys.UPDATE_OPS, moving_averages.assign_moving_average(
          variable, value, BN_MOMENTUM, zero_debias=True))
    return (x - mean) * tf.math.rsqrt(variance + EPSILON) * gamma + beta


def tower_loss(images, labels, penalty=True):
  """One tower: (mean cross-entropy + the regularization losses, logits). penalty=False: no
  kernel_regularizer (a one-fault port: the penalty in the TF2 loss only)."""
  layers = _tf1_layers()
  regularizer = _l2 if penalty else None
  conv = lambda x, name, seed: layers.conv2d(  # he_normal: variance scaling 2.0, fan in
      x, FILTERS, 3, padding="same", use_bias=False, name=name, kernel_regularizer=regularizer,
      kernel_initializer=v1.variance_scaling_initializer(2.0, seed=seed))
  x = tf.nn.relu(batch_norm(conv(images, "conv1", 1), "bn1"))
  y = tf.nn.relu(batch_norm(conv(x, "res_a", 2), "bn_a"))
  y = batch_norm(conv(y, "res_b", 3), "bn_b")
  x = tf.nn.relu(x + y)  # the residual: x read twice
  logits = layers.dense(tf.reduce_mean(x, [1, 2]), CLASSES, name="logits",
                        kernel_regularizer=regularizer,
                        kernel_initializer=v1.glorot_uniform_initializer(seed=4))
  loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                       logits=logits))
  regularization = v1.get_collection(v1.GraphKeys.REGULARIZATION_LOSSES)
  if regularization:
    loss += tf.add_n(regularization)
  return loss, logits


def tf1_optimizer(global_step):
  # Float boundaries for the float32 step, as TF1 requires (the types must match).
  rate = v1.train.piecewise_constant(global_step, [float(b) for b in BOUNDARIES], RATES)
  return v1.train.MomentumOptimizer(rate, MOMENTUM)


def tf1_global_step():
  """The script's own: float32, made with get_variable before the towers."""
  return v1.get_variable("global_step", [], initializer=v1.constant_initializer(0),
                         trainable=False)


def tf1_ema(global_step):
  return v1.train.ExponentialMovingAverage(EMA_DECAY, num_updates=global_step)


# --- TF2 ---------------------------------------------------------------------------------------

class HandBatchNorm(keras.layers.Layer):
  """The team's batch norm in Keras: the same arithmetic, and `_zero_debias`'s update op for
  op (an AssignSub on `biased`, an AssignAdd on `local_step`, the statistic assigned
  biased / (1 - (1 - decay)^step)). Variables in TF1's creation order."""

  def build(self, input_shape):
    shape = (input_shape[-1],)
    self.gamma = self.add_weight(name="gamma", shape=shape, initializer="ones")
    self.beta = self.add_weight(name="beta", shape=shape, initializer="zeros")
    self.moving_mean = self.add_weight(name="moving_mean", shape=shape, initializer="zeros",
                                       trainable=False)
    self.moving_variance = self.add_weight(name="moving_variance", shape=shape,
                                           initializer="ones", trainable=False)
    self.debias = [(self.add_weight(name=f"{kind}_biased", shape=shape, initializer="zeros",
                                    trainable=False),
                    self.add_weight(name=f"{kind}_local_step", shape=(), initializer="zeros",
                                    trainable=False)) for kind in ("mean", "variance")]

  def call(self, x, training=False):
    if training:
      mean, variance = tf.nn.moments(x, [0, 1, 2])
      for variable, (biased, step), value in zip((self.moving_mean, self.moving_variance),
                                                 self.debias, (mean, variance)):
        biased, step = biased.value, step.value  # the tf.Variables: TF1's assign ops
        decay = tf.convert_to_tensor(1.0 - BN_MOMENTUM)
        update_biased = biased.assign_sub((biased - value) * decay)
        update_step = step.assign_add(1)
        variable.value.assign(update_biased / (1 - tf.pow(1.0 - decay, update_step)))
    else:
      mean, variance = self.moving_mean, self.moving_variance
    return (x - mean) * tf.math.rsqrt(variance + EPSILON) * self.gamma + self.beta


class Net(keras.Model):
  """The port. penalty=False: no kernel_regularizer (the penalty in the TF1 loss only)."""

  def __init__(self, penalty=True):
    super().__init__(name="net")
    # L2(c / 2): Keras's L2 is c' x sum(w^2), TF1's penalty c x sum(w^2) / 2.
    regularizer = keras.regularizers.L2(WEIGHT_DECAY / 2) if penalty else None
    conv = lambda name, seed: keras.layers.Conv2D(
        FILTERS, 3, padding="same", use_bias=False, name=name, kernel_regularizer=regularizer,
        kernel_initializer=keras.initializers.HeNormal(seed))
    # Attributes in the TF1 creation order: a Keras model lists its weights in that order.
    self.conv1, self.bn1 = conv("conv1", 1), HandBatchNorm(name="bn1")
    self.res_a, self.bn_a = conv("res_a", 2), HandBatchNorm(name="bn_a")
    self.res_b, self.bn_b = conv("res_b", 3), HandBatchNorm(name="bn_b")
    self.logits = keras.layers.Dense(CLASSES, name="logits", kernel_regularizer=regularizer,
                                     kernel_initializer=keras.initializers.GlorotUniform(4))
    self(tf.zeros((1, SIZE, SIZE, 3)))

  def call(self, images, training=False):
    x = tf.nn.relu(self.bn1(self.conv1(images), training=training))
    y = tf.nn.relu(self.bn_a(self.res_a(x), training=training))
    y = self.bn_b(self.res_b(y), training=training)
    return self.logits(tf.reduce_mean(tf.nn.relu(x + y), [1, 2]))


def replica_loss(model, images, labels, global_batch_size, penalty=True):
  """The TF2 idiom (gradient_reduction "sum"): the replica's cross-entropies summed over the
  global batch, plus 1/N of the regularization. penalty=False leaves it out (a one-fault
  port: the penalty in the TF1 loss only, though the port's layers still regularize)."""
  logits = model(images, training=True)
  per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
  loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch_size)
  if penalty and model.losses:
    loss += tf.nn.scale_regularization_loss(tf.add_n(model.losses))
  return loss, logits


def tf2_optimizer(keras_sgd=False):
  rate = keras.optimizers.schedules.PiecewiseConstantDecay(BOUNDARIES, RATES)
  if keras_sgd:  # fault (a): Keras's SGD keeps a velocity v = m v - lr g, not TF1's accum
    return keras.optimizers.SGD(rate, momentum=MOMENTUM)
  return TF1Momentum(rate, MOMENTUM)


def tf2_ema(optimizer):
  return tf.train.ExponentialMovingAverage(EMA_DECAY, num_updates=optimizer.iterations)


def port(replicas=2, ema=True, **changes):
  """The faithful port (fields replaced by `changes`)."""
  del replicas  # the same Port at every N
  fields = dict(tower_loss=tower_loss, tf1_optimizer=tf1_optimizer, build_model=Net,
                replica_loss=replica_loss, tf2_optimizer=tf2_optimizer,
                tf1_global_step=tf1_global_step)
  if ema:
    fields.update(tf1_ema=tf1_ema, tf2_ema=tf2_ema)
  fields.update(changes)
  return Port(**fields)


# One-fault ports.
def keras_sgd_port(replicas=2):
  return port(replicas, tf2_optimizer=lambda: tf2_optimizer(keras_sgd=True))


def penalty_in_tf1_only_port(replicas=2):
  """The port's loss leaves model.losses out (its layers still carry the regularizers)."""
  return port(replicas, replica_loss=lambda *a: replica_loss(*a, penalty=False))


def penalty_in_tf1_only_no_regularizer_port(replicas=2):
  """The port's layers have no kernel_regularizer at all."""
  return port(replicas, build_model=lambda: Net(penalty=False))


def penalty_in_tf2_only_port(replicas=2):
  """The TF1 layers have no kernel_regularizer; the port keeps its L2."""
  return port(replicas, tower_loss=lambda x, y: tower_loss(x, y, penalty=False))


def batches(replicas, steps=3, seed=0):
  rng = np.random.default_rng(seed)
  n = replicas * PER_REPLICA
  return [(rng.normal(size=(n, SIZE, SIZE, 3)).astype(np.float32),
           rng.integers(0, CLASSES, size=n).astype(np.int32)) for _ in range(steps)]
