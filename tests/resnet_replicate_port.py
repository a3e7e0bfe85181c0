"""The official CIFAR-10 ResNet of early 2018 (tensorflow/models, official/resnet), trained on
towers by tf.contrib.estimator.replicate_model_fn, shrunk, and its Keras 3 port: TF1 code
nobody on the team wrote, taken as a migrating team would take it.

Read in tensorflow/models at 027e017ede962ac9e71836a18fd726c65784a452, official/resnet/
resnet.py (the module that held the model and the run loop before it was split into
resnet_model.py and resnet_run_loop.py), and the CIFAR-10 model_fn of that lineage's
official/resnet/cifar10_main.py:

- resnet_main: `model_function = tf.contrib.estimator.replicate_model_fn(model_function,
  loss_reduction=tf.losses.Reduction.MEAN)` (MEAN is not SUM: each tower's loss is divided
  by the towers in TowerOptimizer.compute_gradients, the towers' gradients summed with add_n
  and applied once, in the last tower);
- resnet_model_fn: `cross_entropy = tf.losses.softmax_cross_entropy(logits=logits,
  onehot_labels=labels)`, then `loss = cross_entropy + weight_decay * tf.add_n(
  [tf.nn.l2_loss(v) for v in tf.trainable_variables() if loss_filter_fn(v.name)])`: the
  penalty is inside the model_fn, so every tower's loss holds all of it;
  `optimizer = tf.train.MomentumOptimizer(learning_rate=learning_rate, momentum=momentum)`,
  wrapped in `tf.contrib.estimator.TowerOptimizer` when multi_gpu;
  `update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)` (unscoped) and
  `train_op = tf.group(optimizer.minimize(loss, global_step), update_ops)`: the last tower's
  train op, the one replicate_model_fn runs, holds every tower's batch-norm updates;
- batch_norm_relu: `tf.layers.batch_normalization(momentum=_BATCH_NORM_DECAY (0.997),
  epsilon=_BATCH_NORM_EPSILON (1e-5), center=True, scale=True, training=training,
  fused=True)` then relu; conv2d_fixed_padding: `tf.layers.conv2d(use_bias=False,
  kernel_initializer=tf.variance_scaling_initializer())`, explicit padding then VALID where
  strided, SAME otherwise; the v2 (pre-activation) building block; a final batch norm, relu,
  average pooling, `tf.layers.dense`;
- cifar10_model_fn: weight_decay = 2e-4, momentum=0.9, a loss_filter_fn that returns True
  (CIFAR-10 regularizes every trainable variable, batch norm's gamma and beta included; the
  default filter, which leaves batch norm out, is ImageNet's), learning_rate_with_decay:
  `tf.train.piecewise_constant(global_step, boundaries, vals)` at 0.1 * batch_size /
  batch_denom, multiplied by decay_rates [1, 0.1, 0.01, 0.001] at boundary_epochs.

Shrunk: resnet_size 8 (one block per layer), 4 filters, 8 x 8 images, 2 examples a tower,
the schedule's boundaries at steps 1, 2, 3 (one batch an epoch) so that a 3-step comparison
crosses two of them.

TF2 (`ResNet`, `replica_loss`): Keras 3 layers in the TF1 order, BatchNormalization(
momentum=0.997, epsilon=1e-5), the replica's cross-entropies summed over the global batch
plus 1/N of the penalty (the towers' losses / N summed is the global batch's mean plus the
penalty once), porting.TF1Momentum on the same piecewise schedule (MomentumOptimizer's
accumulator: Keras SGD's velocity is another update once the rate changes).
"""

import functools

import keras
import tensorflow as tf

import porting
from porting import tf1_layers
from porting.optimizers import TF1Momentum
from tests import helpers

v1 = tf.compat.v1
SIZE, CLASSES = 8, 10
RESNET_SIZE = 8
FILTERS = 4  # the original's num_filters=16
PER_REPLICA = 2
BLOCK_STRIDES = (1, 2, 2)
FINAL_POOL = SIZE // 4  # the original's second_pool_size=8 for 32 x 32 images
WEIGHT_DECAY = 2e-4
MOMENTUM = 0.9
BATCH_NORM_DECAY = 0.997
BATCH_NORM_EPSILON = 1e-5
# learning_rate_with_decay(batch_size, batch_denom, num_images, boundary_epochs, decay_rates)
# with the global batch as its own denominator (0.1) and one batch an epoch.
BOUNDARY_EPOCHS = (1, 2, 3)
DECAY_RATES = (1, 0.1, 0.01, 0.001)
# The script's loss_reduction, a tf.compat.v1.losses.Reduction value (Reduction.MEAN).
LOSS_REDUCTION = v1.losses.Reduction.MEAN


def _num_blocks():
  if RESNET_SIZE % 6 != 2:
    raise ValueError("resnet_size must be 6n + 2:", RESNET_SIZE)
  return (RESNET_SIZE - 2) // 6


# ----------------------------------------------------------------------------------------
# TF1: the model_fn's layers and loss, as resnet.py and cifar10_main.py write them.
# ----------------------------------------------------------------------------------------
def batch_norm_relu(inputs, training, fused=True):
  layers = tf1_layers.layers()
  inputs = layers.batch_normalization(
      inputs=inputs, axis=3, momentum=BATCH_NORM_DECAY, epsilon=BATCH_NORM_EPSILON,
      center=True, scale=True, training=training, fused=fused)
  return tf.nn.relu(inputs)


def fixed_padding(inputs, kernel_size):
  pad_total = kernel_size - 1
  pad_beg = pad_total // 2
  pad_end = pad_total - pad_beg
  if pad_beg == 0 and pad_end == 0:
    return inputs
  return tf.pad(inputs, [[0, 0], [pad_beg, pad_end], [pad_beg, pad_end], [0, 0]])


def conv2d_fixed_padding(inputs, filters, kernel_size, strides):
  if strides > 1:
    inputs = fixed_padding(inputs, kernel_size)
  return tf1_layers.layers().conv2d(
      inputs=inputs, filters=filters, kernel_size=kernel_size, strides=strides,
      padding=("SAME" if strides == 1 else "VALID"), use_bias=False,
      kernel_initializer=v1.variance_scaling_initializer())


def building_block(inputs, filters, training, projection_shortcut, strides, fused=True):
  """The v2 building block: batch norm and relu before each convolution."""
  shortcut = inputs
  inputs = batch_norm_relu(inputs, training, fused)
  if projection_shortcut is not None:
    shortcut = projection_shortcut(inputs)
  inputs = conv2d_fixed_padding(inputs, filters, 3, strides)
  inputs = batch_norm_relu(inputs, training, fused)
  inputs = conv2d_fixed_padding(inputs, filters, 3, 1)
  return inputs + shortcut


def block_layer(inputs, filters, blocks, strides, training, name, fused=True):
  def projection_shortcut(inputs):
    return conv2d_fixed_padding(inputs, filters, 1, strides)
  inputs = building_block(inputs, filters, training, projection_shortcut, strides, fused)
  for _ in range(1, blocks):
    inputs = building_block(inputs, filters, training, None, 1, fused)
  return tf.identity(inputs, name)


def cifar10_model(inputs, training, fused=True):
  """Model.__call__ for Cifar10Model (channels_last): the initial conv, three block layers,
  batch norm and relu, average pooling, the dense logits."""
  layers = tf1_layers.layers()
  inputs = conv2d_fixed_padding(inputs, FILTERS, 3, 1)
  inputs = tf.identity(inputs, "initial_conv")
  for i, strides in enumerate(BLOCK_STRIDES):
    inputs = block_layer(inputs, FILTERS * (2 ** i), _num_blocks(), strides, training,
                         "block_layer{}".format(i + 1), fused)
  inputs = batch_norm_relu(inputs, training, fused)
  inputs = layers.average_pooling2d(inputs, pool_size=FINAL_POOL, strides=1, padding="VALID")
  inputs = tf.identity(inputs, "final_avg_pool")
  inputs = tf.reshape(inputs, [-1, FILTERS * 4])
  inputs = layers.dense(inputs=inputs, units=CLASSES)
  return tf.identity(inputs, "final_dense")


def tower_loss(images, labels, fused=True):
  """resnet_model_fn's body up to the loss (mode TRAIN), as one tower of replicate_model_fn
  runs it: the cross-entropy of its slice plus the whole penalty (cifar10_model_fn's
  loss_filter_fn keeps every variable). The labels are one-hot, as cifar10_main.py's
  parse_record makes them. fused=False: the check MIGRATION.md advises beside a fused batch
  norm (the script's is fused)."""
  def loss_filter_fn(_):
    return True
  logits = cifar10_model(images, training=True, fused=fused)
  cross_entropy = v1.losses.softmax_cross_entropy(
      logits=logits, onehot_labels=tf.one_hot(labels, CLASSES))
  loss = cross_entropy + WEIGHT_DECAY * tf.add_n(
      [tf.nn.l2_loss(v) for v in v1.trainable_variables() if loss_filter_fn(v.name)])
  return loss, logits


def learning_rate_with_decay(batch_size, batch_denom, num_images, boundary_epochs,
                             decay_rates):
  """resnet.py's: the boundaries and values both sides use (Python numbers)."""
  initial_learning_rate = 0.1 * batch_size / batch_denom
  batches_per_epoch = num_images / batch_size
  boundaries = [int(batches_per_epoch * epoch) for epoch in boundary_epochs]
  vals = [initial_learning_rate * decay for decay in decay_rates]
  return boundaries, vals


def schedule(replicas):
  global_batch = PER_REPLICA * replicas
  return learning_rate_with_decay(batch_size=global_batch, batch_denom=global_batch,
                                  num_images=global_batch, boundary_epochs=BOUNDARY_EPOCHS,
                                  decay_rates=DECAY_RATES)


def tf1_optimizer(global_step, replicas=2):
  boundaries, vals = schedule(replicas)
  learning_rate = v1.train.piecewise_constant(tf.cast(global_step, tf.int32), boundaries,
                                              vals)
  return v1.train.MomentumOptimizer(learning_rate=learning_rate, momentum=MOMENTUM)


# ----------------------------------------------------------------------------------------
# TF2: the Keras 3 port.
# ----------------------------------------------------------------------------------------
class _Conv(keras.layers.Layer):
  """conv2d_fixed_padding: explicit padding, then a VALID convolution, where strided."""

  def __init__(self, filters, kernel_size, strides, regularizer=None, **kwargs):
    super().__init__(**kwargs)
    self.pad = (keras.layers.ZeroPadding2D((kernel_size - 1) // 2)
                if strides > 1 and kernel_size > 1 else None)
    self.conv = keras.layers.Conv2D(
        filters, kernel_size, strides=strides, use_bias=False,
        padding="same" if strides == 1 else "valid",
        kernel_initializer=keras.initializers.VarianceScaling(), kernel_regularizer=regularizer,
        name="conv")

  def build(self, input_shape):
    self.conv.build(input_shape if self.pad is None else self.pad.compute_output_shape(
        input_shape))
    super().build(input_shape)

  def call(self, x):
    return self.conv(x if self.pad is None else self.pad(x))


class ResNet(keras.Model):
  """Cifar10Model (v2, resnet_size 8) in Keras 3, its layers created in the TF1 order.

  bn_momentum: Keras's BatchNormalization momentum (the script's decay, 0.997).
  regularizer: a Keras regularizer on every weight (None: the port adds the penalty in its
    loss, as the model_fn does).
  update_from: None (Keras's BatchNormalization: each replica's moving statistics from its
    own batch), or porting.TF1BatchNorm's update_from ("first_tower", "last_tower"): TF1's
    update arithmetic from that tower's batch, for a TF1 side that runs that tower's
    UPDATE_OPS."""

  def __init__(self, bn_momentum=BATCH_NORM_DECAY, regularizer=None, update_from=None):
    super().__init__(name="resnet")
    count = iter(range(100))

    def bn():
      if update_from:
        return porting.TF1BatchNorm(momentum=bn_momentum, epsilon=BATCH_NORM_EPSILON,
                                    zero_debias=False, update_from=update_from,
                                    name=f"bn{next(count)}")
      return keras.layers.BatchNormalization(
          momentum=bn_momentum, epsilon=BATCH_NORM_EPSILON, name=f"bn{next(count)}",
          beta_regularizer=regularizer, gamma_regularizer=regularizer)

    self.stem = _Conv(FILTERS, 3, 1, regularizer, name="initial_conv")
    self.blocks = []
    for i, strides in enumerate(BLOCK_STRIDES):
      filters = FILTERS * (2 ** i)
      for b in range(_num_blocks()):
        block = dict(bn1=bn(),
                     shortcut=_Conv(filters, 1, strides, regularizer, name=f"proj{i}")
                     if b == 0 else None,
                     conv1=_Conv(filters, 3, strides if b == 0 else 1, regularizer,
                                 name=f"conv{i}_{b}a"),
                     bn2=bn(),
                     conv2=_Conv(filters, 3, 1, regularizer, name=f"conv{i}_{b}b"))
        for key, layer in block.items():
          if layer is not None:
            setattr(self, f"b{i}_{b}_{key}", layer)
        self.blocks.append(block)
    self.final_bn = bn()
    self.pool = keras.layers.AveragePooling2D(FINAL_POOL, strides=1, padding="valid")
    self.dense = keras.layers.Dense(CLASSES, name="dense", kernel_regularizer=regularizer,
                                    bias_regularizer=regularizer)
    self(tf.zeros((1, SIZE, SIZE, 3)))

  def call(self, images, training=False):
    x = self.stem(images)
    for block in self.blocks:
      shortcut = x
      x = tf.nn.relu(block["bn1"](x, training=training))
      if block["shortcut"] is not None:
        shortcut = block["shortcut"](x)
      x = block["conv1"](x)
      x = tf.nn.relu(block["bn2"](x, training=training))
      x = block["conv2"](x) + shortcut
    x = tf.nn.relu(self.final_bn(x, training=training))
    x = tf.reshape(self.pool(x), [-1, FILTERS * 4])
    return self.dense(x)

  def l2_loss(self, batch_norm=True):
    """weight_decay * add_n(l2_loss(v)) over the trainable variables, in the TF1 order
    (batch_norm=False: batch norm's gamma and beta left out)."""
    left_out = set() if batch_norm else {
        id(v) for layer in self._flatten_layers()
        if isinstance(layer, keras.layers.BatchNormalization) for v in layer.weights}
    return WEIGHT_DECAY * tf.add_n([tf.nn.l2_loss(v) for v in self.trainable_variables
                                    if id(v) not in left_out])


def replica_loss(model, images, labels, global_batch_size, penalty="scaled",
                 batch="global"):
  """The replica's share: its cross-entropies over the global batch plus 1/N of the
  penalty, summed over the replicas by the optimizer.

  penalty: "scaled" (tf.nn.scale_regularization_loss of the model_fn's penalty), "keras"
    (the Keras regularizers' model.losses, scaled), "no_batch_norm" (the penalty without
    batch norm's gamma and beta: resnet_model_fn's default loss_filter_fn, ImageNet's).
  batch: "global" (tf.nn.compute_average_loss over the global batch) or "replica" (a mean
    over the replica's own examples, as the tower's cross-entropy is)."""
  logits = model(images, training=True)
  per_example = tf.nn.softmax_cross_entropy_with_logits(labels=tf.one_hot(labels, CLASSES),
                                                        logits=logits)
  if batch == "global":
    loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch_size)
  else:
    loss = tf.reduce_mean(per_example)
  if penalty == "keras":
    regularization = tf.add_n(model.losses)
  elif penalty == "no_batch_norm":
    regularization = model.l2_loss(batch_norm=False)
  else:
    regularization = model.l2_loss()
  return loss + tf.nn.scale_regularization_loss(regularization), logits


def tf2_optimizer(replicas=2):
  boundaries, vals = schedule(replicas)
  rate = keras.optimizers.schedules.PiecewiseConstantDecay(boundaries, vals)
  return TF1Momentum(rate, momentum=MOMENTUM)


def port(replicas=2, **changes):
  fields = dict(tower_loss=tower_loss,
                tf1_optimizer=functools.partial(tf1_optimizer, replicas=replicas),
                build_model=ResNet, replica_loss=replica_loss,
                tf2_optimizer=functools.partial(tf2_optimizer, replicas=replicas),
                tf1_towers=porting.replicate_model_fn(LOSS_REDUCTION))
  fields.update(changes)
  return porting.Port(**fields)


# One-fault ports a team plausibly writes.
def keras_momentum_port(replicas=2):
  """Keras's BatchNormalization left at its default momentum, 0.99."""
  return port(replicas, build_model=functools.partial(ResNet, bn_momentum=0.99))


def keras_l2_port(replicas=2):
  """weight_decay put on every weight as keras.regularizers.L2(2e-4): Keras's L2 is
  l * sum(w^2), tf.nn.l2_loss is sum(w^2) / 2, so this is 2 x the script's penalty."""
  return port(replicas,
              build_model=functools.partial(ResNet,
                                            regularizer=keras.regularizers.L2(WEIGHT_DECAY)),
              replica_loss=functools.partial(replica_loss, penalty="keras"))


def replica_batch_port(replicas=2):
  """Each replica's cross-entropy its own mean (divided by the replica's batch) under the
  optimizer's sum: every cross-entropy gradient N x the towers'."""
  return port(replicas, replica_loss=functools.partial(replica_loss, batch="replica"))


def imagenet_filter_port(replicas=2):
  """The penalty with resnet_model_fn's default loss_filter_fn (batch norm left out), which
  the CIFAR-10 model_fn overrides to regularize every variable."""
  return port(replicas, replica_loss=functools.partial(replica_loss, penalty="no_batch_norm"))


def batches(replicas, steps=3, seed=0):
  return helpers.image_batches(replicas, PER_REPLICA, SIZE, CLASSES, steps, seed)


def unfused_port(replicas=2, **changes):
  """The faithful port against the script's towers with fused=False."""
  return port(replicas, tower_loss=functools.partial(tower_loss, fused=False), **changes)


def one_tower_updates_port(replicas=2, update_from=None):
  """The TF1 side as MIGRATION.md advises checking it (fused=False, the first tower's
  UPDATE_OPS) against the port, with Keras's batch norm (update_from=None) or
  porting.TF1BatchNorm updating from the first tower's batch."""
  return unfused_port(replicas, update_ops="first_tower",
                      build_model=functools.partial(ResNet, update_from=update_from))
