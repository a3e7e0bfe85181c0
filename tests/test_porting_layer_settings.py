"""Every layer's settings compared before a step runs (porting.layer_settings): a port whose
batch norm keeps another momentum or epsilon, normalizes with the other statistics, whose
dropout has another rate, or whose regularization is another strength or on other variables,
is refused in one line naming both values. Before: the comparison ran and the report blamed
rounding (or nothing) for differences of 1e-2 and more."""

import functools

import keras
import numpy as np
import pytest
import tensorflow as tf

import porting
from porting import layer_mismatches
from porting import layer_settings
from tests import bn_momentum_port as bn
from tests import dropout_adam_port as drop

pytestmark = pytest.mark.filterwarnings("ignore:`tf.layers.")


class _BnNet(bn.Net):
  """bn.Net with one setting changed."""

  def __init__(self, momentum=bn.BN_MOMENTUM, epsilon=1e-3, training=True,
               regularizer=bn.WEIGHT_DECAY / 2, regularize_dense=True):
    keras.Model.__init__(self, name="net")
    self.training = training
    l2 = keras.regularizers.L2(regularizer)
    self.conv = keras.layers.Conv2D(bn.FILTERS, 3, padding="same", use_bias=False,
                                    kernel_initializer=keras.initializers.GlorotUniform(1),
                                    kernel_regularizer=l2, name="conv1")
    self.bn = keras.layers.BatchNormalization(momentum=momentum, epsilon=epsilon, name="bn1")
    self.dense = keras.layers.Dense(bn.CLASSES, name="logits",
                                    kernel_regularizer=l2 if regularize_dense else None,
                                    kernel_initializer=keras.initializers.GlorotUniform(2))
    self.build((None, bn.SIZE, bn.SIZE, 3))

  def call(self, images, training=False):
    x = self.bn(self.conv(images), training=training and self.training)
    return self.dense(tf.reduce_mean(tf.nn.relu(x), [1, 2]))


def _refusal(port, batches):
  with pytest.raises(porting.PortError) as raised:
    porting.compare(port, batches, replicas=2, steps=1)
  return str(raised.value)


# name: (Port fields changed, the model, what the one line must say)
BN_FAULTS = {
    "momentum": (dict(build_model=functools.partial(_BnNet, momentum=0.99)),
                 "batch norm bn1: momentum TF1 0.9, TF2 0.99"),
    "epsilon": (dict(build_model=functools.partial(_BnNet, epsilon=1e-5)),
                "batch norm bn1: epsilon TF1 0.001, TF2 1e-05"),
    "moving_statistics_in_training": (
        dict(build_model=functools.partial(_BnNet, training=False)),
        "batch norm bn1: normalizes with TF1 the batch's statistics, TF2 the moving "
        "statistics"),
    "regularization_strength": (
        dict(build_model=functools.partial(_BnNet, regularizer=bn.WEIGHT_DECAY)),
        "conv1/kernel, logits/kernel: regularization gradient TF2 2 x TF1's (a penalty "
        "c x tf.nn.l2_loss(w) is keras.regularizers.L2(c / 2))"),
    "regularized_variables": (
        dict(build_model=functools.partial(_BnNet, regularize_dense=False)),
        "logits/kernel: regularized on the TF1 side only"),
}


@pytest.mark.parametrize("kind", list(BN_FAULTS))
@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_a_batch_norm_or_regularization_setting_that_differs_is_one_line(kind):
  changes, expected = BN_FAULTS[kind]
  line = _refusal(bn.port(**changes), bn.batches(2))
  assert "the layers' settings differ: " in line and "\n" not in line
  # That setting only: the port has one fault.
  assert line.split(": ", 1)[1].split("; set them")[0] == expected, line


def test_a_dropout_rate_that_differs_is_one_line_with_both_rates():
  port = drop.port(build_model=functools.partial(drop.Net, rate=0.5))
  line = _refusal(port, drop.batches(2))
  assert "dropout drop1: rate TF1 0.4, TF2 0.5" in line, line


def test_a_dropout_missing_on_one_side_names_each_sides_count():
  port = drop.port(build_model=functools.partial(drop.Net, rate=0.0))
  line = _refusal(port, drop.batches(2))
  assert "dropout: TF1 1 (drop1 0.4), TF2 0 (none)" in line, line


@pytest.mark.slow  # two whole comparisons; the refusals above hold each reader
def test_the_settings_read_from_the_faithful_ports_are_the_models_own():
  """Both sides of both test models read as written: nothing refused, every value right."""
  found = {}
  for name, module in (("bn", bn), ("drop", drop)):
    port, batches = module.port(), module.batches(2)
    original = layer_mismatches.mismatches
    seen = []
    layer_mismatches.mismatches = lambda a, b, p: seen.append((a, b)) or original(a, b, p)
    try:
      report = porting.compare(port, batches, replicas=2, steps=1)
    finally:
      layer_mismatches.mismatches = original
    assert report.rows
    found[name] = seen[0]
  tf1, tf2 = found["bn"]
  assert [(b.epsilon, b.training) for b in tf1.batch_norm] == [(pytest.approx(1e-3), True)]
  assert [(b.epsilon, b.training) for b in tf2.batch_norm] == [(pytest.approx(1e-3), True)]
  assert tf1.moving == {"bn1/moving_mean": pytest.approx(0.9),
                        "bn1/moving_variance": pytest.approx(0.9)}
  assert tf2.moving == {"net/bn1/moving_mean": pytest.approx(0.9),
                        "net/bn1/moving_variance": pytest.approx(0.9)}
  assert sorted(tf1.regularization) == ["conv1/kernel", "logits/kernel"]
  np.testing.assert_allclose(tf1.regularization["conv1/kernel"],
                             tf2.regularization["net/conv1/kernel"], rtol=1e-6)
  tf1, tf2 = found["drop"]
  assert [r for _, r in tf1.dropout] == [pytest.approx(0.4)]
  assert [r for _, r in tf2.dropout] == [pytest.approx(0.4)]
  assert tf1.regularization is None and tf2.regularization is None


def test_a_dropout_the_step_never_runs_is_no_setting():
  """A dropout op the train op does not reach (tf.keras 1.15's Sequential built with an
  input_shape makes a copy of the model beside the one the loss uses) was counted: 'the
  layers' settings differ: dropout: TF1 2 (drop1 0.4, ...), TF2 1', a refusal the team could
  not act on. Only what the step runs is read."""
  def tower_loss(images, labels):
    loss, logits = drop.tower_loss(images, labels)
    tf.compat.v1.nn.dropout(logits, rate=0.5, name="dropout_unused")  # reaches nothing
    return loss, logits

  report = porting.compare(drop.port(tower_loss=tower_loss), drop.batches(1), replicas=1,
                           steps=2)
  assert report.equal, report.text()


def test_a_train_op_without_the_update_ops_is_said_to_update_nothing():
  """An Estimator model_fn that leaves out the UPDATE_OPS control dependency never moves its
  moving statistics: update_ops="none" says so (no other value could, and the kit then ran
  the towers' updates the team's run never did)."""
  with pytest.raises(porting.PortError) as raised:
    porting.compare(bn.port(update_ops="none"), bn.batches(2), replicas=2, steps=1)
  assert str(raised.value) == (
      "the layers' settings differ: batch norm bn1: TF2 updates its moving statistics each "
      "step (momentum 0.9), TF1 does not; set them alike on both sides before comparing")


def _layer_norm_tower(images, labels):
  """A dense layer, tf_slim's layer_norm over the features (BERT's, epsilon 1e-12), logits."""
  slim = porting.tf1_layers.slim()
  x = tf.reshape(images, [images.shape[0], -1])
  x = slim.fully_connected(x, 8, activation_fn=tf.nn.tanh, scope="hidden")
  x = slim.layer_norm(x, begin_norm_axis=-1, begin_params_axis=-1, scope="norm")
  logits = slim.fully_connected(x, drop.CLASSES, activation_fn=None, scope="logits")
  return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=labels, logits=logits)), logits


class _HandNorm(keras.layers.Layer):
  """Layer norm as BERT's TF2 ports wrote it: moments over the features, then
  tf.nn.batch_normalization (the TF1 form, with its epsilon)."""

  def __init__(self, epsilon, **kwargs):
    super().__init__(**kwargs)
    self.epsilon = epsilon

  def build(self, input_shape):
    self.beta = self.add_weight(name="beta", shape=input_shape[-1:], initializer="zeros")
    self.gamma = self.add_weight(name="gamma", shape=input_shape[-1:], initializer="ones")

  def call(self, x):
    mean, variance = tf.nn.moments(x, [-1], keepdims=True)
    return tf.nn.batch_normalization(x, mean, variance, self.beta, self.gamma, self.epsilon)


class _PowNorm(_HandNorm):
  """Layer norm as TF1 Transformers wrote it by hand (Kyubyong's): (x - mean) / ((variance +
  epsilon) ** .5)."""

  def call(self, x):
    mean, variance = tf.nn.moments(x, [-1], keepdims=True)
    return (x - mean) / ((variance + self.epsilon) ** .5) * self.gamma + self.beta


def _layer_norm_port(norm):
  def build():
    return keras.Sequential([keras.Input((drop.SIZE, drop.SIZE, 3)), keras.layers.Flatten(),
                             keras.layers.Dense(8, activation="tanh", name="hidden"), norm,
                             keras.layers.Dense(drop.CLASSES, name="logits")])

  def replica_loss(model, images, labels, global_batch):
    del global_batch
    logits = model(images)
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits)), logits

  return porting.Port(tower_loss=_layer_norm_tower,
                      tf1_optimizer=lambda step: tf.compat.v1.train.GradientDescentOptimizer(
                          0.1), build_model=build, replica_loss=replica_loss,
                      tf2_optimizer=lambda: keras.optimizers.SGD(0.1),
                      gradient_reduction="mean")


@pytest.mark.filterwarnings("ignore:`layer.apply` is deprecated")  # tf_slim's own call
@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_a_layer_norm_is_no_batch_norm_and_its_epsilon_is_compared_where_both_are_read():
  """tf_slim's layer_norm normalizes with tf.nn.batch_normalization over the features: it was
  read as a batch norm, and a port with Keras's LayerNormalization was refused with 'batch
  norm layers: TF1 5 (bert/embeddings/LayerNorm, ...), TF2 0' (a tiny BERT). Now a layer norm
  is one, in either form (Keras 3's rsqrt(variance + epsilon) too, once "not compared"), and
  its epsilon is compared."""
  keras_norm = porting.compare(
      _layer_norm_port(keras.layers.LayerNormalization(epsilon=1e-12, name="norm")),
      drop.batches(1), replicas=1, steps=1)
  assert not [line for line in keras_norm.unread if "norm" in line] and keras_norm.rows
  for norm in (_HandNorm(1e-3, name="norm"), keras.layers.LayerNormalization(name="norm"),
               _PowNorm(1e-3, name="norm")):
    with pytest.raises(porting.PortError) as raised:
      porting.compare(_layer_norm_port(norm), drop.batches(1), replicas=1, steps=1)
    assert str(raised.value).startswith(
        "the layers' settings differ: layer norm norm: epsilon TF1 1e-12, TF2 0.001; set them "
        "alike on both sides before comparing")
  same = porting.compare(_layer_norm_port(_HandNorm(1e-12, name="norm")), drop.batches(1),
                         replicas=1, steps=1)
  assert not [line for line in same.unread if "layer norm" in line]


def _group_norm_tower(images, labels):
  """A convolution, tf_slim's group_norm (2 groups, epsilon 1e-6: a U-Net's), logits."""
  slim = porting.tf1_layers.slim()
  x = slim.conv2d(images, 4, 3, activation_fn=None, scope="conv")
  x = tf.nn.relu(slim.group_norm(x, groups=2, epsilon=1e-6, scope="gn"))
  logits = slim.fully_connected(tf.reduce_mean(x, [1, 2]), drop.CLASSES, activation_fn=None,
                                scope="logits")
  return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=labels, logits=logits)), logits


@pytest.mark.filterwarnings("ignore:`layer.apply` is deprecated")  # tf_slim's own call
def test_a_group_norms_epsilon_is_compared():
  """tf_slim's group_norm against Keras's GroupNormalization (epsilon 1e-3 by default): no
  line said anything, the steps differed 'not explained' (and against a TF 1.15 record of
  tf.contrib's, recorded without it)."""
  def build():
    return keras.Sequential([
        keras.Input((drop.SIZE, drop.SIZE, 3)), keras.layers.Conv2D(4, 3, padding="same",
                                                                    name="conv"),
        keras.layers.GroupNormalization(2, name="gn"), keras.layers.ReLU(),
        keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(drop.CLASSES, name="logits")],
        name="net")  # named: "sequential" is numbered by what the process built before

  def replica_loss(model, images, labels, global_batch):
    del global_batch
    logits = model(images)
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits)), logits

  port = porting.Port(tower_loss=_group_norm_tower,
                      tf1_optimizer=lambda step: tf.compat.v1.train.GradientDescentOptimizer(
                          0.1), build_model=build, replica_loss=replica_loss,
                      tf2_optimizer=lambda: keras.optimizers.SGD(0.1),
                      gradient_reduction="mean",
                      variable_map={"conv/weights": "net/conv/kernel",
                                    "conv/biases": "net/conv/bias"})
  with pytest.raises(porting.PortError) as raised:
    porting.compare(port, drop.batches(1), replicas=1, steps=1)
  assert str(raised.value).startswith(
      "the layers' settings differ: group norm gn: epsilon TF1 1e-06, TF2 0.001"), raised.value


def _smoothing_of(loss_fn):
  """layer_settings' reading of the label smoothing of `loss_fn(logits, int labels)`, traced
  as a TF2 step traces it."""
  graph = tf.function(loss_fn).get_concrete_function(
      tf.TensorSpec([4, 5], tf.float32), tf.TensorSpec([4], tf.int32)).graph
  return layer_settings.read(graph.get_operations(), lambda t: None, set()).label_smoothing


def test_label_smoothing_is_read_in_each_form_teams_wrote():
  hot = lambda y: tf.one_hot(y, 5)
  # tf.compat.v1.losses (slim's, Inception's): 1 - e held as a float32 constant.
  tf1_losses = _smoothing_of(lambda x, y: tf.compat.v1.losses.softmax_cross_entropy(
      hot(y), x, label_smoothing=0.2))
  assert tf1_losses == [pytest.approx(0.2, abs=1e-7)]
  assert _smoothing_of(lambda x, y: keras.losses.categorical_crossentropy(
      hot(y), x, from_logits=True, label_smoothing=0.3)) == [pytest.approx(0.3, abs=1e-7)]
  by_hand = lambda x, y: tf.nn.softmax_cross_entropy_with_logits(
      labels=tf.stop_gradient(hot(y) * 0.9 + 0.1 / 5), logits=x)
  assert _smoothing_of(by_hand) == [pytest.approx(0.1, abs=1e-7)]
  assert _smoothing_of(lambda x, y: tf.nn.softmax_cross_entropy_with_logits(
      labels=hot(y), logits=x)) == [0.0]
  assert _smoothing_of(lambda x, y: tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=y, logits=x)) == [0.0]
  # Labels of a form not read: None, never compared.
  assert _smoothing_of(lambda x, y: tf.nn.softmax_cross_entropy_with_logits(
      labels=tf.nn.softmax(hot(y) * 3.0), logits=x)) == [None]


def test_label_smoothing_the_kit_could_not_read_is_said_not_compared():
  read = lambda smoothing: layer_settings.Settings([], [], {}, label_smoothing=smoothing)
  # Never "differs": two counts apart (a record from before the kit read them) or a form
  # not recognised on one side is not compared, and the report says so.
  assert layer_mismatches.mismatches(read([]), read([0.1]), []) == []
  (line,) = layer_mismatches.unread(read([]), read([0.1]), [])
  assert line == ("label smoothing: TF1 0 softmax cross-entropies read, TF2 1; not compared, "
                  "the steps' numbers are")
  assert layer_mismatches.mismatches(read([None]), read([0.1]), []) == []
  (line,) = layer_mismatches.unread(read([None]), read([0.1]), [])
  assert "not recognise; not compared there" in line
  assert layer_mismatches.unread(read([0.1]), read([0.1]), []) == []
