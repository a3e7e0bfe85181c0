"""A small model whose batch norm is written as Inception's own slim ops wrote it, and its
ports: the moving statistics updated by `assign_moving_average` with its default
zero_debias=True (a `biased` average and a `local_step` count per statistic), no gamma,
decay 0.9997, the update ops in UPDATE_OPS of each tower (the train op runs one tower's).

TF2: porting.TF1BatchNorm (the faithful port), Keras's BatchNormalization, or a hand-made
layer whose update the kit cannot read (`Net(bn="direct")`: the statistic set to the batch's).
"""

import keras
import numpy as np
import tensorflow as tf
from tensorflow.python.training import moving_averages  # what inception/slim/ops.py calls

import porting

v1 = tf.compat.v1
DECAY, EPSILON, FILTERS, CLASSES, SIZE, PER_REPLICA = 0.9997, 0.001, 4, 5, 8, 4


def _batch_norm(x, scope):
  with v1.variable_scope(scope):
    shape = [x.shape[-1]]
    beta = v1.get_variable("beta", shape, initializer=v1.zeros_initializer())
    moving_mean = v1.get_variable("moving_mean", shape, initializer=v1.zeros_initializer(),
                                  trainable=False)
    moving_variance = v1.get_variable("moving_variance", shape,
                                      initializer=v1.ones_initializer(), trainable=False)
    mean, variance = tf.nn.moments(x, [0, 1, 2])
    for update in (moving_averages.assign_moving_average(moving_mean, mean, DECAY),
                   moving_averages.assign_moving_average(moving_variance, variance, DECAY)):
      v1.add_to_collection(v1.GraphKeys.UPDATE_OPS, update)
    return tf.nn.batch_normalization(x, mean, variance, beta, None, EPSILON)


def tower_loss(images, labels):
  kernel = v1.get_variable("conv/weights", [3, 3, 3, FILTERS],
                           initializer=v1.truncated_normal_initializer(stddev=0.1, seed=1))
  x = tf.nn.conv2d(images, kernel, [1, 1, 1, 1], "SAME")
  x = tf.nn.relu(_batch_norm(x, "conv/BatchNorm"))
  x = tf.reshape(x, [x.shape[0], -1])
  weights = v1.get_variable("logits/weights", [SIZE * SIZE * FILTERS, CLASSES],
                            initializer=v1.truncated_normal_initializer(stddev=0.1, seed=2))
  logits = tf.matmul(x, weights)
  return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=labels, logits=logits)), logits


class DirectStatistics(keras.layers.Layer):
  """A team's own batch norm whose moving statistics are set to the batch's: an update the
  kit does not recognise as a moving average."""

  def build(self, input_shape):
    shape = (input_shape[-1],)
    self.beta = self.add_weight(shape=shape, initializer="zeros", name="beta")
    self.moving_mean = self.add_weight(shape=shape, initializer="zeros", name="moving_mean",
                                       trainable=False)
    self.moving_variance = self.add_weight(shape=shape, initializer="ones",
                                           name="moving_variance", trainable=False)

  def call(self, x, training=False):
    mean, variance = tf.nn.moments(x, [0, 1, 2])
    self.moving_mean.assign(mean)
    self.moving_variance.assign(variance)
    return tf.nn.batch_normalization(x, mean, variance, self.beta, None, EPSILON)


class AssignSub(DirectStatistics):
  """A team's own batch norm updating as TF1 wrote it, through Keras 3's Variable.assign_sub
  (an assign of v - delta, not TensorFlow's AssignSub)."""

  def call(self, x, training=False):
    mean, variance = tf.nn.moments(x, [0, 1, 2])
    for statistic, value in ((self.moving_mean, mean), (self.moving_variance, variance)):
      statistic.assign_sub((statistic - value) * (1 - DECAY))
    return tf.nn.batch_normalization(x, mean, variance, self.beta, None, EPSILON)


class Net(keras.Model):
  """bn: "tf1" (porting.TF1BatchNorm, `update_from` as given), "keras", "direct" or
  "assign_sub"."""

  def __init__(self, bn="tf1", update_from="own_replica", activation="relu"):
    super().__init__(name="net")
    self.activation = getattr(tf.nn, activation)  # "elu": a port with another activation
    self.conv = keras.layers.Conv2D(FILTERS, 3, padding="same", use_bias=False, name="conv")
    self.bn = {"tf1": lambda: porting.TF1BatchNorm(DECAY, EPSILON, scale=False,
                                                   update_from=update_from, name="bn"),
               "keras": lambda: keras.layers.BatchNormalization(
                   momentum=DECAY, epsilon=EPSILON, scale=False, name="bn"),
               "direct": lambda: DirectStatistics(name="bn"),
               "assign_sub": lambda: AssignSub(name="bn")}[bn]()
    self.logits = keras.layers.Dense(CLASSES, use_bias=False, name="logits")
    self(tf.zeros((1, SIZE, SIZE, 3)))

  def call(self, x, training=False):
    x = self.activation(self.bn(self.conv(x), training=training))
    return self.logits(tf.reshape(x, [tf.shape(x)[0], -1]))


def replica_loss(model, images, labels, global_batch_size):
  del global_batch_size  # the tower's own mean: gradient_reduction="mean"
  logits = model(images, training=True)
  return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=labels, logits=logits)), logits


def port(bn="tf1", update_from="own_replica", **changes):
  fields = dict(tower_loss=tower_loss, build_model=lambda: Net(bn, update_from),
                replica_loss=replica_loss,
                tf1_optimizer=lambda step: v1.train.GradientDescentOptimizer(0.1),
                tf2_optimizer=lambda: keras.optimizers.SGD(0.1), gradient_reduction="mean")
  fields.update(changes)
  return porting.Port(**fields)


def batches(replicas, steps=3, seed=0):
  rng = np.random.default_rng(seed)
  n = replicas * PER_REPLICA
  return [(rng.normal(size=(n, SIZE, SIZE, 3)).astype(np.float32),
           rng.integers(0, CLASSES, size=n).astype(np.int32)) for _ in range(steps)]
