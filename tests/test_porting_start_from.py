"""A comparison that starts from the team's TF1 checkpoint (weights, slots, global step), so
that a learning-rate boundary 30,000 steps into a real schedule is checked where it is,
without shrinking the schedule. Before: every comparison started at step 0 from the TF2
model's initial weights."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import porting
from porting.optimizers import TF1Momentum
from tests import bn_momentum_port as m
from tests import helpers

v1 = tf.compat.v1
pytestmark = pytest.mark.filterwarnings("ignore:`tf.layers.")
BOUNDARY = 30000  # the rate drops from 0.1 to 0.01 after this step
RATES = [0.1, 0.01]


def _tf1_optimizer(global_step):
  return v1.train.MomentumOptimizer(
      v1.train.piecewise_constant(global_step, [BOUNDARY], RATES), m.MOMENTUM)


def _tf2_optimizer(boundary=BOUNDARY):
  return TF1Momentum(keras.optimizers.schedules.PiecewiseConstantDecay([boundary], RATES),
                     m.MOMENTUM)


def _port(boundary=BOUNDARY):
  return m.port(tf1_optimizer=_tf1_optimizer,
                tf2_optimizer=lambda: _tf2_optimizer(boundary))


def _team_run(prefix, batches, at_step):
  """The team's own TF1 script: 2 steps, then (standing in for 29,997 more) its global step
  set to `at_step`, a Saver checkpoint; then it goes on from there for the comparison's 3
  steps. Returns the losses of those 3 steps, each computed before its update."""
  with tf.Graph().as_default() as graph:
    images = v1.placeholder(tf.float32, [len(batches[0][0]), m.SIZE, m.SIZE, 3])
    labels = v1.placeholder(tf.int32, [len(batches[0][0])])
    global_step = v1.train.get_or_create_global_step()
    loss, _ = m.tower_loss(images, labels)
    with tf.control_dependencies(v1.get_collection(v1.GraphKeys.UPDATE_OPS)):
      train_op = _tf1_optimizer(global_step).minimize(loss, global_step=global_step)
    with v1.Session(graph=graph) as sess:
      sess.run(v1.global_variables_initializer())
      for x, y in batches[:2]:
        sess.run(train_op, {images: x, labels: y})
      global_step.load(at_step, sess)
      v1.train.Saver().save(sess, prefix, write_meta_graph=False)
      return [sess.run([loss, train_op], {images: x, labels: y})[0] for x, y in batches[2:]]


def test_a_comparison_from_the_teams_checkpoint_starts_where_its_run_was(tmp_path):
  batches = m.batches(1, steps=5, seed=3)
  prefix = os.path.join(str(tmp_path), "model.ckpt-29999")
  losses = _team_run(prefix, batches, BOUNDARY - 1)
  report = porting.compare(_port(), batches[2:], replicas=1, steps=3, start_from=prefix)
  # The kit's TF1 side goes on as the team's run did: its weights, momentum slots and step.
  assert [s.losses[0] for s in report.tf1.steps] == losses
  # The rate drops where the schedule drops it: after global step 30,000 (the third step).
  np.testing.assert_array_equal(report.learning_rates[0], np.float32([0.1, 0.1, 0.01]))
  assert report.learning_rates[0] == report.learning_rates[1]
  # The port, started from the same checkpoint, is the same bits but for the moving
  # statistics' rounding (a named cause of this model's faithful port).
  exact = [r for r in report.rows if "moving_" not in r.tf1]
  assert all(r.diff.ulps == 0 for r in exact), report.text()
  assert f"from {prefix} (global step 29999)" in report.text().splitlines()[0]


@pytest.mark.slow  # the fast tier keeps the faithful port's bits
def test_a_boundary_off_by_one_step_is_named_where_it_is(tmp_path):
  batches = m.batches(2, steps=5, seed=3)
  prefix = os.path.join(str(tmp_path), "model.ckpt-29999")
  _team_run(prefix, batches, BOUNDARY - 1)
  report = porting.compare(_port(BOUNDARY + 1), batches[2:], replicas=2, steps=3,
                           start_from=prefix)
  assert not report.equal
  assert any(h.startswith("the learning rate differs from step 2 (TF1 0.01, TF2 0.1)")
             for h in report.hints), report.hints


@pytest.mark.slow  # the fast tier keeps the faithful port's bits
def test_the_command_line_starts_from_a_checkpoint_and_refuses_a_foreign_one(tmp_path,
                                                                            capsys):
  prefix = os.path.join(str(tmp_path), "model.ckpt-29999")
  _team_run(prefix, m.batches(2, steps=5, seed=3), BOUNDARY - 1)
  port = ("--port=tests.test_porting_start_from:_port",
          "--batches=tests.bn_momentum_port:batches")
  result = helpers.call("porting.__main__", *port, "--replicas=2", "--steps=3",
                        f"--start_from={prefix}", "compare")
  printed = capsys.readouterr().out
  assert result.returncode == 1, result.stderr  # the moving statistics' rounding only
  # The title, wrapped at 100 columns before the long path (porting.screen).
  title = printed.split("\nNOT EQUAL")[0]
  assert f"from {prefix} (global step 29999)" in " ".join(title.split())
  foreign = os.path.join(str(tmp_path), "other.ckpt")
  with tf.Graph().as_default():
    w = v1.get_variable("w", [2])
    with v1.Session() as sess:
      sess.run(w.initializer)
      v1.train.Saver([w]).save(sess, foreign, write_meta_graph=False)
  result = helpers.call("porting.__main__", *port, f"--start_from={foreign}", "compare")
  helpers.check_one_line(result, f"error: the TF1 checkpoint {foreign} lacks conv1/kernel")


def test_an_adam_run_without_a_global_step_starts_both_sides_at_its_beta_powers(tmp_path):
  from porting import checkpoints  # pylint: disable=g-import-not-at-top
  from porting.optimizers import TF1Adam  # pylint: disable=g-import-not-at-top
  from tests import test_porting_adam_checkpoints as adam  # pylint: disable=g-import-not-at-top
  data = m.batches(1, steps=4)
  prefix = str(tmp_path / "model.ckpt")
  adam._tf1_run(data, save=prefix)  # pylint: disable=protected-access  # 3 steps, no global step
  port = m.port(tf1_optimizer=lambda step: adam._adam(),  # pylint: disable=protected-access
                tf2_optimizer=lambda: TF1Adam(0.01, epsilon=1e-7))
  sides = checkpoints.Sides(port, data[0])  # pylint: disable=protected-access
  try:
    step = checkpoints.load_tf1(prefix, sides.towers, sides.tf2, sides.pairs, sides.slots)
    saved = tf.train.load_checkpoint(prefix)
    tf1 = sides.towers.values()
    kept = sides.tf2.optimizer.tf1_non_slots()
    assert step == 3 and tf1["global_step"] == 3
    for name in ("beta1_power", "beta2_power"):  # Adam's bias correction goes on, both sides
      assert tf1[name] == saved.get_tensor(name) == kept[name].numpy(), name
    assert int(sides.tf2.optimizer.iterations.numpy()) == 3
  finally:
    sides.close()


def test_without_a_checkpoint_the_same_port_starts_from_the_same_weights_each_run():
  # Both sides start from the TF2 model's initial weights, which Keras 3 draws from seeds it
  # takes from Python's `random`: the kit seeds it while build_model runs. Before, the same
  # port, batches and flags started from other weights in each run (and in each call of one
  # process), and a loss 1 ULP apart at tower 0 in one run was at tower 1 in the next.
  from tests import assign_moving_average_port as small  # pylint: disable=g-import-not-at-top
  runs = [porting.compare(small.port(), small.batches(2), replicas=2, steps=1)
          for _ in range(2)]
  for side in ("tf1", "tf2"):
    first, second = (getattr(r, side).steps[0] for r in runs)
    assert [np.float32(x).tobytes() for x in first.losses] == [
        np.float32(x).tobytes() for x in second.losses]
  assert [(r.kind, r.tf1, r.step, r.diff.max_abs) for r in runs[0].rows] == [
      (r.kind, r.tf1, r.step, r.diff.max_abs) for r in runs[1].rows]


def test_the_seed_the_kit_gives_keras_leaves_pythons_random_as_it_was():
  import random  # pylint: disable=g-import-not-at-top
  from tests import assign_moving_average_port as small  # pylint: disable=g-import-not-at-top
  random.seed(12345)
  expected = random.Random(12345).random()
  porting.compare(small.port(), small.batches(1), replicas=1, steps=1)
  assert random.random() == expected
