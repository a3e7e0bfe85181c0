"""Random ops in the porting kit: a tf.layers model with dropout (tests/dropout_adam_port.py)
against its Keras 3 port, tower i and replica i drawing the same numbers step by step, and
the causes named where randomness is not shared. Before: every row DIFFERS from step 0's
loss, no cause named."""

import os
import re
import shlex

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.ops import random_ops as tf_random_ops

import porting
from porting import random_ops
from porting import tf1_layers
from tests import dropout_adam_port as m
from tests import helpers

v1 = tf.compat.v1
pytestmark = pytest.mark.filterwarnings("ignore:`tf.layers.")


def _graph_draws(step, towers=2):
  """What TF1 code's draws give in a graph at `step`: per tower, tf.random.uniform and
  tf.compat.v1.nn.dropout's mask (the stateful ops TF1 code calls), through the kit."""
  with tf.Graph().as_default():
    number = v1.placeholder_with_default(tf.constant(0, tf.int64), [])
    source = random_ops.Source(number)
    out = []
    for tower in range(towers):
      source.tower = tower
      with random_ops.aligned(source):
        out.append([tf.random.uniform([5]), v1.nn.dropout(tf.ones([6]), keep_prob=0.5)])
    with v1.Session() as sess:
      return sess.run(out, {number: step})


def test_a_draw_is_keyed_by_its_step_tower_and_number_on_both_sides():
  graph = _graph_draws(step=1)
  eager = random_ops.Source(tf.constant(1, tf.int64))
  eager.tower = 1
  with random_ops.aligned(eager):  # TF2 code's stateless draws: Keras's dropout path
    uniform = tf.random.stateless_uniform([5], seed=[3, 4])
    mask = tf.nn.experimental.stateless_dropout(tf.ones([6]), rate=0.5, seed=[5, 6])
  np.testing.assert_array_equal(uniform, graph[1][0])
  np.testing.assert_array_equal(mask, graph[1][1])
  # Other towers, steps and draw numbers draw other numbers.
  assert not np.array_equal(graph[0][0], graph[1][0])
  assert not np.array_equal(_graph_draws(step=2)[1][0], graph[1][0])
  assert not np.array_equal(graph[1][0][:5], graph[1][1][:5])
  # Outside the kit TensorFlow's own functions are back.
  assert tf.random.uniform is tf_random_ops.random_uniform
  assert id(tf_random_ops.random_uniform) in random_ops._REPLACEMENTS  # pylint: disable=protected-access


def test_a_variable_initializer_draws_as_written():
  with tf.Graph().as_default():
    source = random_ops.Source(tf.constant(0, tf.int64))
    source.tower = 0
    with random_ops.aligned(source):
      v1.get_variable("w", [3], initializer=v1.random_uniform_initializer(seed=1))
      tf.random.uniform([2])
  assert source.drawn == {0: [("uniform", (2,))]}  # the initializer's draw is not counted



def _unseeded_tower(images, labels):
  # The tutorial's way: truncated_normal_initializer(stddev=...), no seed anywhere.
  w = v1.get_variable("w", [4, 3], initializer=v1.truncated_normal_initializer(stddev=0.5))
  return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=labels, logits=tf.matmul(tf.reshape(images, [-1, 4]), w)))


def _no_tf2_side(*args):
  raise AssertionError(f"the TF1 side alone is built here, got {args}")


def test_an_unseeded_initializer_starts_every_run_from_the_same_weights():
  # Each run drew other weights before the kit's graph had a seed of its own: its numbers
  # (and, at a near-tie, its verdict) changed from run to run, and two records of the same
  # port differed.
  from porting import tf1_towers  # pylint: disable=g-import-not-at-top
  example = (np.ones((2, 2, 2), np.float32), np.zeros(2, np.int32))
  firsts = []
  for _ in range(2):
    towers = tf1_towers.Towers(
        porting.Port(tower_loss=_unseeded_tower,
                     tf1_optimizer=lambda step: v1.train.GradientDescentOptimizer(0.1),
                     build_model=_no_tf2_side, replica_loss=_no_tf2_side,
                     tf2_optimizer=_no_tf2_side),
        ["/cpu:0"], example, None)
    firsts.append(towers.sess.run(towers.model_variables[0]))
    towers.sess.close()
  np.testing.assert_array_equal(firsts[0], firsts[1])
  assert firsts[0].std() > 0.1  # drawn, not a constant

@pytest.mark.parametrize("replicas", [1, 2])
@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_a_dropout_adam_port_is_bit_identical_step_by_step(replicas):
  report = porting.compare(m.port(), m.batches(replicas, steps=4), replicas=replicas, steps=4)
  assert report.equal, report.text()
  # Dropout was active: some of each tower's units were dropped, differently per tower.
  # (The towers' batch is static, as TF1 code read it: the draw's shape is known.)
  assert report.tf1.facts["random_draws"] == {i: [("uniform", (4, m.HIDDEN))]
                                              for i in range(replicas)}
  assert report.tf2.facts["random_draws"] == {i: [("uniform", (4, m.HIDDEN))]
                                             for i in range(replicas)}
  assert report.tf1.facts["random_escaped"] == report.tf2.facts["random_escaped"] == []


@pytest.mark.slow
def test_randomness_not_shared_is_named():
  report = porting.compare(m.port(random_ops="as_written"), m.batches(2), replicas=2, steps=1)
  assert not report.equal
  assert report.first_difference.kind == "loss" and report.first_difference.step == 0
  assert report.hints[0].startswith("random ops drawn as written (random_ops='as_written')")
  assert "tower_0/drop1/dropout/random_uniform/RandomUniform" in report.hints[0]
  # A port that draws once more (noise on its logits, which no layer setting shows: a
  # dropout on one side only is refused before a step, test_porting_layer_settings): the
  # draws are listed.
  report = porting.compare(m.port(replica_loss=_noisy_replica_loss), m.batches(2),
                           replicas=2, steps=1)
  assert report.hints == [
      "the two sides draw differently: TF1 tower 0 draws 1 time(s) (uniform), TF2 replica 0 "
      "2 time(s) (uniform, normal) (a dropout on one side only, a rate of 0 on one, or layers "
      "in another order): a forward output differs from step 0"]


def _noisy_replica_loss(model, images, labels, global_batch_size):
  loss, logits = m.replica_loss(model, images, labels, global_batch_size)
  return loss + tf.reduce_sum(tf.random.normal([1], stddev=1e-3)), logits


def _layers_as_written(images, labels):
  """TF1 code as written: tf.compat.v1.layers, with no import of the kit."""
  logits = v1.layers.dense(v1.layers.flatten(images), m.CLASSES, name="logits",
                           kernel_initializer=v1.glorot_uniform_initializer(seed=1))
  return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=labels, logits=logits))


def _layers_port(**changes):
  import keras  # pylint: disable=g-import-not-at-top

  def build():
    model = keras.Sequential([keras.layers.Flatten(), keras.layers.Dense(m.CLASSES,
                                                                          name="logits")])
    model.build((None, m.SIZE, m.SIZE, 3))
    return model

  def loss(model, images, labels, global_batch):
    del global_batch
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=model(images)))
  return porting.Port(tower_loss=_layers_as_written, tf1_optimizer=lambda s: v1.train.
                      GradientDescentOptimizer(0.1), build_model=build, replica_loss=loss,
                      tf2_optimizer=lambda: keras.optimizers.SGD(0.1),
                      gradient_reduction="mean", **changes)


def test_tf_compat_v1_layers_run_as_written_and_keras_3_stays():
  report = porting.compare(_layers_port(), m.batches(2), replicas=2, steps=2)
  assert report.equal, report.text()
  assert tf1_layers.keras_3()  # TensorFlow's own stub is back after the build


def test_without_tf_keras_the_layers_are_one_line_naming_the_package(monkeypatch):
  monkeypatch.setattr(tf1_layers, "TF_KERAS_LAYERS", "tf_keras_is_not_installed")
  with pytest.raises(porting.PortError) as error:
    porting.compare(_layers_port(), m.batches(2), replicas=2, steps=1)
  version = ".".join(tf.__version__.split(".")[:2])
  assert str(error.value).startswith(
      "the TF1 code calls tf.compat.v1.layers.dense, which TensorFlow "
      f"{tf.__version__} with Keras 3 implements only in the tf_keras package: pip install "
      f"'tf_keras~={version}.0'")
  assert "\n" not in str(error.value)


@pytest.mark.slow
def test_migrations_dropout_adam_section_shows_the_real_code_and_command(capsys):
  with open(os.path.join(helpers.REPO, "MIGRATION.md"), encoding="utf-8") as f:
    section = f.read().split("## Dropout, Adam and `tf.layers`")[1].split("\n## ")[0]
  with open(os.path.join(helpers.REPO, "tests", "dropout_adam_port.py"),
            encoding="utf-8") as f:
    assert re.findall(r"```python\n(.*?)```", section, re.DOTALL)[0] in f.read()
  command = re.findall(r"```sh\n(.*?)```", section, re.DOTALL)[0].strip()
  result = helpers.call("porting.__main__", *shlex.split(command)[3:])
  out = capsys.readouterr().out
  assert result.returncode == 0, result.stderr
  rows = [line for line in out.splitlines() if line.endswith(("  ok", "DIFFERS"))]
  # 2 losses, 2 outputs, 6 gradients, 6 weights, 12 slots, all the same bits; the rates.
  assert len(rows) == 28 and all(line.endswith("0         0      0      -  ok")
                                 for line in rows), out
  assert "  learning rate per step, the same on both sides: " in out
  assert out.rstrip().endswith("EQUAL")


def test_the_kits_own_draws_are_never_named_as_escaped_whatever_tensorflow_renamed_them():
  from porting import random_ops  # pylint: disable=g-import-not-at-top
  graph = tf.Graph()
  with graph.as_default():
    with tf.name_scope("tower_0"):
      for _ in range(3):  # porting_draw, porting_draw_1, porting_draw_2
        with tf.name_scope(random_ops.SCOPE):
          tf.random.uniform([2])
      with tf.name_scope("porting_draw_x"):  # not the kit's: a team's scope of that stem
        tf.random.uniform([2], name="theirs")
  names = [op.name for op in graph.get_operations() if op.type == "RandomUniform"]
  assert "tower_0/porting_draw_1/random_uniform/RandomUniform" in names
  assert random_ops.escaped(graph.get_operations()) == [
      "tower_0/porting_draw_x/theirs/RandomUniform"]


def _drawn_initializer_tower(images, labels):
  """get_variable with a drawn tensor as its initializer (not an initializer object), then
  dropout: the draw made for the initial value is not one of the step's."""
  v1 = tf.compat.v1
  x = tf.reshape(images, [images.shape[0], -1])
  weights = v1.get_variable("logits/kernel", initializer=tf.random.truncated_normal(
      [x.shape[1], 3], stddev=0.1, seed=3))
  logits = tf.matmul(tf.nn.dropout(x, rate=0.5), weights)
  return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=labels, logits=logits)), logits


def _dropout_dense_model():
  model = keras.Sequential([keras.layers.Flatten(), keras.layers.Dropout(0.5),
                            keras.layers.Dense(3, use_bias=False, name="logits")])
  model(tf.zeros((1, 2, 2, 3)))
  return model


def _dropout_dense_loss(model, images, labels, global_batch_size):
  del global_batch_size
  logits = model(images, training=True)
  return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=labels, logits=logits)), logits


def test_a_drawn_get_variable_initializer_does_not_shift_the_steps_draws():
  port = porting.Port(tower_loss=_drawn_initializer_tower,
                      tf1_optimizer=lambda step: tf.compat.v1.train.GradientDescentOptimizer(0.1),
                      build_model=_dropout_dense_model, replica_loss=_dropout_dense_loss,
                      tf2_optimizer=lambda: keras.optimizers.SGD(0.1),
                      gradient_reduction="mean")
  rng = np.random.default_rng(0)
  batches = [(rng.normal(size=(4, 2, 2, 3)).astype(np.float32),
              rng.integers(0, 3, size=4).astype(np.int32)) for _ in range(2)]
  report = porting.compare(port, batches, replicas=2, steps=2)
  # Before: tower i counted the initializer's draw, so its dropout drew replica i's next one.
  assert report.equal, report.text()
  assert report.tf1.facts["random_draws"] == report.tf2.facts["random_draws"]


def test_a_draw_the_step_never_runs_keeps_no_number():
  """A random op the step never runs (tf.keras 1.15's Sequential built with an input_shape
  makes a copy of the model, its dropout included, beside the loss's) took the first number,
  so the loss's dropout drew the port's second draw: 'the two sides draw differently: TF1
  tower 0 draws 2 time(s)'. Draws are numbered among those the step runs."""
  def tower_loss(images, labels):
    unused = tf.reshape(images, [images.shape[0], -1])
    tf.compat.v1.nn.dropout(unused, rate=0.5, name="dropout_copy")  # built first, never run
    return m.tower_loss(images, labels)

  report = porting.compare(m.port(tower_loss=tower_loss), m.batches(2), replicas=2,
                           steps=2)
  assert report.equal, report.text()
  assert report.tf1.facts["random_draws"] == report.tf2.facts["random_draws"]


def test_a_draw_whose_shape_holds_a_tensor_is_aligned_on_both_sides():
  """A VAE's noise: tf.random_normal([tf.shape(mu)[0], 2]) in the tower, tf.random.normal(
  (tf.shape(x)[0], 2)) in the port. The kit failed (int() of a symbolic tensor, 'the kit
  failed: TypeError at porting/random_ops.py')."""
  def tower_loss(images, labels):
    mu = tf.matmul(images, v1.get_variable("mu/kernel", [4, 2]))
    z = mu + v1.random_normal([tf.shape(mu)[0], 2])
    return tf.reduce_mean(tf.square(z - labels)), z

  class Net(keras.Model):
    def __init__(self):
      super().__init__(name="net")
      self.mu = keras.layers.Dense(2, use_bias=False, name="mu")
      self(tf.zeros((1, 4)))

    def call(self, x):
      mu = self.mu(x)
      return mu + tf.random.normal((tf.shape(x)[0], 2))

  def replica_loss(model, images, labels, global_batch_size):
    del global_batch_size
    z = model(images)
    return tf.reduce_mean(tf.square(z - labels)), z

  port = porting.Port(
      tower_loss=tower_loss,
      tf1_optimizer=lambda step: v1.train.GradientDescentOptimizer(0.1), build_model=Net,
      replica_loss=replica_loss, tf2_optimizer=lambda: keras.optimizers.SGD(0.1),
      gradient_reduction="mean")
  rng = np.random.default_rng(0)
  batches = [(rng.normal(size=(4, 4)).astype(np.float32),
              rng.normal(size=(4, 2)).astype(np.float32)) for _ in range(2)]
  report = porting.compare(port, batches, replicas=2, steps=2)
  assert report.equal, report.text()
  assert report.tf1.facts["random_draws"] == {0: [("normal", None)], 1: [("normal", None)]}
