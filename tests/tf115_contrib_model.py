"""TF1 code as teams wrote it on TensorFlow 1.15 with tf.contrib: `tf.contrib.layers.
batch_norm` (fused, decay 0.9, epsilon 1e-5 as many scripts set it: 1.15's fused kernel raises
it to 1.001e-5), `tf.layers.conv2d` / `dense`, `tf.layers.dropout(training=True)` and
AdamOptimizer; its Keras 3 port (built lazily: the recording side has no Keras 3). Recorded
on 1.15 (tests/test_porting_tf115.py), compared here."""

import tensorflow as tf

import porting
# The same shapes, the tower's own loss and the same batches as the plain 1.15 model.
from tests.tf115_model import CLASSES, FILTERS, SIZE, batches, replica_loss  # pylint: disable=unused-import

v1 = tf.compat.v1
DECAY, EPSILON, RATE, LEARNING_RATE = 0.9, 1.001e-5, 0.25, 0.01


def tower_loss(images, labels):
  """TensorFlow 1.15 only (tf.contrib); recorded there."""
  contrib = tf.contrib  # pylint: disable=no-member
  x = v1.layers.conv2d(images, FILTERS, 3, padding="same", use_bias=False, name="conv",
                       kernel_initializer=v1.glorot_uniform_initializer(seed=1))
  x = contrib.layers.batch_norm(x, decay=DECAY, epsilon=1e-5, is_training=True, fused=True,
                                scope="bn")
  x = tf.reshape(tf.nn.relu(x), [x.shape[0], -1])
  x = v1.layers.dropout(x, rate=RATE, training=True)
  logits = v1.layers.dense(x, CLASSES, name="logits",
                           kernel_initializer=v1.glorot_uniform_initializer(seed=2))
  return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=labels, logits=logits)), logits


def _net():
  import keras  # pylint: disable=g-import-not-at-top

  class Net(keras.Model):

    def __init__(self):
      super().__init__(name="net")
      self.conv = keras.layers.Conv2D(FILTERS, 3, padding="same", use_bias=False, name="conv")
      self.bn = porting.TF1BatchNorm(DECAY, EPSILON, scale=False, zero_debias=False,
                                     update_from="first_tower", name="bn")
      self.dropout = keras.layers.Dropout(RATE)
      self.logits = keras.layers.Dense(CLASSES, name="logits")
      self(tf.zeros((1, SIZE, SIZE, 3)))

    def call(self, x, training=False):
      x = tf.nn.relu(self.bn(self.conv(x), training=training))
      return self.logits(self.dropout(tf.reshape(x, [tf.shape(x)[0], -1]), training=training))
  return Net()


def _adam():
  from porting import optimizers  # pylint: disable=g-import-not-at-top  # Keras 3's side
  return optimizers.TF1Adam(LEARNING_RATE)


def port():
  return porting.Port(tower_loss=tower_loss,
                      tf1_optimizer=lambda step: v1.train.AdamOptimizer(LEARNING_RATE),
                      build_model=_net, replica_loss=replica_loss, tf2_optimizer=_adam,
                      gradient_reduction="mean")
