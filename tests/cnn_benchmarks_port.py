"""tensorflow/benchmarks' tf_cnn_benchmarks (the most used TF1 multi-GPU script), shrunk, under
--variable_update=parameter_server and --variable_update=replicated, and the Keras 3 port a
team would write: TF1 code nobody on the team wrote, taken as a migrating team would take it.

Read in tensorflow/benchmarks at 8fb79079265933ad39bea628b777af662f5bf15d,
scripts/tf_cnn_benchmarks/:

- benchmark_cnn.py, add_forward_pass_and_gradients: each tower's `base_loss` is
  model.loss_function's `tf.reduce_mean(tf.losses.sparse_softmax_cross_entropy(logits,
  labels))`; the L2 loss is built on ONE device only, the last (`if rel_device_num ==
  len(self.devices) - 1`), over `trainable_variables_on_device` filtered by
  filter_l2_loss_vars (every trainable variable whose name lacks 'batchnorm': the affine
  biases are decayed, batch norm's beta and gamma are not), as `tf.add_n([tf.nn.l2_loss(v)
  ...])`, and added there multiplied by the number of devices: `total_loss +=
  len(self.devices) * weight_decay * l2_loss`; grads = tf.gradients(total_loss, params);
  loss_type_to_report 'total_loss' (the default): the tower's reported loss holds it.
- _build_model: towers under `name_scope('tower_%i')` inside
  variable_mgr.create_outer_variable_scope; `update_ops = tf.get_collection(UPDATE_OPS,
  name_scope)` of device 0 only ("Retain the Batch Normalization updates operations only from
  the first tower"); train_op = tf.group(training_ops + update_ops).
- _build_fetches: learning_rate = get_learning_rate(...): with --init_learning_rate,
  --num_epochs_per_decay and --learning_rate_decay_factor, `tf.train.exponential_decay(
  init_learning_rate, global_step, int(num_batches_per_epoch * num_epochs_per_decay),
  learning_rate_decay_factor, staircase=True)`, num_batches_per_epoch = examples per epoch /
  the global batch; get_optimizer('momentum'): `tf.train.MomentumOptimizer(learning_rate,
  momentum, use_nesterov=True)`.
- variable_mgr.py: VariableMgrLocalFetchFromPS (parameter_server): one set of variables
  (`variable_scope('v', reuse=bool(device_num))`), the towers' gradients aggregated by
  variable_mgr_util.aggregate_single_gradient_using_copy with use_mean=True: `tf.add_n(grads)`
  then `tf.scalar_mul(1.0 / len(grads), grad)`, applied once. VariableMgrLocalReplicated
  (replicated): variables per tower ('v0', 'v1', ... copied from v0 after init), the towers'
  gradients all-reduced by batch_allreduce's CopyToDeviceAlgorithm (use_mean=False:
  `tf.add_n`), a SUM, not a mean (tensorflow/benchmarks#466: "the gradients are summed
  instead of averaged ... variable_update=parameter_server averages"), each tower applying the
  sum to its own copy with its own optimizer. Only v0's batch norm moving statistics move
  (tower 0's UPDATE_OPS); savable_variables saves v0's.
- models/model.py CNNModel.build_network + convnet_builder.py ConvNetBuilder (use_tf_layers
  True, the default): conv = tf.layers.conv2d(use_bias=False, variance_scaling_initializer)
  under 'convN', then (use_batch_norm) batch_norm: tf.layers.BatchNormalization(momentum=decay,
  scale, epsilon, fused=True, center=True) under 'batchnormN', relu; mpool =
  tf.layers.max_pooling2d; affine = get_variable('weights', truncated_normal(stddev=sqrt(
  init_factor / fan_in))) and 'biases' (constant 0), tf.nn.xw_plus_b, relu unless linear;
  everything in variable_scope('cg'). ResNet's batch_norm_config: decay 0.9, epsilon 1e-5,
  scale True. No label smoothing in CNNModel.loss_function.

Shrunk: 8 x 8 images, NHWC (the CPU data format), conv0 (4 filters, 3 x 3, batch norm, relu),
a 2 x 2 max pool, affine0 (16, relu), affine1 (5 classes, linear); 4 examples a tower;
weight_decay 0.01 (the flag's default 4e-5 is too small to see in 3 steps); one batch an epoch
and num_epochs_per_decay 1, decay factor 0.5: the rate halves at every step, so a comparison
crosses two decays.

How each mode is told to the kit:
- parameter_server: `TowerCombination(loss="as_written", regularization="in_tower_loss",
  gradients="scaled_sum", update_ops="first_tower")`: each tower's loss as the script hands
  it to tf.gradients (the last tower's holding N x the penalty: tower_loss asks the kit for
  its `tower` and `towers`), summed by add_n, then x (1 / N), as the script averages (where
  average_gradients' reduce_mean divides: the same bits at N = 1, 2, 4, not at N = 3).
- replicated: `TowerCombination(loss="as_written", regularization="in_tower_loss",
  gradients="sum", update_ops="first_tower")`: the per-tower copies hold the same values
  (the same sum applied to the same start), so one set of variables is v0's.

The Keras 3 port (`Net`, `replica_loss`, `tf2_optimizer`): Conv2D(use_bias=False) +
BatchNormalization(momentum=0.9, epsilon=1e-5) + relu + MaxPooling2D + two Dense layers,
porting.TF1Momentum(ExponentialDecay, 0.9, use_nesterov=True), MirroredStrategy's sum of the
replicas' gradients (gradient_reduction="sum"). parameter_server: each replica's
cross-entropies summed over the global batch, and the penalty (N x wd x l2, scaled by 1/N by
tf.nn.scale_regularization_loss) on the last replica, as the script places it. replicated:
each replica's cross-entropy its own mean (the script sums the towers' means), N x wd x l2 on
the last replica.

Faults (`port(mode, fault=...)`), each one a team makes:
  "wd_every_replica"  the script's `len(devices) * weight_decay * l2_loss` line copied without
                      its `if rel_device_num == len(self.devices) - 1` guard: N x the decay.
  "bn_momentum"       Keras's BatchNormalization left at its default momentum 0.99.
  "keras_sgd"         keras.optimizers.SGD(momentum=0.9, nesterov=True) on the same schedule:
                      another update whenever the rate changes (here at every step).
  "loss_scale"        parameter_server: each replica's own mean, summed (the replicated
                      arithmetic: N x the script's gradient); replicated: TF2's idiom,
                      tf.nn.compute_average_loss over the global batch (1/N of the script's
                      summed gradient).
Not a fault (the update is the script's): "wd_spread", the penalty spread evenly over the
replicas (tf.nn.scale_regularization_loss of wd x l2 on every replica, the TF2 idiom, for
parameter_server; wd x l2 on every replica for replicated) instead of on the last one only.
"""

import functools
import math

import keras
import tensorflow as tf

import porting
from porting import tf1_layers
from porting.optimizers import TF1Momentum
from tests import helpers

v1 = tf.compat.v1
SIZE, FILTERS, HIDDEN, CLASSES = 8, 4, 16, 5
PER_REPLICA = 4
WEIGHT_DECAY = 0.01
MOMENTUM = 0.9
BN_DECAY, BN_EPSILON = 0.9, 1e-5  # resnet_model.py's batch_norm_config (scale True)
INIT_LEARNING_RATE = 0.1
NUM_EPOCHS_PER_DECAY = 1
LEARNING_RATE_DECAY_FACTOR = 0.5
MODES = ("parameter_server", "replicated")
FAULTS = (None, "wd_every_replica", "bn_momentum", "keras_sgd", "loss_scale", "wd_spread")

PARAMETER_SERVER = porting.TowerCombination(
    "tf_cnn_benchmarks parameter_server", loss="as_written", regularization="in_tower_loss",
    gradients="scaled_sum", update_ops="first_tower")
REPLICATED = porting.TowerCombination(
    "tf_cnn_benchmarks replicated", loss="as_written", regularization="in_tower_loss",
    gradients="sum", update_ops="first_tower")


# ----------------------------------------------------------------------------------------
# TF1: ConvNetBuilder's ops and add_forward_pass_and_gradients' loss.
# ----------------------------------------------------------------------------------------
class ConvNetBuilder:
  """convnet_builder.py's ConvNetBuilder, the ops this model uses, NHWC, use_tf_layers."""

  def __init__(self, input_op, input_nchan, fused=True):
    self.top_layer, self.top_size = input_op, input_nchan
    self.counts = {"conv": 0, "mpool": 0, "affine": 0, "batchnorm": 0}
    self.use_batch_norm = False
    self.batch_norm_config = {}
    self.fused = fused  # the script's is True; False: the check MIGRATION.md advises

  def conv(self, num_out_channels, k_height, k_width, activation="relu"):
    layers = tf1_layers.layers()
    name = "conv" + str(self.counts["conv"])
    self.counts["conv"] += 1
    with v1.variable_scope(name):
      conv = layers.conv2d(self.top_layer, num_out_channels, [k_height, k_width], [1, 1],
                           padding="SAME", data_format="channels_last",
                           kernel_initializer=v1.variance_scaling_initializer(),
                           use_bias=False)
      if self.use_batch_norm:
        self.top_layer, self.top_size = conv, num_out_channels
        biased = self.batch_norm(**self.batch_norm_config)
      else:
        raise NotImplementedError("this shrunk builder has the batch-norm path only")
      out = tf.nn.relu(biased) if activation == "relu" else biased
    self.top_layer, self.top_size = out, num_out_channels
    return out

  def mpool(self, k_height, k_width):
    name = "mpool" + str(self.counts["mpool"])
    self.counts["mpool"] += 1
    self.top_layer = tf1_layers.layers().max_pooling2d(
        self.top_layer, [k_height, k_width], [k_height, k_width], padding="VALID",
        data_format="channels_last", name=name)
    return self.top_layer

  def reshape(self, shape):
    self.top_layer = tf.reshape(self.top_layer, shape)
    self.top_size = shape[-1]
    return self.top_layer

  def affine(self, num_out_channels, activation="relu", bias=0.0):
    name = "affine" + str(self.counts["affine"])
    self.counts["affine"] += 1
    num_channels_in = self.top_size
    with v1.variable_scope(name):
      init_factor = 2. if activation == "relu" else 1.
      stddev = math.sqrt(init_factor / num_channels_in)
      kernel = v1.get_variable("weights", [num_channels_in, num_out_channels], tf.float32,
                               initializer=v1.truncated_normal_initializer(stddev=stddev))
      biases = v1.get_variable("biases", [num_out_channels], tf.float32,
                               initializer=v1.constant_initializer(bias))
      logits = tf.compat.v1.nn.xw_plus_b(self.top_layer, kernel, biases)
      out = tf.nn.relu(logits, name=name) if activation == "relu" else logits
    self.top_layer, self.top_size = out, num_out_channels
    return out

  def batch_norm(self, decay=0.999, scale=False, epsilon=0.001):
    name = "batchnorm" + str(self.counts["batchnorm"])
    self.counts["batchnorm"] += 1
    with v1.variable_scope(name) as scope:
      layer_obj = tf1_layers.layers().BatchNormalization(
          momentum=decay, scale=scale, epsilon=epsilon, fused=self.fused, axis=3,
          _scope=scope, center=True, name=scope.name)
      bn = layer_obj.apply(self.top_layer, training=True)
    self.top_layer = bn
    self.top_size = int(bn.shape[3])
    return bn


def add_inference(cnn):
  """The shrunk model's add_inference (ResNet's batch-norm settings)."""
  cnn.use_batch_norm = True
  cnn.batch_norm_config = {"decay": BN_DECAY, "epsilon": BN_EPSILON, "scale": True}
  cnn.conv(FILTERS, 3, 3)
  cnn.mpool(2, 2)
  cnn.reshape([-1, FILTERS * (SIZE // 2) ** 2])
  cnn.affine(HIDDEN)


def build_network(images, fused=True):
  """CNNModel.build_network: the builder under variable_scope('cg'), the final linear affine."""
  network = ConvNetBuilder(images, 3, fused=fused)
  with v1.variable_scope("cg"):
    add_inference(network)
    return network.affine(CLASSES, activation="linear")


def filter_l2_loss_vars(variables):
  """model.py's default: batch normalization's variables left out."""
  return [v for v in variables if "batchnorm" not in v.name]


def tower_loss(scope, images, labels, tower=0, towers=1, mode="parameter_server",
               fused=True):
  """add_forward_pass_and_gradients up to tf.gradients, for tower `tower` of `towers` (the
  kit tells both): the cross-entropy of its slice, and on the last tower N x weight_decay x
  the L2 loss. (VariableMgr's outer scope: 'v' for parameter_server; 'v0' for replicated,
  whose towers' copies the kit holds as one set, v0's.)"""
  del scope  # the tower's name scope; its index is `tower`
  with v1.variable_scope("v" if mode == "parameter_server" else "v0"):
    logits = build_network(images, fused=fused)
    with tf.name_scope("xentropy"):
      cross_entropy = v1.losses.sparse_softmax_cross_entropy(logits=logits, labels=labels)
      base_loss = tf.reduce_mean(cross_entropy, name="xentropy_mean")
    params = v1.trainable_variables()  # trainable_variables_on_device: all of them, shared
    total_loss = base_loss
    l2_loss = None
    with tf.name_scope("l2_loss"):
      filtered_params = filter_l2_loss_vars(params)
      if tower == towers - 1:
        l2_loss = tf.add_n([tf.nn.l2_loss(v) for v in filtered_params])
    if l2_loss is not None:
      total_loss += towers * WEIGHT_DECAY * l2_loss
  return total_loss, logits  # loss_type_to_report 'total_loss'


def learning_rate_schedule(replicas):
  """get_learning_rate's numbers: decay_steps = int(num_batches_per_epoch x
  num_epochs_per_decay), one batch an epoch."""
  global_batch = PER_REPLICA * replicas
  num_examples_per_epoch = global_batch
  num_batches_per_epoch = num_examples_per_epoch / global_batch
  decay_steps = int(num_batches_per_epoch * NUM_EPOCHS_PER_DECAY)
  return INIT_LEARNING_RATE, decay_steps, LEARNING_RATE_DECAY_FACTOR


def tf1_optimizer(global_step, replicas=2):
  init, decay_steps, factor = learning_rate_schedule(replicas)
  with tf.name_scope("learning_rate"):
    learning_rate = v1.train.exponential_decay(init, global_step, decay_steps, factor,
                                               staircase=True)
  learning_rate = tf.identity(learning_rate, name="learning_rate_tensor")
  return v1.train.MomentumOptimizer(learning_rate, MOMENTUM, use_nesterov=True)


# ----------------------------------------------------------------------------------------
# TF2: the Keras 3 port.
# ----------------------------------------------------------------------------------------
class Net(keras.Model):
  """The shrunk model in Keras 3, its layers created in the TF1 order."""

  def __init__(self, bn_momentum=BN_DECAY):
    super().__init__(name="net")
    self.conv0 = keras.layers.Conv2D(FILTERS, 3, padding="same", use_bias=False,
                                     kernel_initializer=keras.initializers.VarianceScaling(
                                         seed=1), name="conv0")
    self.bn0 = keras.layers.BatchNormalization(momentum=bn_momentum, epsilon=BN_EPSILON,
                                               name="batchnorm0")
    self.pool0 = keras.layers.MaxPooling2D(2, 2, padding="valid")
    self.affine0 = keras.layers.Dense(HIDDEN, activation="relu", name="affine0",
                                      kernel_initializer=keras.initializers.TruncatedNormal(
                                          stddev=math.sqrt(2. / (FILTERS * (SIZE // 2) ** 2)),
                                          seed=2))
    self.affine1 = keras.layers.Dense(CLASSES, name="affine1",
                                      kernel_initializer=keras.initializers.TruncatedNormal(
                                          stddev=math.sqrt(1. / HIDDEN), seed=3))
    self(tf.zeros((1, SIZE, SIZE, 3)))

  def call(self, images, training=False):
    x = tf.nn.relu(self.bn0(self.conv0(images), training=training))
    x = tf.reshape(self.pool0(x), [-1, FILTERS * (SIZE // 2) ** 2])
    return self.affine1(self.affine0(x))

  def l2_loss(self):
    """tf.add_n of tf.nn.l2_loss over the trainable variables but batch norm's, in the
    model's order (the script's filter_l2_loss_vars)."""
    batch_norm = {id(v) for v in self.bn0.weights}
    return tf.add_n([tf.nn.l2_loss(v) for v in self.trainable_variables
                     if id(v) not in batch_norm])


def replica_loss(model, images, labels, global_batch_size, mode="parameter_server",
                 fault=None):
  """One replica's loss, the optimizer summing the replicas' gradients."""
  ctx = tf.distribute.get_replica_context()
  n = ctx.num_replicas_in_sync
  last = tf.get_static_value(ctx.replica_id_in_sync_group) == n - 1
  logits = model(images, training=True)
  per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
  # parameter_server averages the towers' means: the global batch's mean; replicated sums
  # them: each replica's own mean. fault="loss_scale" takes the other.
  own_mean = (mode == "replicated") != (fault == "loss_scale")
  if own_mean:
    loss = tf.reduce_mean(per_example)
  else:
    loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch_size)
  l2 = model.l2_loss()
  if fault == "wd_spread":
    penalty = WEIGHT_DECAY * l2
    if mode == "parameter_server":
      penalty = tf.nn.scale_regularization_loss(penalty)
    return loss + penalty, logits
  if last or fault == "wd_every_replica":
    penalty = n * WEIGHT_DECAY * l2
    if mode == "parameter_server":
      penalty = tf.nn.scale_regularization_loss(penalty)
    loss = loss + penalty
  return loss, logits


def tf2_optimizer(replicas=2, fault=None):
  init, decay_steps, factor = learning_rate_schedule(replicas)
  rate = keras.optimizers.schedules.ExponentialDecay(init, decay_steps, factor,
                                                     staircase=True)
  if fault == "keras_sgd":
    return keras.optimizers.SGD(rate, momentum=MOMENTUM, nesterov=True)
  return TF1Momentum(rate, MOMENTUM, use_nesterov=True)


def port(mode="parameter_server", fault=None, replicas=2, fused=True, **changes):
  """The Port of tf_cnn_benchmarks' `mode` (--variable_update) and the port with `fault`."""
  if mode not in MODES:
    raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
  if fault not in FAULTS:
    raise ValueError(f"fault must be one of {FAULTS}, got {fault!r}")
  fields = dict(
      tower_loss=functools.partial(tower_loss, mode=mode, fused=fused),
      tf1_optimizer=functools.partial(tf1_optimizer, replicas=replicas),
      build_model=functools.partial(Net, bn_momentum=0.99 if fault == "bn_momentum"
                                    else BN_DECAY),
      replica_loss=functools.partial(replica_loss, mode=mode, fault=fault),
      tf2_optimizer=functools.partial(tf2_optimizer, replicas=replicas, fault=fault),
      tf1_towers=PARAMETER_SERVER if mode == "parameter_server" else REPLICATED)
  fields.update(changes)
  return porting.Port(**fields)


def batches(replicas, steps=3, seed=0):
  return helpers.image_batches(replicas, PER_REPLICA, SIZE, CLASSES, steps, seed)
