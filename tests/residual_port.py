"""A residual block for the porting kit's variable pairing: TF1's tf.layers with the names
they number themselves, and a Keras port that creates its layers in another order.

TF1 (`tower_loss`): a 3x3 convolution in, then a residual block of two 3x3 convolutions of
the same shape (conv2d_1, conv2d_2, numbered by tf.layers in the order they are called) added
to its input, a dense layer out. TF2 (`Net`): the same layers, auto-named by Keras, but the
block's second convolution created (and built) before its first, as a port that declares its
layers in another order than it calls them does: creation order and Keras's numbering both
name the block's two kernels the other way round; only the graph's use tells them apart.
"""

import numpy as np
import tensorflow as tf
import keras

from porting import GatedConv2D
from porting import Port
from porting.tf1_layers import layers as _layers

v1 = tf.compat.v1
SIZE, FILTERS, CLASSES = 6, 4, 3
LEARNING_RATE = 0.1


def tower_loss(images, labels):
  layers = _layers()
  init = lambda seed: v1.glorot_uniform_initializer(seed=seed)
  x = layers.conv2d(images, FILTERS, 3, padding="same", activation=tf.nn.relu,
                    kernel_initializer=init(1))
  y = layers.conv2d(x, FILTERS, 3, padding="same", activation=tf.nn.relu,
                    kernel_initializer=init(2))
  y = layers.conv2d(y, FILTERS, 3, padding="same", kernel_initializer=init(3))
  x = tf.nn.relu(x + y)
  logits = layers.dense(tf.reshape(x, [x.shape[0], -1]), CLASSES, kernel_initializer=init(4))
  loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                       logits=logits))
  return loss, logits


class Net(keras.Model):
  """The port; swapped=True: the block's second convolution created before its first."""

  def __init__(self, swapped=True):
    super().__init__()
    conv = lambda seed, activation: GatedConv2D(  # TF1's gated bias gradient (oneDNN)
        FILTERS, 3, padding="same", activation=activation,
        kernel_initializer=keras.initializers.GlorotUniform(seed))
    self.stem = conv(1, "relu")
    if swapped:
      self.block_b = conv(3, None)
      self.block_b.build((None, SIZE, SIZE, FILTERS))
      self.block_a = conv(2, "relu")
    else:
      self.block_a = conv(2, "relu")
      self.block_b = conv(3, None)
    self.head = keras.layers.Dense(CLASSES,
                                   kernel_initializer=keras.initializers.GlorotUniform(4))
    self(tf.zeros((1, SIZE, SIZE, 3)))

  def call(self, images, training=False):
    x = self.stem(images)
    x = tf.nn.relu(x + self.block_b(self.block_a(x)))
    return self.head(tf.reshape(x, [tf.shape(x)[0], -1]))


def replica_loss(model, images, labels, global_batch_size):
  del global_batch_size
  logits = model(images, training=True)
  return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=labels, logits=logits)), logits


def port(**changes):
  fields = dict(tower_loss=tower_loss,
                tf1_optimizer=lambda step: v1.train.GradientDescentOptimizer(LEARNING_RATE),
                build_model=Net, replica_loss=replica_loss, gradient_reduction="mean",
                tf2_optimizer=lambda: keras.optimizers.SGD(LEARNING_RATE))
  fields.update(changes)
  return Port(**fields)


def batches(replicas, per_replica=2, steps=2, seed=0):
  rng = np.random.default_rng(seed)
  n = replicas * per_replica
  return [(rng.normal(size=(n, SIZE, SIZE, 3)).astype(np.float32),
           rng.integers(0, CLASSES, size=n).astype(np.int32)) for _ in range(steps)]
