"""A third model for the porting kit, in the style of the public TF1 multi-GPU scripts: a
`tf.layers` CNN with dropout and Adam, and its hand-written Keras 3 port.

TF1 (`tower_loss`): tf.compat.v1.layers conv2d (with bias) + max-pooling, flatten, a dense
layer followed by tf.compat.v1.layers.dropout, logits; softmax cross-entropy on one-hot
labels; AdamOptimizer. TF2 (`Net`): Keras layers, `Dropout` after the dense layer, Adam with
TF1's epsilon.

The faithful port differs from TF1 in three places, each a field of `port()`:
- gated: the convolution's bias added with porting.gated_bias_add (TF1's gated gradient);
- float32_betas: Adam's beta_1/beta_2 as the float32 values TF1's kernel uses;
- the Adam step: porting.optimizers.TF1Adam, which keeps TF1's running beta powers.
"""

import numpy as np
import tensorflow as tf
# tf.compat.v1.layers under Keras 3: porting.tf1_layers (the tf_keras package).
import keras

from porting import Port
from tfbits.gates import gated_bias_add
from porting.tf1_layers import layers as _layers

v1 = tf.compat.v1
SIZE, FILTERS, HIDDEN, CLASSES = 8, 6, 16, 5
RATE = 0.4  # the dropout rate
LEARNING_RATE = 0.001


def tower_loss(images, labels, rate=RATE):
  """One tower as the scripts wrote it: (mean softmax cross-entropy on one-hot labels, logits)."""
  layers = _layers()
  x = layers.conv2d(images, FILTERS, 3, padding="same", activation=tf.nn.relu, name="conv1",
                    kernel_initializer=v1.glorot_uniform_initializer(seed=1))
  x = layers.max_pooling2d(x, 2, 2, name="pool1")
  x = layers.flatten(x, name="flatten")
  x = layers.dense(x, HIDDEN, activation=tf.nn.relu, name="fc1")
  x = layers.dropout(x, rate=rate, training=True, name="drop1")
  logits = layers.dense(x, CLASSES, name="logits")
  one_hot = tf.one_hot(labels, CLASSES)
  loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=one_hot, logits=logits))
  return loss, logits


def tf1_optimizer(global_step):
  del global_step
  return v1.train.AdamOptimizer(LEARNING_RATE)


class GatedConv(keras.layers.Layer):
  """Conv2D + ReLU whose bias is added as TF1's conv2d adds it, with TF1's gradient."""

  def __init__(self, filters, name):
    super().__init__(name=name)
    self.filters = filters

  def build(self, input_shape):
    self.kernel = self.add_weight(name="kernel", shape=(3, 3, input_shape[-1], self.filters),
                                  initializer=keras.initializers.GlorotUniform(1))
    self.bias = self.add_weight(name="bias", shape=(self.filters,), initializer="zeros")

  def call(self, x):
    return tf.nn.relu(gated_bias_add(tf.nn.conv2d(x, self.kernel, 1, "SAME"), self.bias))


class Net(keras.Model):
  """The Keras 3 port. gated=False: Keras's own Conv2D (its bias added with `+`)."""

  def __init__(self, gated=True, rate=RATE):
    super().__init__(name="net")
    self.conv = (GatedConv(FILTERS, "conv1") if gated else keras.layers.Conv2D(
        FILTERS, 3, padding="same", activation="relu", name="conv1",
        kernel_initializer=keras.initializers.GlorotUniform(1)))
    self.pool = keras.layers.MaxPooling2D(2, 2)
    self.flatten = keras.layers.Flatten()
    self.fc1 = keras.layers.Dense(HIDDEN, activation="relu", name="fc1",
                                  kernel_initializer=keras.initializers.GlorotUniform(2))
    self.drop = keras.layers.Dropout(rate, seed=7)
    self.logits = keras.layers.Dense(CLASSES, name="logits",
                                     kernel_initializer=keras.initializers.GlorotUniform(3))
    self(tf.zeros((1, SIZE, SIZE, 3)))

  def call(self, images, training=False):
    x = self.flatten(self.pool(self.conv(images)))
    return self.logits(self.drop(self.fc1(x), training=training))


def replica_loss(model, images, labels, global_batch_size):
  """The tower's own loss (gradient_reduction='mean'): the mean over the replica's examples."""
  del global_batch_size
  logits = model(images, training=True)
  one_hot = tf.one_hot(labels, CLASSES)
  return tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=one_hot,
                                                                logits=logits)), logits


def keras_adam():
  """Keras's Adam with TF1's epsilon and the float32 betas TF1's kernel computes with."""
  return keras.optimizers.Adam(LEARNING_RATE, beta_1=float(np.float32(0.9)),
                               beta_2=float(np.float32(0.999)), epsilon=1e-8)


def port(**changes):
  from porting import optimizers  # pylint: disable=g-import-not-at-top
  fields = dict(tower_loss=tower_loss, tf1_optimizer=tf1_optimizer, build_model=Net,
                replica_loss=replica_loss, gradient_reduction="mean",
                tf2_optimizer=lambda: optimizers.TF1Adam(LEARNING_RATE))
  fields.update(changes)
  return Port(**fields)


def batches(replicas, per_replica=4, steps=3, seed=0):
  rng = np.random.default_rng(seed)
  n = replicas * per_replica
  return [(rng.normal(size=(n, SIZE, SIZE, 3)).astype(np.float32),
           rng.integers(0, CLASSES, size=n).astype(np.int32)) for _ in range(steps)]
