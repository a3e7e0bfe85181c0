"""A float16 port with a loss scale, for the porting kit: a dense layer computing in float16
over float32 weights, its loss in float32.

TF1 (`tower_loss`): the weights cast to float16 in the tower, as TF1's fp16 recipes did, and
`tf.compat.v1.mixed_precision.MixedPrecisionLossScaleOptimizer` around the SGD step. TF2
(`Net`): a Keras Dense with the `mixed_float16` policy and `keras.optimizers.
LossScaleOptimizer`. `scale` sets both sides' scale: "dynamic" (TF1's DynamicLossScale and
Keras's, both from 2**15, x2 after 2000 finite steps) or a number (TF1's FixedLossScale).
"""

import numpy as np
import tensorflow as tf
import keras

from porting import Port

v1 = tf.compat.v1
SIZE, CLASSES = 2, 3
DEPTH = SIZE * SIZE * 3
LEARNING_RATE = 0.1


def tower_loss(images, labels):
  x = tf.cast(tf.reshape(images, [images.shape[0], -1]), tf.float16)
  w = v1.get_variable("dense/kernel", [DEPTH, CLASSES],
                      initializer=v1.glorot_uniform_initializer(seed=1))
  b = v1.get_variable("dense/bias", [CLASSES], initializer=v1.zeros_initializer())
  logits = tf.cast(tf.matmul(x, tf.cast(w, tf.float16)) + tf.cast(b, tf.float16), tf.float32)
  loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                       logits=logits))
  return loss, logits


class Net(keras.Model):

  def __init__(self):
    super().__init__()
    self.flat = keras.layers.Flatten()
    self.dense = keras.layers.Dense(CLASSES, dtype="mixed_float16", name="dense")
    self(tf.zeros((1, SIZE, SIZE, 3)))

  def call(self, images, training=False):
    return tf.cast(self.dense(self.flat(images)), tf.float32)


def replica_loss(model, images, labels, global_batch_size):
  del global_batch_size  # gradient_reduction="mean": the tower's own loss
  logits = model(images, training=True)
  return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=labels, logits=logits)), logits


def tf1_scaled(scale="dynamic", initial=2.0 ** 15):
  """TF1's optimizer under `scale`: "dynamic" from `initial`, a number, or None (none)."""
  def optimizer(global_step):
    del global_step
    sgd = v1.train.GradientDescentOptimizer(LEARNING_RATE)
    if scale is None:
      return sgd
    loss_scale = (v1.mixed_precision.DynamicLossScale(initial_loss_scale=initial)
                  if scale == "dynamic" else scale)
    return v1.mixed_precision.MixedPrecisionLossScaleOptimizer(sgd, loss_scale)
  return optimizer


def tf2_scaled(initial=2.0 ** 15):
  return lambda: keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(LEARNING_RATE),
                                                     initial_scale=initial)


def port(**changes):
  fields = dict(tower_loss=tower_loss, tf1_optimizer=tf1_scaled(), build_model=Net,
                replica_loss=replica_loss, gradient_reduction="mean",
                tf2_optimizer=tf2_scaled())
  fields.update(changes)
  return Port(**fields)


def batches(replicas, per_replica=2, steps=3, seed=0):
  rng = np.random.default_rng(seed)
  n = replicas * per_replica
  return [(rng.normal(size=(n, SIZE, SIZE, 3)).astype(np.float32),
           rng.integers(0, CLASSES, size=n).astype(np.int32)) for _ in range(steps)]
