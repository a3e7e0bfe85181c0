"""The float16 path of the official TF1 ResNet (tensorflow/models, official/resnet) and its
Keras 3 port, for the porting kit: TF1 code nobody on the team wrote, taken as a migrating
team would take it.

Read in tensorflow/models at bebdced11081bb3111f277ffa314fe314df313d4 (official/resnet/
resnet_model.py and resnet_run_loop.py, the tf.compat.v1 era of 2019; cifar10_main.py read
at 049df454e6fbafcc1b23b703f49aa305d819103a for Cifar10Model's constructor arguments):

- resnet_model.Model: `_custom_dtype_getter` creates every variable a layer asks for in
  float16 as a float32 variable and returns `tf.cast(var, dtype=float16, name=name +
  '_cast')`, under `tf.compat.v1.variable_scope('resnet_model', custom_getter=...)`; batch
  norm's gamma, beta and moving statistics are asked for in float32 (tf.layers' batch norm
  keeps float32 parameters for float16 inputs) and pass through;
- batch_norm: `tf.compat.v1.layers.batch_normalization(momentum=0.997, epsilon=1e-5,
  center=True, scale=True, training=training, fused=True)`;
- conv2d_fixed_padding: explicit padding then VALID where strided, SAME otherwise,
  `use_bias=False`; the v1 building block (resnet_version's flag default is 1): projection
  conv + batch norm on the shortcut, conv, bn, relu, conv, bn, add, relu; no final batch norm
  (v1); `tf.reduce_mean(axis=[1, 2], keepdims=True)` in float16, squeeze,
  `tf.compat.v1.layers.dense`;
- resnet_model_fn: `logits = tf.cast(logits, tf.float32)`; `cross_entropy =
  tf.compat.v1.losses.sparse_softmax_cross_entropy(logits=logits, labels=labels)`; `l2_loss =
  weight_decay * tf.add_n([tf.nn.l2_loss(tf.cast(v, tf.float32)) for v in
  trainable_variables() if loss_filter_fn(v.name)]) / num_replicas_in_sync` with the default
  filter `'batch_normalization' not in name` (the one imagenet_main.py uses; cifar10_main.py
  overrides it to keep batch norm); `tf.compat.v1.train.MomentumOptimizer(lr, momentum=0.9)`;
  and, where loss_scale != 1 (128 for float16 by the flags' default):
      scaled_grad_vars = optimizer.compute_gradients(loss * loss_scale)
      unscaled_grad_vars = [(grad / loss_scale, var) for grad, var in scaled_grad_vars]
      minimize_op = optimizer.apply_gradients(unscaled_grad_vars, global_step)
  train_op = tf.group(minimize_op, update_ops). Replicas: Estimator under MirroredStrategy
  (each replica's loss / N: tf.losses scales itself, the penalty is divided by hand; the
  replicas' gradients summed in apply_gradients).

How it is said to the kit:
- The hand-written loss scale sits between the tower's loss and apply_gradients, where
  neither tower_loss nor tf1_gradients reach (the kit calls compute_gradients itself and
  tf1_gradients sees the towers' combined gradients, after the loss was differentiated):
  `ScriptLossScaling` is the script's MomentumOptimizer with its compute_gradients doing the
  script's two lines (loss * loss_scale, each gradient / loss_scale). The kit does not see
  it as a loss scale. `scaling="wrapper"` puts the same arithmetic in the form the kit reads:
  TF1's MixedPrecisionLossScaleOptimizer over a DynamicLossScale from 128 that cannot grow
  within a comparison (a FixedLossScale of 128, compared with Keras's from 128 within its
  growth period, is the same arithmetic); it multiplies by 1/128 where the script divides by 128 (the same for a power of
  two) and would skip a non-finite step, which the script does not.
- The towers: loss divided by N, gradients summed, replica 0's own moving statistics
  (MirroredStrategy's batch-norm statistics are ON_READ, each replica its own).
- Shrunk: resnet_size 8 (one block per layer), num_filters 16 as the original, 8 x 8 images,
  2 examples a replica, data_format channels_last (the --data_format flag; the script picks
  channels_first on CUDA builds, which CPUs do not run), the learning-rate schedule a
  constant 0.1, weight decay 1e-4 (imagenet_main's default).

TF2: tests/resnet_fp16_keras.py.
"""

import functools

import tensorflow as tf

import porting
from porting import tf1_layers
from tests import helpers
from tests import resnet_fp16_keras as keras_port
from tests.resnet_fp16_sizes import (  # pylint: disable=unused-import
    BATCH_NORM_DECAY, BATCH_NORM_EPSILON, BLOCK_STRIDES, CLASSES, LEARNING_RATE, LOSS_SCALE,
    MOMENTUM, NO_GROWTH, NUM_FILTERS, PER_REPLICA, SIZE, WEIGHT_DECAY, num_blocks)

v1 = tf.compat.v1
DTYPE = tf.float16
CASTABLE_TYPES = (tf.float16,)
# The script's towers: Estimator under MirroredStrategy.
MIRRORED_ESTIMATOR = porting.TowerCombination(
    "Estimator MirroredStrategy", loss="divided", gradients="sum", update_ops="first_tower")


# ----------------------------------------------------------------------------------------
# TF1: resnet_model.py and resnet_model_fn, as the script computes them in float16.
# ----------------------------------------------------------------------------------------
def _custom_dtype_getter(getter, name, shape=None, dtype=tf.float32, *args, **kwargs):
  """resnet_model.Model._custom_dtype_getter: float32 variables, cast to float16."""
  if dtype in CASTABLE_TYPES:
    var = getter(name, shape, tf.float32, *args, **kwargs)
    return tf.cast(var, dtype=dtype, name=name + "_cast")
  return getter(name, shape, dtype, *args, **kwargs)


def batch_norm(inputs, training, fused=True):
  return tf1_layers.layers().batch_normalization(
      inputs=inputs, axis=3, momentum=BATCH_NORM_DECAY, epsilon=BATCH_NORM_EPSILON,
      center=True, scale=True, training=training, fused=fused)


def fixed_padding(inputs, kernel_size):
  pad_total = kernel_size - 1
  pad_beg = pad_total // 2
  pad_end = pad_total - pad_beg
  return tf.pad(tensor=inputs,
                paddings=[[0, 0], [pad_beg, pad_end], [pad_beg, pad_end], [0, 0]])


def conv2d_fixed_padding(inputs, filters, kernel_size, strides):
  if strides > 1:
    inputs = fixed_padding(inputs, kernel_size)
  return tf1_layers.layers().conv2d(
      inputs=inputs, filters=filters, kernel_size=kernel_size, strides=strides,
      padding=("SAME" if strides == 1 else "VALID"), use_bias=False,
      kernel_initializer=v1.variance_scaling_initializer())


def _building_block_v1(inputs, filters, training, projection_shortcut, strides, fused):
  shortcut = inputs
  if projection_shortcut is not None:
    shortcut = projection_shortcut(inputs)
    shortcut = batch_norm(shortcut, training, fused)
  inputs = conv2d_fixed_padding(inputs, filters, 3, strides)
  inputs = batch_norm(inputs, training, fused)
  inputs = tf.nn.relu(inputs)
  inputs = conv2d_fixed_padding(inputs, filters, 3, 1)
  inputs = batch_norm(inputs, training, fused)
  inputs += shortcut
  return tf.nn.relu(inputs)


def block_layer(inputs, filters, blocks, strides, training, name, fused):
  def projection_shortcut(inputs):
    return conv2d_fixed_padding(inputs, filters, 1, strides)
  inputs = _building_block_v1(inputs, filters, training, projection_shortcut, strides, fused)
  for _ in range(1, blocks):
    inputs = _building_block_v1(inputs, filters, training, None, 1, fused)
  return tf.identity(inputs, name)


def resnet_model(inputs, training, fused=True):
  """Model.__call__ (v1, channels_last, Cifar10Model's arguments)."""
  with v1.variable_scope("resnet_model", custom_getter=_custom_dtype_getter):
    inputs = conv2d_fixed_padding(inputs, NUM_FILTERS, 3, 1)
    inputs = tf.identity(inputs, "initial_conv")
    inputs = batch_norm(inputs, training, fused)
    inputs = tf.nn.relu(inputs)
    for i, strides in enumerate(BLOCK_STRIDES):
      inputs = block_layer(inputs, NUM_FILTERS * (2 ** i), num_blocks(), strides, training,
                           "block_layer{}".format(i + 1), fused)
    inputs = tf.reduce_mean(input_tensor=inputs, axis=[1, 2], keepdims=True)
    inputs = tf.identity(inputs, "final_reduce_mean")
    inputs = tf.squeeze(inputs, [1, 2])
    inputs = tf1_layers.layers().dense(inputs=inputs, units=CLASSES)
    return tf.identity(inputs, "final_dense")


def tower_loss(images, labels, fused=True):
  """resnet_model_fn's body up to the loss (mode TRAIN). The input pipeline hands the model
  float16 images (`assert features.dtype == dtype`); num_replicas_in_sync is 1 in the kit's
  graph (the kit divides each tower's loss by N as MirroredStrategy's tf.losses did)."""
  features = tf.cast(images, DTYPE)
  logits = resnet_model(features, training=True, fused=fused)
  logits = tf.cast(logits, tf.float32)
  cross_entropy = v1.losses.sparse_softmax_cross_entropy(logits=logits, labels=labels)

  def exclude_batch_norm(name):
    return "batch_normalization" not in name
  loss_filter_fn = exclude_batch_norm
  l2_loss = WEIGHT_DECAY * tf.add_n(
      [tf.nn.l2_loss(tf.cast(v, tf.float32)) for v in v1.trainable_variables()
       if loss_filter_fn(v.name)]) / tf.distribute.get_strategy().num_replicas_in_sync
  return cross_entropy + l2_loss, logits


class ScriptLossScaling(v1.train.MomentumOptimizer):
  """The script's MomentumOptimizer, its compute_gradients doing the script's lines."""

  def __init__(self, learning_rate, momentum, loss_scale):
    super().__init__(learning_rate=learning_rate, momentum=momentum)
    self.loss_scale = loss_scale

  def compute_gradients(self, loss, *args, **kwargs):
    scaled_grad_vars = super().compute_gradients(loss * self.loss_scale, *args, **kwargs)
    return [(None if grad is None else grad / self.loss_scale, var)
            for grad, var in scaled_grad_vars]


def tf1_optimizer(global_step, scaling="script", loss_scale=LOSS_SCALE):
  del global_step  # the schedule simplified to a constant
  if scaling == "script":
    return ScriptLossScaling(LEARNING_RATE, MOMENTUM, loss_scale)
  momentum = v1.train.MomentumOptimizer(learning_rate=LEARNING_RATE, momentum=MOMENTUM)
  if scaling == "wrapper":
    return v1.mixed_precision.MixedPrecisionLossScaleOptimizer(
        momentum, v1.mixed_precision.DynamicLossScale(
            initial_loss_scale=loss_scale, increment_period=NO_GROWTH, multiplier=2.0))
  return momentum  # None: no loss scale


def port(scaling="wrapper", fused=True, tf2_scale=LOSS_SCALE, growth=NO_GROWTH,
         float32_logits=True, decay_batch_norm=False, pool="keras", **changes):
  """The port. scaling: the TF1 side's loss scale, "script" (the script's hand-written lines,
  ScriptLossScaling), "wrapper" (MixedPrecisionLossScaleOptimizer, the form the kit reads) or
  None. tf2_scale: the LossScaleOptimizer's initial scale (None: none). pool: the port's
  pooling, "keras" or "float16" (TF1's)."""
  fields = dict(
      tower_loss=functools.partial(tower_loss, fused=fused),
      tf1_optimizer=functools.partial(tf1_optimizer, scaling=scaling),
      build_model=functools.partial(keras_port.ResNet, pool=pool),
      replica_loss=functools.partial(keras_port.replica_loss, float32_logits=float32_logits,
                                     decay_batch_norm=decay_batch_norm),
      tf2_optimizer=functools.partial(keras_port.tf2_optimizer, loss_scale=tf2_scale,
                                      growth=growth),
      gradient_reduction="sum", tf1_towers=MIRRORED_ESTIMATOR)
  fields.update(changes)
  return porting.Port(**fields)


def batches(replicas, per_replica=PER_REPLICA, steps=3, seed=0):
  return helpers.image_batches(replicas, per_replica, SIZE, CLASSES, steps, seed)
