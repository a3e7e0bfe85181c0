"""A model for the porting kit trained as slim's train_image_classifier.py trains it: a small
CifarNet (nets/cifarnet.py's layers: conv 5x5 + max pool + LRN twice, two fully connected
layers with an L2 weights_regularizer, dropout, logits) deployed on clones by
deployment/model_deploy.py, and its Keras 3 port.

TF1 (`tower_loss`): the clone's network built with tf_slim, its loss put in the LOSSES
collection by tf.compat.v1.losses.softmax_cross_entropy and read back by the clone's scope,
as model_deploy's _gather_clone_loss reads it; RMSPropOptimizer with the script's defaults
(decay 0.9, momentum 0.9, epsilon 1.0) on an exponentially decaying rate. The Port says how
model_deploy combines the clones: porting.MODEL_DEPLOY (each clone's loss / N, the
regularization collection on the first clone only, the clones' gradients summed).
TF2 (`replica_loss`): the sum of the replica's cross-entropies over the global batch, and the
regularization (the same L2 terms, in the collection's order) on replica 0 only, as the
script adds it to the first clone; the replicas' gradients summed by the optimizer.
"""

import keras
import tensorflow as tf

import porting
from porting import tf1_layers
from porting.optimizers import TF1RMSProp
from tests import helpers

v1 = tf.compat.v1
SIZE, FILTERS, HIDDEN, CLASSES = 8, 6, 12, 5
PER_REPLICA = 4
WEIGHT_DECAY = 0.004  # cifarnet_arg_scope's
KEEP_PROB = 0.5
LEARNING_RATE = 0.01
RMSPROP = dict(decay=0.9, momentum=0.9, epsilon=1.0)
LRN = dict(depth_radius=4, bias=1.0, alpha=0.001 / 9.0, beta=0.75)


def network(images):
  """CifarNet's layers, small: (logits) as nets/cifarnet.py builds them under its arg_scope."""
  slim = tf1_layers.slim()
  with slim.arg_scope([slim.conv2d], activation_fn=tf.nn.relu,
                      weights_initializer=v1.truncated_normal_initializer(stddev=5e-2, seed=1)), \
      slim.arg_scope([slim.fully_connected], activation_fn=tf.nn.relu,
                     weights_regularizer=slim.l2_regularizer(WEIGHT_DECAY),
                     weights_initializer=v1.truncated_normal_initializer(stddev=0.04, seed=2)):
    net = slim.conv2d(images, FILTERS, [5, 5], scope="conv1")
    net = slim.max_pool2d(net, [2, 2], 2, scope="pool1")
    net = tf.nn.lrn(net, name="norm1", **LRN)
    net = slim.flatten(net)
    net = slim.fully_connected(net, HIDDEN, scope="fc3")
    net = slim.dropout(net, KEEP_PROB, is_training=True, scope="dropout3")
    return slim.fully_connected(net, CLASSES, activation_fn=None, scope="logits")


def tower_loss(scope, images, labels):
  """One clone: its LOSSES read by its scope (model_deploy's clone_loss), and its logits."""
  logits = network(images)
  v1.losses.softmax_cross_entropy(tf.one_hot(labels, CLASSES), logits)
  return tf.add_n(v1.get_collection(v1.GraphKeys.LOSSES, scope)), logits


def tf1_optimizer(global_step):
  rate = v1.train.exponential_decay(LEARNING_RATE, global_step, 2, 0.94, staircase=True)
  return v1.train.RMSPropOptimizer(rate, **RMSPROP)


class CifarNet(keras.Model):
  """The Keras 3 port: the same layers, created in the TF1 order; the convolution's bias with
  TF1's gated gradient (where oneDNN fuses a tape's conv gradients)."""

  def __init__(self):
    super().__init__(name="cifarnet")
    self.conv1 = porting.GatedConv2D(FILTERS, 5, padding="same", activation="relu",
                                     name="conv1")
    self.pool1 = keras.layers.MaxPooling2D(2, 2, padding="valid")
    self.flatten = keras.layers.Flatten()
    self.fc3 = keras.layers.Dense(HIDDEN, activation="relu", name="fc3")
    self.dropout3 = keras.layers.Dropout(1 - KEEP_PROB)
    self.logits = keras.layers.Dense(CLASSES, name="logits")
    self(tf.zeros((1, SIZE, SIZE, 3)))

  def call(self, images, training=False):
    net = tf.nn.local_response_normalization(self.pool1(self.conv1(images)), **LRN)
    net = self.dropout3(self.fc3(self.flatten(net)), training=training)
    return self.logits(net)

  def regularization(self):
    """slim.l2_regularizer's terms, in the collection's order."""
    return [tf.multiply(tf.constant(WEIGHT_DECAY), tf.nn.l2_loss(k))
            for k in (self.fc3.kernel, self.logits.kernel)]


def replica_loss(model, images, labels, global_batch_size, placement="first_replica"):
  """The replica's share of the global batch's mean; the regularization where `placement`
  says: "first_replica" (model_deploy's first clone), "every_replica" (1/N of it on each:
  tf.nn.scale_regularization_loss, TF2's idiom), "whole_on_every_replica" (a fault: all of
  it on each) or "none"."""
  logits = model(images, training=True)
  per_example = tf.nn.softmax_cross_entropy_with_logits(labels=tf.one_hot(labels, CLASSES),
                                                        logits=logits)
  loss = tf.reduce_sum(per_example) / tf.cast(global_batch_size, tf.float32)
  ctx = tf.distribute.get_replica_context()
  first = tf.get_static_value(ctx.replica_id_in_sync_group) == 0
  if placement == "every_replica":
    loss = tf.add_n([loss, tf.nn.scale_regularization_loss(tf.add_n(model.regularization()))])
  elif placement == "whole_on_every_replica" or (placement == "first_replica" and first):
    loss = tf.add_n([loss, tf.add_n(model.regularization())])
  return loss, logits


def tf2_optimizer():
  rate = keras.optimizers.schedules.ExponentialDecay(LEARNING_RATE, 2, 0.94, staircase=True)
  return TF1RMSProp(rate, **RMSPROP)


def port(**changes):
  fields = dict(tower_loss=tower_loss, tf1_optimizer=tf1_optimizer, build_model=CifarNet,
                replica_loss=replica_loss, tf2_optimizer=tf2_optimizer,
                tf1_towers=porting.MODEL_DEPLOY)
  fields.update(changes)
  return porting.Port(**fields)


def batches(replicas, steps=3, seed=0):
  return helpers.image_batches(replicas, PER_REPLICA, SIZE, CLASSES, steps, seed)
