"""The Keras 3 port of the official TF1 ResNet's float16 path (tests/resnet_fp16_port.py holds
the TF1 side and the Port): its layers under the `mixed_float16` policy in the TF1 order, the
logits cast to float32, `tf.nn.compute_average_loss` over the global batch plus
`tf.nn.scale_regularization_loss` of the same penalty, porting.optimizers.TF1Momentum under
`keras.optimizers.LossScaleOptimizer(initial_scale=128)` (Keras's is always dynamic; its
growth period is put past the comparison).

`ResNet(pool=...)`: "keras" (GlobalAveragePooling2D: Keras's mean sums a float16 tensor in
float32) or "float16" (`tf.reduce_mean` in float16, as the TF1 script pools).
"""

import keras
import tensorflow as tf

from porting.optimizers import TF1Momentum
from tests.resnet_fp16_sizes import (
    BATCH_NORM_DECAY, BATCH_NORM_EPSILON, BLOCK_STRIDES, CLASSES, LEARNING_RATE, LOSS_SCALE,
    MOMENTUM, NO_GROWTH, NUM_FILTERS, SIZE, WEIGHT_DECAY, num_blocks)

POLICY = "mixed_float16"


class _Conv(keras.layers.Layer):
  """conv2d_fixed_padding: explicit padding, then a VALID convolution, where strided."""

  def __init__(self, filters, kernel_size, strides, **kwargs):
    super().__init__(**kwargs)
    self.pad = (keras.layers.ZeroPadding2D((kernel_size - 1) // 2, dtype=POLICY)
                if strides > 1 else None)
    self.conv = keras.layers.Conv2D(
        filters, kernel_size, strides=strides, use_bias=False,
        padding="same" if strides == 1 else "valid", dtype=POLICY,
        kernel_initializer=keras.initializers.VarianceScaling(), name="conv")

  def build(self, input_shape):
    self.conv.build(input_shape if self.pad is None else self.pad.compute_output_shape(
        input_shape))
    super().build(input_shape)

  def call(self, x):
    return self.conv(x if self.pad is None else self.pad(x))


class ResNet(keras.Model):
  """The v1 ResNet (resnet_size 8) in Keras 3 under mixed_float16, its layers created in the
  TF1 order (so trainable_variables is in TF1's order)."""

  def __init__(self, pool="keras"):
    super().__init__(name="resnet", dtype=POLICY)
    count = iter(range(100))

    def bn():
      return keras.layers.BatchNormalization(
          momentum=BATCH_NORM_DECAY, epsilon=BATCH_NORM_EPSILON, dtype=POLICY,
          name=f"bn{next(count)}")

    self.stem = _Conv(NUM_FILTERS, 3, 1, name="initial_conv", dtype=POLICY)
    self.stem_bn = bn()
    self.blocks = []
    for i, strides in enumerate(BLOCK_STRIDES):
      filters = NUM_FILTERS * (2 ** i)
      for b in range(num_blocks()):
        block = {}
        if b == 0:
          block["shortcut"] = _Conv(filters, 1, strides, name=f"proj{i}", dtype=POLICY)
          block["shortcut_bn"] = bn()
        block["conv1"] = _Conv(filters, 3, strides if b == 0 else 1, name=f"conv{i}_{b}a",
                               dtype=POLICY)
        block["bn1"] = bn()
        block["conv2"] = _Conv(filters, 3, 1, name=f"conv{i}_{b}b", dtype=POLICY)
        block["bn2"] = bn()
        for key, layer in block.items():
          setattr(self, f"b{i}_{b}_{key}", layer)
        self.blocks.append(block)
    self.pool = (keras.layers.GlobalAveragePooling2D(dtype=POLICY) if pool == "keras" else
                 lambda x: tf.reduce_mean(x, [1, 2]))
    self.dense = keras.layers.Dense(CLASSES, name="dense", dtype=POLICY)
    self(tf.zeros((1, SIZE, SIZE, 3)))

  def call(self, images, training=False):
    x = tf.nn.relu(self.stem_bn(self.stem(images), training=training))
    for block in self.blocks:
      shortcut = x
      if "shortcut" in block:
        shortcut = block["shortcut_bn"](block["shortcut"](x), training=training)
      y = tf.nn.relu(block["bn1"](block["conv1"](x), training=training))
      y = block["bn2"](block["conv2"](y), training=training)
      x = tf.nn.relu(y + shortcut)
    return self.dense(self.pool(x))  # float16 logits

  def l2_loss(self, batch_norm=False):
    """weight_decay * add_n(l2_loss(cast(v, float32))) in TF1's order; batch_norm=False:
    gamma and beta left out (the script's default loss_filter_fn)."""
    left_out = set() if batch_norm else {
        id(v) for layer in self._flatten_layers()
        if isinstance(layer, keras.layers.BatchNormalization) for v in layer.weights}
    return WEIGHT_DECAY * tf.add_n([tf.nn.l2_loss(tf.cast(v, tf.float32))
                                    for v in self.trainable_variables
                                    if id(v) not in left_out])


def replica_loss(model, images, labels, global_batch_size, float32_logits=True,
                 decay_batch_norm=False):
  """The replica's share (gradient_reduction "sum"): its cross-entropies over the global
  batch plus 1/N of the penalty.

  float32_logits: the logits cast to float32 before the cross-entropy, as the script does
    (False: the cross-entropy computed on the float16 logits, its mean cast to float32).
  decay_batch_norm: the penalty on batch norm's gamma and beta too."""
  logits16 = model(images, training=True)
  logits = tf.cast(logits16, tf.float32)
  if float32_logits:
    per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch_size)
  else:
    per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                 logits=logits16)
    loss = tf.cast(tf.nn.compute_average_loss(per_example,
                                              global_batch_size=global_batch_size),
                   tf.float32)
  penalty = tf.nn.scale_regularization_loss(model.l2_loss(batch_norm=decay_batch_norm))
  return loss + penalty, logits


def tf2_optimizer(loss_scale=LOSS_SCALE, growth=NO_GROWTH):
  """TF1Momentum under Keras's LossScaleOptimizer from loss_scale (None: no loss scale)."""
  momentum = TF1Momentum(LEARNING_RATE, momentum=MOMENTUM)
  if loss_scale is None:
    return momentum
  return keras.optimizers.LossScaleOptimizer(momentum, initial_scale=loss_scale,
                                             dynamic_growth_steps=growth)


