"""slim's LeNet (research/slim/nets/lenet.py) trained as train_image_classifier.py trains it
on model_deploy clones, shrunk, and its Keras 3 port: the second model_deploy trainer the
kit is held against (tests/model_deploy_port.py is the first), written by a session that had
not seen the kit's own test models' port.

TF1: lenet() under lenet_arg_scope(weight_decay=0.004) (an L2 weights_regularizer on every
conv2d and fully_connected, relu), tf.compat.v1.losses.softmax_cross_entropy with
label_smoothing=0.1 (the clone's LOSSES read by its scope, as model_deploy's
_gather_clone_loss does), MomentumOptimizer(rate, momentum=0.9) on the script's exponential
decay. model_deploy's combination (clone loss / N, regularization on clone 0, gradients
summed, clone 0's UPDATE_OPS) is porting.MODEL_DEPLOY.
TF2: the same layers in Keras 3, the replica's smoothed cross-entropies summed over the global
batch, the L2 terms on replica 0 only, porting.TF1Momentum (TF1's accumulator convention).
"""


import keras
import tensorflow as tf

import porting
from porting import tf1_layers
from porting.optimizers import TF1Momentum
from tests import helpers

v1 = tf.compat.v1
SIZE, CONV1, CONV2, HIDDEN, CLASSES = 16, 4, 8, 32, 10
PER_REPLICA = 2
WEIGHT_DECAY = 0.004
KEEP_PROB = 0.5
LABEL_SMOOTHING = 0.1
LEARNING_RATE = 0.01
DECAY_STEPS, DECAY_FACTOR = 2, 0.94
MOMENTUM = 0.9


def lenet_arg_scope(weight_decay=WEIGHT_DECAY):
  slim = tf1_layers.slim()
  with slim.arg_scope([slim.conv2d, slim.fully_connected],
                      weights_regularizer=slim.l2_regularizer(weight_decay),
                      weights_initializer=v1.truncated_normal_initializer(stddev=0.1),
                      activation_fn=tf.nn.relu) as sc:
    return sc


def lenet(images, num_classes=CLASSES, is_training=True, dropout_keep_prob=KEEP_PROB,
          scope="LeNet"):
  slim = tf1_layers.slim()
  with v1.variable_scope(scope, "LeNet", [images]):
    net = slim.conv2d(images, CONV1, [5, 5], scope="conv1")
    net = slim.max_pool2d(net, [2, 2], 2, scope="pool1")
    net = slim.conv2d(net, CONV2, [5, 5], scope="conv2")
    net = slim.max_pool2d(net, [2, 2], 2, scope="pool2")
    net = slim.flatten(net)
    net = slim.fully_connected(net, HIDDEN, scope="fc3")
    net = slim.dropout(net, dropout_keep_prob, is_training=is_training, scope="dropout3")
    logits = slim.fully_connected(net, num_classes, activation_fn=None, scope="fc4")
  return logits


def tower_loss(scope, images, labels):
  """One clone as train_image_classifier.py's clone_fn + model_deploy's clone loss."""
  slim = tf1_layers.slim()
  with slim.arg_scope(lenet_arg_scope()):
    logits = lenet(images)
  v1.losses.softmax_cross_entropy(tf.one_hot(labels, CLASSES), logits,
                                  label_smoothing=LABEL_SMOOTHING, weights=1.0)
  return tf.add_n(v1.get_collection(v1.GraphKeys.LOSSES, scope)), logits


def tf1_optimizer(global_step):
  rate = v1.train.exponential_decay(LEARNING_RATE, global_step, DECAY_STEPS, DECAY_FACTOR,
                                    staircase=True)
  return v1.train.MomentumOptimizer(rate, momentum=MOMENTUM, name="Momentum")


class LeNet(keras.Model):
  """The Keras 3 port, layers created in the TF1 order; the convolutions' biases with TF1's
  gated gradient (where oneDNN fuses a tape's conv gradients)."""

  def __init__(self):
    super().__init__(name="LeNet")
    self.conv1 = porting.GatedConv2D(CONV1, 5, padding="same", activation="relu", name="conv1")
    self.pool1 = keras.layers.MaxPooling2D(2, 2, padding="valid", name="pool1")
    self.conv2 = porting.GatedConv2D(CONV2, 5, padding="same", activation="relu", name="conv2")
    self.pool2 = keras.layers.MaxPooling2D(2, 2, padding="valid", name="pool2")
    self.flatten = keras.layers.Flatten()
    self.fc3 = keras.layers.Dense(HIDDEN, activation="relu", name="fc3")
    self.dropout3 = keras.layers.Dropout(1 - KEEP_PROB, name="dropout3")
    self.fc4 = keras.layers.Dense(CLASSES, name="fc4")
    self(tf.zeros((1, SIZE, SIZE, 3)))

  def call(self, images, training=False):
    net = self.pool1(self.conv1(images))
    net = self.pool2(self.conv2(net))
    net = self.dropout3(self.fc3(self.flatten(net)), training=training)
    return self.fc4(net)

  def regularization(self):
    """slim.l2_regularizer's terms (scale * l2_loss(w)), in the collection's order."""
    return [tf.multiply(tf.constant(WEIGHT_DECAY), tf.nn.l2_loss(k))
            for k in (self.conv1.kernel, self.conv2.kernel, self.fc3.kernel, self.fc4.kernel)]


def replica_loss(model, images, labels, global_batch_size, placement="first_replica",
                 label_smoothing=LABEL_SMOOTHING):
  """The replica's share of the global batch's smoothed cross-entropy; the regularization on
  replica 0 only ("first_replica", model_deploy's first clone) or whole on "every_replica"."""
  logits = model(images, training=True)
  onehot = tf.one_hot(labels, CLASSES)
  if label_smoothing > 0:
    num_classes = tf.cast(tf.shape(onehot)[-1], logits.dtype)
    onehot = onehot * (1.0 - label_smoothing) + label_smoothing / num_classes
  per_example = tf.nn.softmax_cross_entropy_with_logits(labels=tf.stop_gradient(onehot),
                                                        logits=logits)
  loss = tf.reduce_sum(per_example) / tf.cast(global_batch_size, tf.float32)
  ctx = tf.distribute.get_replica_context()
  first = tf.get_static_value(ctx.replica_id_in_sync_group) == 0
  if placement == "every_replica" or (placement == "first_replica" and first):
    loss = tf.add_n([loss, tf.add_n(model.regularization())])
  return loss, logits


def tf2_optimizer(momentum=MOMENTUM):
  rate = keras.optimizers.schedules.ExponentialDecay(LEARNING_RATE, DECAY_STEPS, DECAY_FACTOR,
                                                     staircase=True)
  return TF1Momentum(rate, momentum=momentum)


def port(**changes):
  fields = dict(tower_loss=tower_loss, tf1_optimizer=tf1_optimizer, build_model=LeNet,
                replica_loss=replica_loss, tf2_optimizer=tf2_optimizer,
                tf1_towers=porting.MODEL_DEPLOY)
  fields.update(changes)
  return porting.Port(**fields)


def batches(replicas, steps=3, seed=0):
  return helpers.image_batches(replicas, PER_REPLICA, SIZE, CLASSES, steps, seed)
