"""A fourth model for the porting kit, in the tf.contrib.slim style of the TF1 ResNet and
Inception scripts, and its Keras 3 port.

TF1 (`tower_loss`), each line a style teams used: slim.conv2d + slim.batch_norm (no scale,
decay 0.9) through `porting.tf1_layers.slim()` (tf_slim, contrib's public successor), a
residual block, the logits' weights made with `tf.Variable`, a reshape to the static batch size
read from the placeholder (`images.get_shape()`), slim.dropout after it, an L2 penalty added
to the loss by hand over `tf.trainable_variables()`, RMSPropOptimizer as Inception ran it
(decay 0.9, momentum 0.9, epsilon 1.0) on a learning rate that decays with the examples seen
(global_step x batch).
TF2 (`Net`): Keras layers in the same order, the penalty written out, porting.optimizers'
TF1RMSProp on a Keras schedule counted in steps.
"""

import functools

import keras
import numpy as np
import tensorflow as tf

from porting import Port
from porting import tf1_layers
from porting.optimizers import TF1RMSProp

v1 = tf.compat.v1
SIZE, FILTERS, CLASSES = 8, 6, 5
PER_REPLICA = 4
BN_DECAY = 0.9
KEEP_PROB = 0.8
WEIGHT_DECAY = 4e-3
LEARNING_RATE = 0.05
DECAY_EXAMPLES = 16  # the rate halves every 16 examples: every 2 steps of 2 x 4
RMSPROP = dict(decay=0.9, momentum=0.9, epsilon=1.0)


def tower_loss(images, labels, penalty=True):
  """One tower: (mean cross-entropy + the L2 penalty, logits)."""
  slim = tf1_layers.slim()
  batch = images.get_shape().as_list()[0]  # static, as the scripts' queues gave it
  bn = dict(is_training=True, decay=BN_DECAY, fused=False)

  def conv(x, scope, seed, activation=tf.nn.relu):
    return slim.conv2d(x, FILTERS, [3, 3], activation_fn=activation, scope=scope,
                       normalizer_fn=slim.batch_norm, normalizer_params=bn,
                       weights_initializer=v1.glorot_uniform_initializer(seed=seed))

  x = conv(images, "conv1", 1)
  y = conv(conv(x, "res_a", 2), "res_b", 3, activation=None)
  x = tf.reshape(tf.nn.relu(x + y), [batch, -1])
  with v1.variable_scope("logits"):  # drawn before the dropout's draw: not a step's draw
    weights = tf.Variable(v1.truncated_normal([SIZE * SIZE * FILTERS, CLASSES], stddev=0.05,
                                              seed=4), name="weights")
    biases = tf.Variable(tf.zeros([CLASSES]), name="biases")
  x = slim.dropout(x, keep_prob=KEEP_PROB, is_training=True, scope="dropout")
  logits = tf.matmul(x, weights) + biases
  loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                       logits=logits))
  if penalty:
    loss += WEIGHT_DECAY * tf.add_n([tf.nn.l2_loss(v) for v in v1.trainable_variables()
                                     if v.op.name.endswith("weights")])
  return loss, logits


def tf1_optimizer(global_step, global_batch):
  rate = v1.train.exponential_decay(LEARNING_RATE, global_step * global_batch,
                                    DECAY_EXAMPLES, 0.5, staircase=True)
  return v1.train.RMSPropOptimizer(rate, **RMSPROP)


class Net(keras.Model):
  """The Keras 3 port: the same layers, created in the TF1 order."""

  def __init__(self, scale=False):
    """scale=True: Keras's default, a gamma the TF1 side (tf_slim's scale=False) lacks."""
    super().__init__(name="net")
    conv = lambda name, seed: keras.layers.Conv2D(
        FILTERS, 3, padding="same", use_bias=False, name=name,
        kernel_initializer=keras.initializers.GlorotUniform(seed))
    bn = lambda name: keras.layers.BatchNormalization(momentum=BN_DECAY, epsilon=1e-3,
                                                      scale=scale, name=name)
    # Attributes in the TF1 order: a Keras model lists its weights in attribute order.
    self.conv1, self.conv1_bn = conv("conv1", 1), bn("conv1_bn")
    self.res_a, self.res_a_bn = conv("res_a", 2), bn("res_a_bn")
    self.res_b, self.res_b_bn = conv("res_b", 3), bn("res_b_bn")
    self.dropout = keras.layers.Dropout(1 - KEEP_PROB)
    self.logits = keras.layers.Dense(CLASSES, name="logits")
    self(tf.zeros((1, SIZE, SIZE, 3)))

  def call(self, images, training=False):
    x = tf.nn.relu(self.conv1_bn(self.conv1(images), training=training))
    y = tf.nn.relu(self.res_a_bn(self.res_a(x), training=training))
    y = self.res_b_bn(self.res_b(y), training=training)
    x = tf.nn.relu(x + y)
    x = self.dropout(tf.reshape(x, [tf.shape(x)[0], -1]), training=training)
    return self.logits(x)

  def kernels(self):
    return [self.conv1.kernel, self.res_a.kernel, self.res_b.kernel, self.logits.kernel]


def replica_loss(model, images, labels, global_batch_size, penalty=True):
  """The tower's own loss (gradient_reduction='mean'), the penalty written out as TF1's."""
  del global_batch_size
  logits = model(images, training=True)
  loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                       logits=logits))
  if penalty:
    loss += WEIGHT_DECAY * tf.add_n([tf.nn.l2_loss(k) for k in model.kernels()])
  return loss, logits


def tf2_optimizer(global_batch, decay_steps=None):
  """decay_steps: the schedule's period in steps (DECAY_EXAMPLES / the global batch)."""
  rate = keras.optimizers.schedules.ExponentialDecay(
      LEARNING_RATE, decay_steps or DECAY_EXAMPLES // global_batch, 0.5, staircase=True)
  return TF1RMSProp(rate, **RMSPROP)


def port(replicas=2, **changes):
  global_batch = replicas * PER_REPLICA
  fields = dict(tower_loss=tower_loss, build_model=Net, replica_loss=replica_loss,
                tf1_optimizer=functools.partial(tf1_optimizer, global_batch=global_batch),
                tf2_optimizer=functools.partial(tf2_optimizer, global_batch),
                gradient_reduction="mean")
  fields.update(changes)
  return Port(**fields)


def batches(replicas, steps=4, seed=0):
  rng = np.random.default_rng(seed)
  n = replicas * PER_REPLICA
  return [(rng.normal(size=(n, SIZE, SIZE, 3)).astype(np.float32),
           rng.integers(0, CLASSES, size=n).astype(np.int32)) for _ in range(steps)]
