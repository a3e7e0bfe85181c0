"""TF1 code as teams wrote it, in the kit: tf_slim layers (contrib's successor), weights made
with `tf.Variable`, a reshape to the static batch size, an L2 penalty added by hand, a
learning rate counted in examples (tests/slim_style_port.py). Before: tf.Variable weights
were made again by every tower (N models trained), `images.get_shape()[0]` was None, a
penalty missing from the port was "not explained", and tf_slim did not import."""

import functools
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import porting
from porting import tf1_layers
from tests import slim_style_port as m

v1 = tf.compat.v1
pytestmark = pytest.mark.filterwarnings("ignore:`tf.layers.", "ignore:`layer.apply`")
MOVING = ("moving_mean", "moving_variance")
ROUNDING_CAUSE = "moving statistics differ by rounding"


@pytest.mark.parametrize("replicas", [pytest.param(1, marks=pytest.mark.slow), 2])
def test_the_slim_style_port_is_the_same_bits_but_for_the_moving_statistics(replicas):
  report = porting.compare(m.port(replicas), m.batches(replicas), replicas=replicas, steps=4)
  # One tf.Variable each, shared by the towers (before: one per tower, trained apart).
  # Named as the script's own single tower names it (its Saver's checkpoint): no tower scope.
  assert [a for a, _ in report.pairs].count("logits/weights") == 1
  assert not [a for a, _ in report.pairs if a.startswith(("tower_0/", "tower_1/"))]
  exact = [r for r in report.rows if not r.tf1.endswith(MOVING)]
  assert len(exact) > 40 and all(r.diff.ulps == 0 for r in exact), report.text()
  # Dropout after a drawn tf.Variable initial value: the drop masks are tower i's = replica
  # i's (the outputs rows above), and the moving statistics differ by Keras's formula only.
  moving = [r for r in report.rows if r.tf1.endswith(MOVING)]
  assert moving and max(r.diff.max_rel for r in moving) < 1e-6
  assert report.hints == [h for h in report.hints if h.startswith(ROUNDING_CAUSE)]
  # The rate counted in examples: at 2 x 4 examples a step, halved every 16 examples.
  assert report.learning_rates[0] == report.learning_rates[1]
  expected = [0.05, 0.05, 0.025, 0.025] if replicas == 2 else [0.05] * 4
  np.testing.assert_array_equal(report.learning_rates[1], np.float32(expected))


# name: (Port fields changed, the cause the report must name)
WRONG = {
    "schedule_in_steps": (
        dict(tf2_optimizer=functools.partial(m.tf2_optimizer, 8, m.DECAY_EXAMPLES)),
        "the learning rate differs from step 2 (TF1 0.025, TF2 0.05)"),
    "penalty_missing": (
        dict(replica_loss=functools.partial(m.replica_loss, penalty=False)),
        "an L2 penalty is in the TF1 loss only, or stronger there: the gradients of conv1/weights, "
        "res_a/weights, "
        "res_b/weights, logits/weights differ by 0.004 x their weights"),
    "penalty_only_in_the_port": (
        dict(tower_loss=functools.partial(m.tower_loss, penalty=False)),
        "an L2 penalty is in the TF2 loss only"),
}


@pytest.mark.slow  # the fast tier keeps the faithful port's bits
@pytest.mark.parametrize("kind", list(WRONG))
def test_the_report_names_the_cause_of_each_wrong_slim_port(kind):
  changes, cause = WRONG[kind]
  report = porting.compare(m.port(2, **changes), m.batches(2), replicas=2, steps=3)
  assert not report.equal
  named = [h for h in report.hints if cause in h]
  assert named, report.hints
  others = [h for h in report.hints if h not in named and not h.startswith(ROUNDING_CAUSE)]
  assert not others, others


def _towers_of(tower_loss, batch=8):
  """The kit's TF1 side of `tower_loss` on two CPU devices."""
  from porting import devices, tf1_towers  # pylint: disable=g-import-not-at-top
  example = (np.zeros((batch, m.SIZE, m.SIZE, 3), np.float32), np.zeros([batch], np.int32))
  port = m.port(2, tower_loss=tower_loss)
  chosen = devices.replica_devices(2)
  return tf1_towers.Towers(port, chosen, example, devices.session_config(chosen))


def test_a_tower_that_makes_other_tf_variables_than_tower_0_is_one_line():
  calls = []

  def tower_loss(images, labels):
    calls.append(1)
    extra = [tf.Variable(tf.ones([2]), name=f"extra{i}") for i in range(len(calls))]
    logits = tf.reduce_mean(images, [1, 2, 3])[:, None] * tf.reduce_sum(extra[0])
    return tf.reduce_mean(logits + tf.cast(labels, tf.float32)[:, None])

  with pytest.raises(porting.PortError) as raised:
    _towers_of(tower_loss)
  assert str(raised.value) == ("tower 1 makes more tf.Variables than tower 0 (1): tower_loss "
                               "must build the same weights each call")


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_the_towers_read_a_static_batch_and_refuse_a_batch_of_another_size():
  sizes = []

  def tower_loss(images, labels):
    sizes.append(images.get_shape().as_list()[0])
    return m.tower_loss(images, labels)

  port = m.port(2, tower_loss=tower_loss)
  batches = m.batches(2, steps=2)
  batches[1] = tuple(part[:4] for part in batches[1])
  with pytest.raises(porting.PortError) as raised:
    porting.compare(port, batches, replicas=2, steps=2)
  assert sizes == [4, 4]  # each tower's slice of 8, as TF1 code read it
  assert str(raised.value).startswith(
      "step 1's batch is [4, 8, 8, 3] and [4], step 0's [8, 8, 8, 3] and [8]: the TF1 towers "
      "are built for one global batch shape")


def test_tf_slim_missing_is_one_line_naming_the_package(monkeypatch):
  monkeypatch.setitem(sys.modules, "tf_slim", None)  # an import of it raises ImportError
  with pytest.raises(porting.PortError) as raised:
    tf1_layers.slim()
  assert str(raised.value) == ("the TF1 code uses tf.contrib.slim / tf.contrib.layers, which "
                               "TensorFlow 2 has as the tf_slim package: pip install tf-slim")


def test_tower_code_that_calls_tf_contrib_is_one_line_naming_its_successor():
  def tower_loss(images, labels):
    del labels
    weights = v1.get_variable("w", [3, m.CLASSES],
                              initializer=v1.contrib.layers.xavier_initializer())
    return tf.reduce_mean(tf.matmul(tf.reduce_mean(images, [1, 2]), weights))

  with pytest.raises(porting.PortError) as raised:
    _towers_of(tower_loss)
  assert str(raised.value).startswith(
      "the TF1 code calls tf.contrib, which TensorFlow 2 does not have: its slim and layers "
      "are the tf_slim package (slim = porting.tf1_layers.slim(); pip install tf-slim)")



@pytest.mark.parametrize("returned, what", [
    (None, "NoneType None"), (0.5, "float 0.5"), ("labels", "a int32 tensor")])
def test_a_tower_whose_loss_is_not_a_float_tensor_is_one_line(returned, what):
  def tower_loss(images, labels):
    v1.get_variable("w", [2])
    return labels if returned == "labels" else returned

  with pytest.raises(porting.PortError) as raised:
    _towers_of(tower_loss)
  assert str(raised.value) == (f"a loss function returned {what} as its loss; return the loss "
                               "as a floating-point tensor computed from the weights (or "
                               "(loss, outputs))")


def test_a_batch_norm_scaled_on_one_side_only_is_named_by_its_setting():
  port = m.port(2, build_model=functools.partial(m.Net, scale=True))
  with pytest.raises(porting.PortError) as raised:
    porting.compare(port, m.batches(2), replicas=2, steps=1)
  line = str(raised.value)
  assert line.startswith("variables left unmatched") and "net/conv1_bn/gamma [6]" in line
  assert line.endswith("(a batch norm with scale=True on the TF2 side only: tf.layers' and "
                       "Keras's BatchNormalization default to scale=True and center=True, "
                       "tf_slim's batch_norm to scale=False; set them alike)"), line


@pytest.mark.slow
def test_the_legacy_layers_deprecation_stays_off_the_kits_screen():
  """tf_slim's layers (TensorFlow's legacy tf.layers) warn that `layer.apply` is deprecated:
  two lines of UserWarning before every report of a tf_slim or tf.layers port."""
  from tests import forked  # pylint: disable=g-import-not-at-top
  from tests import helpers  # pylint: disable=g-import-not-at-top
  result = forked.run(
      [sys.executable, "-m", "porting", "--port=tests.slim_style_port:port",
       "--batches=tests.slim_style_port:batches", "--replicas=1", "--steps=1", "compare"],
      capture_output=True, text=True, timeout=240, env=helpers.env(), cwd=helpers.REPO)
  assert result.stdout.rstrip().endswith("EQUAL"), result.stdout[-2000:] + result.stderr
  assert "Warning" not in result.stderr and "warn(" not in result.stderr, result.stderr


def test_a_slim_batch_norm_updating_in_place_runs():
  """`updates_collections=None` (the moving statistics updated by the layer itself, common in
  contrib-era code) went through tf_slim's smart_cond, which tests `ops.Tensor`, a name
  TensorFlow 2.21 no longer has: AttributeError in the team's tower code."""
  slim = tf1_layers.slim()
  with tf.Graph().as_default():
    x = tf.constant(np.arange(8, dtype=np.float32).reshape(4, 2))
    y = slim.batch_norm(x, decay=0.9, is_training=True, updates_collections=None)
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      session.run(y)
      mean = [v for v in tf.compat.v1.global_variables() if "moving_mean" in v.name][0]
      np.testing.assert_allclose(session.run(mean), 0.1 * np.float32([3.0, 4.0]), rtol=1e-6)


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_statistics_updated_in_place_by_every_tower_are_named_as_such(monkeypatch):
  """slim.batch_norm(updates_collections=None): each tower's batch norm assigns the shared
  statistics as it runs, so the train op reaches every tower's update through the forward
  pass, not UPDATE_OPS. The cause said "runs the UPDATE_OPS of every tower's" and advised
  Port(update_ops=...), which cannot choose them."""
  slim = tf1_layers.slim()
  batch_norm = slim.batch_norm
  monkeypatch.setattr(slim, "batch_norm", functools.partial(batch_norm,
                                                            updates_collections=None))
  report = porting.compare(m.port(2), m.batches(2), replicas=2, steps=2)
  moving = [h for h in report.hints if h.startswith("batch-norm moving statistics")]
  assert len(moving) == 1, report.hints
  assert moving[0].startswith("batch-norm moving statistics: the TF1 train op updates them "
                              "in place, every tower's, with no order between them (outside "
                              "UPDATE_OPS, as a batch norm with updates_collections=None"), \
      moving[0]
  assert "the Port's update_ops cannot choose them" in moving[0]


def test_tf_keras_layers_inside_the_towers_compare_without_a_variable_map():
  """The TF1 official MNIST model_fn builds tf.keras layers in the graph; under TensorFlow
  2.16+ those are Keras 3's, whose Dropout keeps a SeedGenerator state variable. It was left
  unmatched ('TF1 tower_0/seed_generator_1/seed_generator_state [2]; TF2 none'), and a
  variable_map to None of its per-process name broke the replay of a 1.15 record."""
  def tower_loss(images, labels):
    model = tf.keras.Sequential([tf.keras.layers.Dense(4, activation=tf.nn.relu),
                                 tf.keras.layers.Dropout(0.5), tf.keras.layers.Dense(3)])
    logits = model(images, training=True)
    return tf.compat.v1.losses.sparse_softmax_cross_entropy(labels=labels,
                                                            logits=logits), logits

  def replica_loss(model, images, labels, global_batch):
    del global_batch
    logits = model(images, training=True)
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits)), logits

  port = porting.Port(
      tower_loss=tower_loss,
      tf1_optimizer=lambda step: tf.compat.v1.train.GradientDescentOptimizer(0.1),
      build_model=lambda: keras.Sequential([keras.Input((6,)), keras.layers.Dense(4, "relu"),
                                            keras.layers.Dropout(0.5), keras.layers.Dense(3)]),
      replica_loss=replica_loss, tf2_optimizer=lambda: keras.optimizers.SGD(0.1),
      gradient_reduction="mean")
  rng = np.random.default_rng(0)
  batches = [(rng.normal(size=(8, 6)).astype(np.float32),
              rng.integers(0, 3, 8).astype(np.int32)) for _ in range(2)]
  report = porting.compare(port, batches, replicas=2, steps=2)
  assert report.equal, report.text()
  assert len(report.pairs) == 4


def test_a_feature_columns_vocabulary_table_is_initialized_as_a_scaffold_does():
  """A wide & deep model_fn's vocabulary_list column reads a lookup table, which Estimator's
  Scaffold initializes; the kit's Session ran the variables' initializer only: 'Table not
  initialized', said as the port's error."""
  words = ["a", "b", "c", "d"]

  def tower_loss(images, labels):
    column = tf.compat.v1.feature_column.indicator_column(
        tf.compat.v1.feature_column.categorical_column_with_vocabulary_list("w", words))
    strings = tf.gather(tf.constant(words), tf.cast(images[:, 0], tf.int32))
    x = tf.compat.v1.feature_column.input_layer({"w": strings}, [column])
    logits = tf.compat.v1.layers.dense(x, 3, name="logits")
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits)), logits

  def replica_loss(model, images, labels, global_batch):
    del global_batch
    logits = model(tf.one_hot(tf.cast(images[:, 0], tf.int32), len(words)))
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits)), logits

  port = porting.Port(
      tower_loss=tower_loss,
      tf1_optimizer=lambda step: tf.compat.v1.train.GradientDescentOptimizer(0.1),
      build_model=lambda: keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)]),
      replica_loss=replica_loss, tf2_optimizer=lambda: keras.optimizers.SGD(0.1),
      gradient_reduction="mean")
  rng = np.random.default_rng(0)
  batches = [(rng.integers(0, 4, (4, 1)).astype(np.float32),
              rng.integers(0, 3, 4).astype(np.int32)) for _ in range(2)]
  report = porting.compare(port, batches, replicas=1, steps=2)
  assert report.equal, report.text()


def test_the_scripts_own_single_tower_checkpoint_converts(tmp_path):
  """The script trains one tower in one graph, no tower scope, and saves with its Saver:
  its tf.Variables are `logits/weights`. The kit named them `tower_0/logits/weights`, and
  tf1_to_tf2 and --start_from refused the script's checkpoint ('lacks tower_0/...')."""
  graph = tf.Graph()
  with graph.as_default():
    images, labels = m.batches(1)[0]
    x = v1.placeholder(tf.float32, images.shape)
    y = v1.placeholder(tf.int32, labels.shape)
    loss, _ = m.tower_loss(x, y)
    step = v1.train.get_or_create_global_step()
    train = m.tf1_optimizer(step, len(labels)).minimize(loss, global_step=step)
    with v1.Session() as sess:
      sess.run(v1.global_variables_initializer())
      sess.run(train, {x: images, y: labels})
      (variable,) = [v for v in v1.global_variables() if v.op.name == "logits/weights"]
      weights = sess.run(variable)
      saved = v1.train.Saver().save(sess, str(tmp_path / "script" / "model.ckpt"), step)
  written = porting.tf1_to_tf2(m.port(1), saved, str(tmp_path / "tf2" / "ckpt"),
                               m.batches(1)[0])
  reader = tf.train.load_checkpoint(written)
  key = [k for k in reader.get_variable_to_shape_map()
         if k.endswith(".ATTRIBUTES/VARIABLE_VALUE") and "logits" in k and "kernel" in k]
  assert len(key) == 1, reader.get_variable_to_shape_map()
  np.testing.assert_array_equal(reader.get_tensor(key[0]), weights)
