"""A fifth model for the porting kit: tensorflow/models' classic `inception/inception_train.py`
and its own `inception/slim/ops.py` (raw tf.compat.v1 ops and get_variable, not tf_slim), shrunk
to 8x8 images, and its Keras 3 port.

TF1 (`tower_loss(scope, images, labels)`): `conv2d` (no bias, L2 into REGULARIZATION_LOSSES) +
`batch_norm` (no gamma, decay 0.9997, the batch's moments, the moving statistics updated by
assign_moving_average with its default zero_debias=True, into inception's own "_update_ops_"
and tf.GraphKeys.UPDATE_OPS, which the kit reads); a "mixed" block whose input feeds four
branches; an aux head on its output; dropout (keep_prob); label-smoothed cross-entropies, the
aux one x 0.4, + the regularization; RMSProp(0.9, 0.9, epsilon 1.0) on a staircase decay; an EMA.
TF2 (`Net`): Keras layers in the TF1 creation order, `DebiasedBatchNorm` (zero_debias's update
op for op), porting.optimizers.TF1RMSProp. One-fault ports: the *_port names.

What the Port does not let this file say as inception_train.py does: its float32 global step
(the kit makes an int64 one, get_or_create_global_step); its EMA of tf.trainable_variables() +
tf.moving_average_variables() (the kit applies tf1_ema to the trainable ones). It keeps the
last tower's UPDATE_OPS: port(update_ops="last_tower"); the default is the kit's first tower's.
"""

import functools

import numpy as np
import tensorflow as tf
import keras
from tensorflow.python.training import moving_averages

from porting import Port
from porting.optimizers import TF1RMSProp

v1 = tf.compat.v1
SIZE, CLASSES, PER_REPLICA = 8, 5, 4
BN_DECAY, BN_EPSILON = 0.9997, 0.001
WEIGHT_DECAY = 4e-5
KEEP_PROB = 0.8
LABEL_SMOOTHING, AUX_WEIGHT = 0.1, 0.4
LEARNING_RATE, DECAY_STEPS, DECAY_FACTOR = 0.1, 2, 0.16
RMSPROP = dict(decay=0.9, momentum=0.9, epsilon=1.0)
EMA_DECAY = 0.9999
UPDATE_OPS_COLLECTION = "_update_ops_"  # inception/slim/ops.py's own collection
# (scope, filters, kernel, stride, padding, stddev) of every conv2d + batch_norm, in call
# order; both sides build from this list, so their variables are created in the same order.
CONVS = (("conv0", 4, 3, 1, "SAME", 0.1), ("conv1", 6, 3, 1, "SAME", 0.1),
         ("mixed/branch1x1/Conv", 2, 1, 1, "SAME", 0.1),
         ("mixed/branch3x3/Conv", 2, 1, 1, "SAME", 0.1),
         ("mixed/branch3x3/Conv_1", 2, 3, 1, "SAME", 0.1),
         ("mixed/branch_pool/Conv", 2, 1, 1, "SAME", 0.1),
         ("mixed/branch3x3dbl/Conv", 2, 1, 1, "SAME", 0.1),
         ("mixed/branch3x3dbl/Conv_1", 2, 3, 1, "SAME", 0.1),
         ("mixed/branch3x3dbl/Conv_2", 2, 3, 1, "SAME", 0.1),
         ("aux_logits/proj", 4, 1, 1, "SAME", 0.1), ("aux_logits/Conv", 6, 2, 1, "VALID", 0.01),
         ("conv2", 8, 3, 2, "SAME", 0.1))


# --- TF1: inception/slim/ops.py and losses.py, as written there ------------------------------

def l2_regularizer(weight):
  """inception/slim/losses.py's: weight x tf.nn.l2_loss(tensor)."""
  def regularizer(tensor):
    with tf.name_scope("L2Regularizer"):
      return tf.multiply(tf.convert_to_tensor(weight, tensor.dtype.base_dtype),
                         tf.nn.l2_loss(tensor), name="value")
  return regularizer


def batch_norm(inputs, decay=BN_DECAY, epsilon=BN_EPSILON):
  """ops.batch_norm(scale=False, is_training=True): the batch's moments; the moving ones
  updated by assign_moving_average with its default zero_debias=True."""
  with v1.variable_scope(None, "BatchNorm", [inputs]):
    shape = inputs.get_shape()[-1:]
    beta = v1.get_variable("beta", shape, initializer=v1.zeros_initializer())
    collections = [v1.GraphKeys.GLOBAL_VARIABLES, v1.GraphKeys.MOVING_AVERAGE_VARIABLES]
    moving_mean = v1.get_variable("moving_mean", shape, initializer=v1.zeros_initializer(),
                                  trainable=False, collections=collections)
    moving_variance = v1.get_variable("moving_variance", shape, trainable=False,
                                      initializer=v1.ones_initializer(),
                                      collections=collections)
    mean, variance = tf.nn.moments(inputs, [0, 1, 2])
    for variable, value in ((moving_mean, mean), (moving_variance, variance)):
      update = moving_averages.assign_moving_average(variable, value, decay)
      v1.add_to_collection(UPDATE_OPS_COLLECTION, update)
      v1.add_to_collection(v1.GraphKeys.UPDATE_OPS, update)  # what the kit's towers read
    return tf.nn.batch_normalization(inputs, mean, variance, beta, None, epsilon)


def conv2d(inputs, scope):
  """ops.conv2d with batch_norm_params: no bias, batch norm, ReLU."""
  _, filters, kernel, stride, padding, stddev = next(c for c in CONVS if c[0] == scope)
  with v1.variable_scope(scope.rsplit("/", 1)[-1]):
    weights = v1.get_variable(
        "weights", [kernel, kernel, inputs.get_shape()[-1], filters],
        initializer=v1.truncated_normal_initializer(stddev=stddev, seed=1),
        regularizer=l2_regularizer(WEIGHT_DECAY))
    x = tf.nn.conv2d(inputs, weights, [1, stride, stride, 1], padding)
    return tf.nn.relu(batch_norm(x))


def fc(inputs, units, scope, stddev=0.001):
  """ops.fc(activation=None): tf.nn.xw_plus_b, the weights regularized."""
  with v1.variable_scope(scope):
    weights = v1.get_variable(
        "weights", [inputs.get_shape()[1], units], regularizer=l2_regularizer(WEIGHT_DECAY),
        initializer=v1.truncated_normal_initializer(stddev=stddev, seed=2))
    biases = v1.get_variable("biases", [units], initializer=v1.zeros_initializer())
    return v1.nn.xw_plus_b(inputs, weights, biases)


def flatten(x):
  return tf.reshape(x, [-1, int(np.prod(x.get_shape().as_list()[1:]))])


def inference(images):
  """(logits, aux_logits): inception_v3's layout in miniature."""
  x = conv2d(conv2d(images, "conv0"), "conv1")
  with v1.variable_scope("mixed"):  # one input tensor, four branches
    with v1.variable_scope("branch1x1"):
      b1 = conv2d(x, "mixed/branch1x1/Conv")
    with v1.variable_scope("branch3x3"):
      b3 = conv2d(conv2d(x, "mixed/branch3x3/Conv"), "mixed/branch3x3/Conv_1")
    with v1.variable_scope("branch_pool"):
      bp = conv2d(tf.nn.avg_pool2d(x, 3, 1, "SAME"), "mixed/branch_pool/Conv")
    with v1.variable_scope("branch3x3dbl"):
      bd = conv2d(conv2d(conv2d(x, "mixed/branch3x3dbl/Conv"), "mixed/branch3x3dbl/Conv_1"),
                  "mixed/branch3x3dbl/Conv_2")
    x = tf.concat([b1, b3, bp, bd], 3)
  with v1.variable_scope("aux_logits"):  # on an intermediate tensor, as inception's
    aux = conv2d(tf.nn.avg_pool2d(x, 5, 3, "VALID"), "aux_logits/proj")
    aux = fc(flatten(conv2d(aux, "aux_logits/Conv")), CLASSES, "FC")
  x = conv2d(x, "conv2")
  with v1.variable_scope("logits"):
    x = tf.nn.avg_pool2d(x, x.get_shape().as_list()[1:3], 1, "VALID")
    x = v1.nn.dropout(x, keep_prob=KEEP_PROB)  # ops.dropout: the old keep_prob argument
    logits = fc(flatten(x), CLASSES, "logits")
  return logits, aux


def tower_loss(scope, images, labels):
  """inception_train._tower_loss: the tower's LOSSES (by scope) + every regularization loss."""
  logits, aux_logits = inference(images)
  one_hot = tf.one_hot(labels, CLASSES)
  v1.losses.softmax_cross_entropy(one_hot, logits, label_smoothing=LABEL_SMOOTHING)
  v1.losses.softmax_cross_entropy(one_hot, aux_logits, weights=AUX_WEIGHT,
                                  label_smoothing=LABEL_SMOOTHING)
  losses = v1.get_collection(v1.GraphKeys.LOSSES, scope)
  regularization = v1.get_collection(v1.GraphKeys.REGULARIZATION_LOSSES)
  return tf.add_n(losses + regularization, name="total_loss"), logits


def tf1_optimizer(global_step):
  rate = v1.train.exponential_decay(LEARNING_RATE, global_step, DECAY_STEPS, DECAY_FACTOR,
                                    staircase=True)
  return v1.train.RMSPropOptimizer(rate, **RMSPROP)


def tf1_ema(global_step):
  return v1.train.ExponentialMovingAverage(EMA_DECAY, global_step)


# --- TF2: the Keras 3 port -------------------------------------------------------------------

class DebiasedBatchNorm(keras.layers.Layer):
  """Batch norm without gamma, its moving statistics updated as assign_moving_average(...,
  zero_debias=True) updates them, op for op; `biased` and `local_step` made after the
  statistics, as TF1 makes them (at the first update)."""

  def build(self, input_shape):
    add = lambda name, init, trainable=False, shape=(input_shape[-1],): self.add_weight(
        name=name, shape=shape, initializer=init, trainable=trainable)
    self.beta = add("beta", "zeros", True)
    self.moving = [add("moving_mean", "zeros"), add("moving_variance", "ones")]
    self.debias = [(add(f"{kind}_biased", "zeros"), add(f"{kind}_local_step", "zeros", shape=()))
                   for kind in ("mean", "variance")]

  def call(self, x, training=False):
    if not training:
      return tf.nn.batch_normalization(x, *self.moving, self.beta, None, BN_EPSILON)
    mean, variance = tf.nn.moments(x, [0, 1, 2])
    for variable, (biased, step), value in zip(self.moving, self.debias, (mean, variance)):
      # moving_averages._zero_debias's ops, on the tf.Variables (an AssignSub, as TF1's).
      biased, step = biased.value, step.value
      decay = tf.convert_to_tensor(1.0 - BN_DECAY)
      update_biased = biased.assign_sub((biased - value) * decay)
      update_step = step.assign_add(1)
      variable.value.assign(update_biased / (1 - tf.pow(1.0 - decay, update_step)))
    return tf.nn.batch_normalization(x, mean, variance, self.beta, None, BN_EPSILON)


class L2Loss(keras.regularizers.Regularizer):
  """TF1's penalty as written, c x tf.nn.l2_loss(w). keras.regularizers.L2(c / 2) gives the same
  terms, but grappler's arithmetic optimizer rewrites TF1's sum of Mul(c, L2Loss) terms, and
  the loss parts by a rounding (keras_l2_port)."""

  def __init__(self, scale):
    self.scale = scale

  def __call__(self, x):
    return tf.multiply(tf.convert_to_tensor(self.scale, x.dtype), tf.nn.l2_loss(x))


class Net(keras.Model):
  """The port: (logits, aux_logits). momentum: None for DebiasedBatchNorm, else Keras's
  BatchNormalization(momentum, epsilon 0.001, scale=False); regularizer "l2_loss" (L2Loss) or
  "keras" (L2(c / 2))."""

  def __init__(self, momentum=None, regularizer="l2_loss"):
    super().__init__(name="net")
    l2 = lambda: L2Loss(WEIGHT_DECAY) if regularizer == "l2_loss" else keras.regularizers.L2(
        WEIGHT_DECAY / 2)
    fc = lambda name: keras.layers.Dense(CLASSES, name=name, kernel_regularizer=l2(),
                                         kernel_initializer=keras.initializers.TruncatedNormal(
                                             0.001, seed=2))

    def conv(scope, filters, kernel, stride, padding, stddev):  # conv2d + batch norm (+ ReLU)
      bn = DebiasedBatchNorm(name="bn") if momentum is None else (
          keras.layers.BatchNormalization(momentum=momentum, epsilon=BN_EPSILON, scale=False,
                                          name="bn"))
      return keras.Sequential([keras.layers.Conv2D(
          filters, kernel, stride, padding.lower(), use_bias=False, name="conv",
          kernel_regularizer=l2(), kernel_initializer=keras.initializers.TruncatedNormal(
              stddev=stddev, seed=1)), bn], name=scope.replace("/", "_"))
    # Attributes in the TF1 creation order: a Keras model lists its weights in that order.
    self.convs = {spec[0]: conv(*spec) for spec in CONVS[:-1]}
    self.aux_fc = fc("aux_fc")
    self.conv2 = conv(*CONVS[-1])
    self.drop = keras.layers.Dropout(1 - KEEP_PROB)
    self.logits = fc("logits")
    self(tf.zeros((1, SIZE, SIZE, 3)))

  def call(self, images, training=False):
    conv = lambda x, scope: tf.nn.relu(self.convs[scope](x, training=training))
    x = conv(conv(images, "conv0"), "conv1")
    b1 = conv(x, "mixed/branch1x1/Conv")
    b3 = conv(conv(x, "mixed/branch3x3/Conv"), "mixed/branch3x3/Conv_1")
    bp = conv(tf.nn.avg_pool2d(x, 3, 1, "SAME"), "mixed/branch_pool/Conv")
    bd = conv(conv(conv(x, "mixed/branch3x3dbl/Conv"), "mixed/branch3x3dbl/Conv_1"),
              "mixed/branch3x3dbl/Conv_2")
    x = tf.concat([b1, b3, bp, bd], 3)
    aux = conv(conv(tf.nn.avg_pool2d(x, 5, 3, "VALID"), "aux_logits/proj"), "aux_logits/Conv")
    aux = self.aux_fc(tf.reshape(aux, [tf.shape(aux)[0], -1]))
    x = tf.nn.relu(self.conv2(x, training=training))
    x = tf.nn.avg_pool2d(x, x.shape[1:3], 1, "VALID")
    x = self.drop(tf.reshape(x, [tf.shape(x)[0], -1]), training=training)
    return self.logits(x), aux


def _weighted_mean(per_example, weight):
  """tf.compat.v1.losses' SUM_BY_NONZERO_WEIGHTS, sum(loss x weight) / count. (Not a
  keras.losses object: under tf.distribute it divides by the replicas too, 1/N at N > 1.)"""
  count = tf.cast(tf.size(per_example), per_example.dtype)
  return tf.math.divide_no_nan(tf.reduce_sum(per_example * weight), count)


def replica_loss(model, images, labels, global_batch_size, aux=True,
                 smoothing=LABEL_SMOOTHING):
  """The tower's own loss (gradient_reduction='mean'): smoothed cross-entropies, the aux one
  weighted 0.4, plus the regularization. aux=False, smoothing=0: one-fault ports."""
  del global_batch_size
  logits, aux_logits = model(images, training=True)
  one_hot = tf.one_hot(labels, CLASSES)
  loss = lambda out, weight: _weighted_mean(keras.losses.categorical_crossentropy(
      one_hot, out, from_logits=True, label_smoothing=smoothing), weight)
  losses = [loss(logits, 1.0)] + ([loss(aux_logits, AUX_WEIGHT)] if aux else [])
  return tf.add_n(losses + model.losses), logits


def tf2_optimizer(keras_rmsprop=False):
  rate = keras.optimizers.schedules.ExponentialDecay(LEARNING_RATE, DECAY_STEPS, DECAY_FACTOR,
                                                     staircase=True)
  if keras_rmsprop:  # fault (a): Keras's RMSprop (its `rms` starts at 0, TF1's at 1)
    return keras.optimizers.RMSprop(rate, rho=RMSPROP["decay"], momentum=RMSPROP["momentum"],
                                    epsilon=RMSPROP["epsilon"])
  return TF1RMSProp(rate, **RMSPROP)


def tf2_ema(optimizer):
  return tf.train.ExponentialMovingAverage(EMA_DECAY, num_updates=optimizer.iterations)


def debias_variables():
  """{TF1 name: None} of the zero-debias variables, which Keras's BatchNormalization lacks
  (_zero_debias opens a variable scope named after the statistic inside the current one)."""
  return {f"{scope}/BatchNorm/{scope}/BatchNorm/{stat}/{kind}": None for scope, *_ in CONVS
          for stat in ("moving_mean", "moving_variance") for kind in ("biased", "local_step")}


def port(replicas=2, ema=True, **changes):
  """The faithful port (fields replaced by `changes`, e.g. update_ops="all_towers")."""
  del replicas  # the same Port at every N
  fields = dict(tower_loss=tower_loss, tf1_optimizer=tf1_optimizer, build_model=Net,
                replica_loss=replica_loss, tf2_optimizer=tf2_optimizer,
                gradient_reduction="mean")
  if ema:
    fields.update(tf1_ema=tf1_ema, tf2_ema=tf2_ema)
  fields.update(changes)
  return Port(**fields)


# One-fault ports: the faithful port with one field changed.
keras_rmsprop_port = functools.partial(  # (a) Keras's RMSprop: its `rms` from 0, TF1's from 1
    port, tf2_optimizer=functools.partial(tf2_optimizer, keras_rmsprop=True))
no_aux_loss_port = functools.partial(  # (b) the aux head's weights get no gradient
    port, replica_loss=functools.partial(replica_loss, aux=False))
no_label_smoothing_port = functools.partial(  # (c)
    port, replica_loss=functools.partial(replica_loss, smoothing=0.0))
keras_l2_port = functools.partial(  # keras.regularizers.L2(c / 2) (see L2Loss)
    port, build_model=functools.partial(Net, regularizer="keras"))


def keras_batch_norm_port(replicas=2, momentum=0.99):  # (d) Keras's BatchNormalization
  return port(replicas, build_model=lambda: Net(momentum), variable_map=debias_variables())


def batches(replicas, steps=3, seed=0):
  rng = np.random.default_rng(seed)
  n = replicas * PER_REPLICA
  return [(rng.normal(size=(n, SIZE, SIZE, 3)).astype(np.float32),
           rng.integers(0, CLASSES, size=n).astype(np.int32)) for _ in range(steps)]
