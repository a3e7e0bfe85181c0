"""A TF1 tower and its Keras 3 port for recording on TensorFlow 1.15 (Python 3.7) and
comparing here: the module imports only what 1.15 has (the port's Keras parts are built
lazily, where Keras 3 is)."""

import numpy as np
import tensorflow as tf

import porting

v1 = tf.compat.v1
SIZE, FILTERS, CLASSES, PER_REPLICA = 8, 4, 5, 4


def tower_loss(images, labels):
  kernel = v1.get_variable("conv/weights", [3, 3, 3, FILTERS],
                           initializer=v1.truncated_normal_initializer(stddev=0.1, seed=1))
  x = tf.nn.relu(tf.nn.conv2d(images, kernel, [1, 1, 1, 1], "SAME"))
  x = tf.reshape(x, [x.shape[0], -1])
  weights = v1.get_variable("logits/weights", [SIZE * SIZE * FILTERS, CLASSES],
                            initializer=v1.truncated_normal_initializer(stddev=0.1, seed=2))
  logits = tf.matmul(x, weights)
  return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=labels, logits=logits)), logits


def _net():
  import keras  # pylint: disable=g-import-not-at-top  # Keras 3: the comparing side only

  class Net(keras.Model):

    def __init__(self):
      super().__init__(name="net")
      self.conv = keras.layers.Conv2D(FILTERS, 3, padding="same", use_bias=False, name="conv")
      self.logits = keras.layers.Dense(CLASSES, use_bias=False, name="logits")
      self(tf.zeros((1, SIZE, SIZE, 3)))

    def call(self, x, training=False):
      x = tf.nn.relu(self.conv(x))
      return self.logits(tf.reshape(x, [tf.shape(x)[0], -1]))
  return Net()


def replica_loss(model, images, labels, global_batch_size):
  del global_batch_size
  logits = model(images, training=True)
  return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=labels, logits=logits)), logits


def _sgd():
  import keras  # pylint: disable=g-import-not-at-top
  return keras.optimizers.SGD(0.1)


def port():
  return porting.Port(tower_loss=tower_loss,
                      tf1_optimizer=lambda step: v1.train.GradientDescentOptimizer(0.1),
                      build_model=_net, replica_loss=replica_loss, tf2_optimizer=_sgd,
                      gradient_reduction="mean")


def batches(replicas, steps=3, seed=0):
  rng = np.random.RandomState(seed)  # numpy 1.18 (TensorFlow 1.15's) has no default_rng
  n = replicas * PER_REPLICA
  return [(rng.normal(size=(n, SIZE, SIZE, 3)).astype(np.float32),
           rng.randint(0, CLASSES, size=n).astype(np.int32)) for _ in range(steps)]
