"""DeepLab's research/deeplab/train.py (tensorflow/models, the 2018 model_deploy version, read
at commit b668f5948f3aa6d472ff74d81dea5c2770d4795d; its loss from research/deeplab/utils/
train_utils.py at 50cf8eb954c17f38f2bec0f0a088ac419847bc4c), shrunk to a tiny segmentation
net, and its Keras 3 port: the second model_deploy *script* the kit is held against (not
train_image_classifier.py).

TF1, as the script builds a clone (_build_deeplab): slim conv2d layers under DeepLab's
arg_scope (l2_regularizer(weight_decay=4e-5), relu, slim.batch_norm with decay 0.9997,
epsilon 1e-5, scale=True, fused as slim's default picks), a 1x1 logits conv with biases and no
normalizer, the logits upsampled to the label's size with tf.image.resize_bilinear(...,
align_corners=True) (upsample_logits=True), and add_softmax_cross_entropy_loss_for_each_scale's
loss: the labels reshaped to [-1], not_ignore_mask = to_float(labels != ignore_label) *
loss_weight, slim.one_hot_encoding, tf.losses.softmax_cross_entropy(weights=not_ignore_mask)
(SUM_BY_NONZERO_WEIGHTS: the weighted sum over the clone's pixels / the clone's count of
non-ignored pixels). model_deploy.create_clones / optimize_clones combine the clones
(porting.MODEL_DEPLOY); MomentumOptimizer(learning_rate, 0.9) on get_model_learning_rate's
poly policy (tf.train.polynomial_decay(base, step, training_number_of_steps,
end_learning_rate=0, power=0.9), behind its slow-start tf.where).

Not modelled: train.py's gradient multipliers (get_model_gradient_multipliers doubles every
variable with 'biases' in its name, here the logits' biases, through
slim.learning.multiply_gradients after optimize_clones): left out on both sides to keep the
port small; Port.tf1_gradients is where a team writes it (with its port scaling the same
gradients), as a clipping between the combined gradients and apply_gradients is written.

The kit feeds one integer label per example; both sides make the same per-pixel map from it
(`label_map`): a fixed pattern of classes, with a fixed pattern of pixels at ignore_label.

TF2: the same layers in Keras 3 (porting.TF1BatchNorm for slim's batch norm, GatedConv2D for
the logits' bias), the replica's weighted sum of per-pixel losses divided by what
SUM_BY_NONZERO_WEIGHTS divides a clone's by, and by N (the replica's share of the global
batch), the L2 terms on replica 0 only, Keras's PolynomialDecay, porting.TF1Momentum.
"""

import keras
import numpy as np
import tensorflow as tf

import porting
from porting import tf1_layers
from porting.optimizers import TF1Momentum
from tests import helpers

v1 = tf.compat.v1
SIZE, FILTERS, CLASSES = 8, 4, 3
PER_REPLICA = 2
IGNORE_LABEL = 255
LOSS_WEIGHT = 1.0
WEIGHT_DECAY = 4e-5
BN_DECAY, BN_EPSILON = 0.9997, 1e-5
BASE_LEARNING_RATE = 0.007
TRAINING_NUMBER_OF_STEPS = 4  # short, so that the poly rate decays over the compared steps
LEARNING_POWER = 0.9
SLOW_START_STEP, SLOW_START_LEARNING_RATE = 0, 1e-4
MOMENTUM = 0.9

_ROWS, _COLS = np.meshgrid(np.arange(SIZE), np.arange(SIZE), indexing="ij")
# A fixed pattern: each pixel's class is the example's label shifted by (row + col) mod K;
# 13 of the 64 pixels (a diagonal stripe and a corner) are ignore_label.
OFFSETS = ((_ROWS + _COLS) % CLASSES).astype(np.int32)
IGNORED = (((_ROWS + 2 * _COLS) % 7) == 0) | ((_ROWS < 2) & (_COLS < 2))


def label_map(labels):
  """[B] integer labels -> [B, SIZE, SIZE, 1] per-pixel labels, as DeepLab's are fed."""
  classes = (tf.cast(labels, tf.int32)[:, None, None] + tf.constant(OFFSETS)) % CLASSES
  ignored = tf.broadcast_to(tf.constant(IGNORED), tf.shape(classes))
  return tf.where(ignored, tf.fill(tf.shape(classes), IGNORE_LABEL), classes)[..., None]


def deeplab_arg_scope(weight_decay=WEIGHT_DECAY, fused=None):
  """DeepLab's (core/feature_extractor / model.py) conv scope: L2 regularizer, relu, slim
  batch norm with decay 0.9997, epsilon 1e-5, scale=True, is_training=True; fused=None is
  slim's default (the fused kernel on these 4-D NHWC inputs), False the check the kit
  suggests."""
  slim = tf1_layers.slim()
  batch_norm_params = {"is_training": True, "decay": BN_DECAY, "epsilon": BN_EPSILON,
                       "scale": True, "fused": fused}
  with slim.arg_scope([slim.conv2d], weights_regularizer=slim.l2_regularizer(weight_decay),
                      activation_fn=tf.nn.relu, normalizer_fn=slim.batch_norm,
                      padding="SAME", stride=1):
    with slim.arg_scope([slim.batch_norm], **batch_norm_params) as sc:
      return sc


def network(images, fused=None):
  """Two conv + batch norm layers (the first at stride 2: logits at half the label's size),
  then the 1x1 logits conv as model.py's get_branch_logits makes it."""
  slim = tf1_layers.slim()
  with slim.arg_scope(deeplab_arg_scope(fused=fused)):
    net = slim.conv2d(images, FILTERS, [3, 3], stride=2, scope="conv1")
    net = slim.conv2d(net, FILTERS, [3, 3], scope="conv2")
  with slim.arg_scope([slim.conv2d], weights_regularizer=slim.l2_regularizer(WEIGHT_DECAY),
                      weights_initializer=v1.truncated_normal_initializer(stddev=0.01)):
    return slim.conv2d(net, CLASSES, [1, 1], activation_fn=None, normalizer_fn=None,
                       scope="logits")


def add_softmax_cross_entropy_loss(logits, labels, num_classes=CLASSES,
                                   ignore_label=IGNORE_LABEL, loss_weight=LOSS_WEIGHT,
                                   scope="semantic_merged_logits"):
  """train_utils.add_softmax_cross_entropy_loss_for_each_scale for one scale,
  upsample_logits=True, as written."""
  slim = tf1_layers.slim()
  logits = v1.image.resize_bilinear(logits, labels.shape[1:3].as_list(),
                                    align_corners=True)  # resolve_shape's static [H, W]
  scaled_labels = tf.reshape(labels, shape=[-1])
  not_ignore_mask = v1.to_float(tf.not_equal(scaled_labels, ignore_label)) * loss_weight
  one_hot_labels = slim.one_hot_encoding(scaled_labels, num_classes, on_value=1.0,
                                         off_value=0.0)
  v1.losses.softmax_cross_entropy(one_hot_labels, tf.reshape(logits, shape=[-1, num_classes]),
                                  weights=not_ignore_mask, scope=scope)


def tower_loss(scope, images, labels, fused=None):
  """One clone (_build_deeplab) + model_deploy's clone loss: the clone's LOSSES by its
  scope, undivided and without the regularization (the kit adds both as model_deploy does).
  Its outputs: the model's logits, before the upsampling, as _build_deeplab returns them."""
  logits = network(images, fused=fused)
  add_softmax_cross_entropy_loss(logits, label_map(labels))
  return tf.add_n(v1.get_collection(v1.GraphKeys.LOSSES, scope)), logits


def tf1_optimizer(global_step):
  """get_model_learning_rate('poly', ...) and train.py's MomentumOptimizer."""
  learning_rate = v1.train.polynomial_decay(BASE_LEARNING_RATE, global_step,
                                            TRAINING_NUMBER_OF_STEPS, end_learning_rate=0,
                                            power=LEARNING_POWER)
  learning_rate = v1.where(global_step < SLOW_START_STEP, SLOW_START_LEARNING_RATE,
                           learning_rate)
  return v1.train.MomentumOptimizer(learning_rate, MOMENTUM)


class TinyDeepLab(keras.Model):
  """The Keras 3 port, layers created in the TF1 order: convolutions without bias (slim
  drops it under a normalizer), TF1BatchNorm as slim's (its assign_moving_average without
  zero debiasing, tower 0's UPDATE_OPS), the logits' bias with TF1's gated gradient."""

  def __init__(self, align_corners=True):
    super().__init__(name="deeplab")
    self.align_corners = align_corners
    bn = dict(momentum=BN_DECAY, epsilon=BN_EPSILON, center=True, scale=True,
              zero_debias=False, update_from="first_tower")
    self.conv1 = keras.layers.Conv2D(FILTERS, 3, strides=2, padding="same", use_bias=False,
                                     name="conv1")
    self.bn1 = porting.TF1BatchNorm(name="conv1_bn", **bn)
    self.conv2 = keras.layers.Conv2D(FILTERS, 3, padding="same", use_bias=False, name="conv2")
    self.bn2 = porting.TF1BatchNorm(name="conv2_bn", **bn)
    self.logits = porting.GatedConv2D(CLASSES, 1, name="logits")
    self(tf.zeros((1, SIZE, SIZE, 3)))

  def call(self, images, training=False):
    net = tf.nn.relu(self.bn1(self.conv1(images), training=training))
    net = tf.nn.relu(self.bn2(self.conv2(net), training=training))
    return self.logits(net)

  def upsample(self, logits, size):
    if self.align_corners:
      return v1.image.resize_bilinear(logits, size, align_corners=True)
    # The fault a team writes: TF2's resize (half-pixel centers, no align_corners).
    return tf.image.resize(logits, size, method="bilinear")

  def regularization(self):
    """slim.l2_regularizer's terms (scale * l2_loss(w)), in the collection's order."""
    return [tf.multiply(tf.constant(WEIGHT_DECAY), tf.nn.l2_loss(k))
            for k in (self.conv1.kernel, self.conv2.kernel, self.logits.kernel)]


def replica_loss(model, images, labels, global_batch_size, masked=True):
  """The replica's share of model_deploy's loss: its pixels' weighted cross-entropies summed,
  divided by its count of non-ignored pixels (tf.losses' SUM_BY_NONZERO_WEIGHTS, as each clone
  divides) and by N (each clone's loss / N); the L2 terms on replica 0 only. masked=False is
  the fault: a plain mean over every pixel, the ignored ones included."""
  del global_batch_size  # each clone divides by its own non-ignored pixels, not the batch
  logits = model(images, training=True)
  labels = label_map(labels)
  upsampled = model.upsample(logits, labels.shape[1:3].as_list())
  flat_labels = tf.reshape(labels, [-1])
  onehot = tf.stop_gradient(tf.one_hot(flat_labels, CLASSES, on_value=1.0, off_value=0.0))
  per_pixel = tf.nn.softmax_cross_entropy_with_logits(
      labels=onehot, logits=tf.reshape(upsampled, [-1, CLASSES]))
  ctx = tf.distribute.get_replica_context()
  n = tf.constant(float(ctx.num_replicas_in_sync))
  if masked:
    weights = tf.cast(tf.not_equal(flat_labels, IGNORE_LABEL), tf.float32) * LOSS_WEIGHT
    present = tf.reduce_sum(tf.where(tf.equal(weights, 0.0), tf.zeros_like(weights),
                                     tf.ones_like(weights)))
    loss = tf.math.divide_no_nan(tf.reduce_sum(per_pixel * weights), present) / n
  else:
    loss = tf.reduce_mean(per_pixel) / n
  first = tf.get_static_value(ctx.replica_id_in_sync_group) == 0
  if first:
    loss = tf.add_n([loss, tf.add_n(model.regularization())])
  return loss, logits


def tf2_optimizer():
  rate = keras.optimizers.schedules.PolynomialDecay(
      BASE_LEARNING_RATE, TRAINING_NUMBER_OF_STEPS, end_learning_rate=0.0, power=LEARNING_POWER)
  return TF1Momentum(rate, momentum=MOMENTUM)


def port(**changes):
  fields = dict(tower_loss=tower_loss, tf1_optimizer=tf1_optimizer, build_model=TinyDeepLab,
                replica_loss=replica_loss, tf2_optimizer=tf2_optimizer,
                tf1_towers=porting.MODEL_DEPLOY)
  fields.update(changes)
  return porting.Port(**fields)


def batches(replicas, steps=3, seed=0):
  return helpers.image_batches(replicas, PER_REPLICA, SIZE, CLASSES, steps, seed)
