"""A float16 port with a batch norm, for the porting kit's rounding bounds by dtype (issue 61):
conv, batch norm, ReLU, global mean pooling and a dense head, computing in float16 over float32
weights, with a dynamic loss scale on both sides.

TF1 (`tower_loss(...)`): the weights cast to float16 in the tower as TF1's fp16 recipes did,
`tf.compat.v1.layers.batch_normalization` (fused or not), `tf.reduce_mean` pooling and the
head's `+ bias`, in float16, as a team writes them. TF2 (`Net`): Keras layers under a dtype
policy (`mixed_float16`, or float32 to leave it out). Keras's mean sums a float16 tensor in
float32 and its Dense adds the bias with `tf.nn.bias_add`: the TF1 side computes those two
the same way where `pool="float32"` and `bias="bias_add"` (the port then parts only by the
moving statistics' update arithmetic).
"""

import numpy as np
import tensorflow as tf
import keras

from porting import Port

v1 = tf.compat.v1
SIZE, CHANNELS, CLASSES = 6, 4, 3
LEARNING_RATE = 0.1


def tower_loss_of(fused=False, pool="float16", bias="add"):
  """TF1's tower loss: batch norm `fused` or not, the pooling's mean summed in `pool`, the
  head's bias added by `bias` ("add": `+`, or "bias_add")."""
  def tower_loss(images, labels):
    x = tf.cast(images, tf.float16)
    kernel = v1.get_variable("conv/kernel", [3, 3, 3, CHANNELS],
                             initializer=v1.glorot_uniform_initializer(seed=1))
    y = tf.nn.conv2d(x, tf.cast(kernel, tf.float16), [1, 1, 1, 1], "SAME")
    y = v1.layers.batch_normalization(y, training=True, fused=fused, name="bn",
                                      momentum=0.99, epsilon=1e-3)
    y = tf.nn.relu(y)
    if pool == "float16":
      y = tf.reduce_mean(y, [1, 2])
    else:
      y = tf.cast(tf.reduce_mean(tf.cast(y, tf.float32), [1, 2]), tf.float16)
    w = v1.get_variable("dense/kernel", [CHANNELS, CLASSES],
                        initializer=v1.glorot_uniform_initializer(seed=2))
    b = v1.get_variable("dense/bias", [CLASSES], initializer=v1.zeros_initializer())
    y = tf.matmul(y, tf.cast(w, tf.float16))
    y = (tf.nn.bias_add(y, tf.cast(b, tf.float16)) if bias == "bias_add" else
         y + tf.cast(b, tf.float16))
    logits = tf.cast(y, tf.float32)
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits)), logits
  return tower_loss


class Net(keras.Model):

  def __init__(self, policy="mixed_float16"):
    super().__init__()
    self.conv = keras.layers.Conv2D(CHANNELS, 3, padding="same", use_bias=False,
                                    dtype=policy, name="conv")
    self.bn = keras.layers.BatchNormalization(momentum=0.99, epsilon=1e-3, dtype=policy,
                                              name="bn")
    self.pool = keras.layers.GlobalAveragePooling2D(dtype=policy)
    self.dense = keras.layers.Dense(CLASSES, dtype=policy, name="dense")
    self(tf.zeros((1, SIZE, SIZE, 3)))

  def call(self, images, training=False):
    y = tf.nn.relu(self.bn(self.conv(images), training=training))
    return tf.cast(self.dense(self.pool(y)), tf.float32)


def replica_loss(model, images, labels, global_batch_size):
  del global_batch_size  # gradient_reduction="mean": the tower's own loss
  logits = model(images, training=True)
  return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=labels, logits=logits)), logits


def port(fused=False, pool="float16", bias="add", policy="mixed_float16",
         tf2_rate=LEARNING_RATE):
  return Port(
      tower_loss=tower_loss_of(fused, pool, bias),
      tf1_optimizer=lambda step: v1.mixed_precision.MixedPrecisionLossScaleOptimizer(
          v1.train.GradientDescentOptimizer(LEARNING_RATE), "dynamic"),
      build_model=lambda: Net(policy), replica_loss=replica_loss, gradient_reduction="mean",
      tf2_optimizer=lambda: keras.optimizers.LossScaleOptimizer(
          keras.optimizers.SGD(tf2_rate)))


def batches(replicas, per_replica=4, steps=3, seed=0):
  rng = np.random.default_rng(seed)
  n = replicas * per_replica
  return [(rng.normal(size=(n, SIZE, SIZE, 3)).astype(np.float32),
           rng.integers(0, CLASSES, size=n).astype(np.int32)) for _ in range(steps)]
