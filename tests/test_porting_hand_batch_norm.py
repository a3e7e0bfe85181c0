"""The kit on a sixth model nobody here wrote for it (tests/debiased_bn_port.py: tf.layers, a
batch norm written by hand with zero-debiased moving averages, a residual block, momentum on a
piecewise-constant rate, an EMA, a float32 global step): the faithful port is the same bits,
each one-fault port is named with its size and nothing else but what follows from it."""

import pytest

import porting
from tests import debiased_bn_port as m

# pytest resets warning filters per test; the model's own filter does not outlive it.
pytestmark = pytest.mark.filterwarnings("ignore:`tf.layers.")
FOLLOWS = "the moving averages follow the weights"


@pytest.mark.parametrize("replicas", [1, 2])
@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_the_faithful_port_is_the_same_bits(replicas):
  report = porting.compare(m.port(replicas), m.batches(replicas), replicas=replicas, steps=3)
  assert report.equal, report.text()
  assert report.learning_rates[0] == [0.10000000149011612, 0.10000000149011612,
                                      0.009999999776482582]


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_keras_sgd_is_named_where_the_rate_changes():
  report = porting.compare(m.keras_sgd_port(2), m.batches(2), replicas=2, steps=3)
  (line,) = [h for h in report.hints if h.startswith("momentum:")]
  # Before: named only while every row was within 1e-5, "not explained" once the rate moved.
  assert "the rate moves at step 2 (TF1 0.1 -> 0.01)" in line
  assert "porting.TF1Momentum" in line
  assert all(h.startswith(("momentum:", FOLLOWS)) for h in report.hints), report.hints


@pytest.mark.slow  # the fast tier holds the penalty causes in tests/test_porting_penalties.py
@pytest.mark.parametrize("make, cause", [
    (m.penalty_in_tf1_only_port, "the regularization is missing from the TF2 loss"),
    (m.penalty_in_tf2_only_port, "an L2 penalty is in the TF2 loss only"),
])
def test_a_penalty_on_one_side_is_named(make, cause):
  report = porting.compare(make(2), m.batches(2), replicas=2, steps=2)
  assert not report.equal
  assert [h for h in report.hints if h.startswith(cause)], report.hints
  assert all(h.startswith((cause, FOLLOWS)) for h in report.hints), report.hints


class _Moving:
  """The observations causes.batch_norm.update_rounding reads: step 0's rows that differ."""

  def __init__(self, rows):
    from porting import report as report_lib  # pylint: disable=g-import-not-at-top
    from porting.diffs import Diff  # pylint: disable=g-import-not-at-top
    self.bad = self.early = [report_lib.Row(0, kind, name, name, Diff(rel, rel, 3))
                             for kind, name, rel in rows]
    self.start = 0
    self.bound = 1e-5  # float32's rounding (porting.precision)

  def fired(self, *rules):  # pylint: disable=unused-argument
    return False

  def worst(self, rows):
    return max(r.diff.max_rel for r in rows)


def test_moving_statistics_apart_by_rounding_are_the_update_form_only_where_the_step_is_not():
  """A TF1 batch norm fused (or recorded on TensorFlow 1.15) against a port with
  porting.TF1BatchNorm, which updates as TF1 does: the step-0 loss 3 ULPs apart, the moving
  statistics 1.9e-6. The update form ("Keras 3's as v m + x (1 - m)") was named; the
  statistics followed the step's own difference."""
  from porting.causes import batch_norm  # pylint: disable=g-import-not-at-top
  moving = [("weight", "bn1/moving_mean", 1.9e-6), ("weight", "bn1/moving_variance", 4e-7)]
  assert batch_norm.update_rounding(_Moving([("loss", "tower_0", 2e-7)] + moving)) == []
  assert batch_norm.update_rounding(_Moving([("gradient", "bn1/gamma", 3e-7)] + moving)) == []
  (line,) = batch_norm.update_rounding(_Moving(moving))
  assert line.startswith("moving statistics differ by rounding: TF1's batch norm updates")


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_an_ema_without_num_updates_is_refused_with_both_settings():
  """tf.train.ExponentialMovingAverage(decay) in the port, (decay, num_updates=global_step) in
  the TF1 code: the averages moved apart from step 0 and the kit named the EMA's read order,
  "TF1 applies it after update, TF2 after the optimizer's update", which is no difference."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  no_count = lambda optimizer: tf.train.ExponentialMovingAverage(m.EMA_DECAY)
  with pytest.raises(porting.PortError) as refused:
    porting.compare(m.port(tf2_ema=no_count), m.batches(1), replicas=1, steps=1)
  assert str(refused.value) == (
      "the moving averages' settings differ: TF1 num_updates given (its decay min(decay, "
      "(1 + t) / (10 + t))), TF2 no num_updates (the full decay from step 0); set them alike "
      "(tf2_ema(optimizer): num_updates=optimizer.iterations, the TF1 global step's count)")
  other = lambda optimizer: tf.train.ExponentialMovingAverage(
      0.5, num_updates=optimizer.iterations)
  with pytest.raises(porting.PortError, match=rf"decay TF1 {m.EMA_DECAY:g}, TF2 0.5; set them "
                     r"alike$"):
    porting.compare(m.port(tf2_ema=other), m.batches(1), replicas=1, steps=1)


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_the_ema_settings_are_compared_against_a_record_and_unread_ones_said():
  """A replay read no EMA settings at all (the record's reader kept no facts), silently; a
  decay held in a tensor, or a record without the settings, is said as not compared."""
  import json  # pylint: disable=g-import-not-at-top
  import uuid  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from porting import record  # pylint: disable=g-import-not-at-top
  path = f"ram://record-{uuid.uuid4().hex}"
  header = record.write(m.port(1), m.batches(1), path, replicas=1, steps=1)
  no_count = lambda optimizer: tf.train.ExponentialMovingAverage(m.EMA_DECAY)
  with pytest.raises(porting.PortError, match="TF2 no num_updates"):
    porting.compare(m.port(1, tf2_ema=no_count), record=path, steps=1)
  held = lambda optimizer: tf.train.ExponentialMovingAverage(
      tf.constant(m.EMA_DECAY), num_updates=optimizer.iterations)
  report = porting.compare(m.port(1, tf2_ema=held), record=path, steps=1)
  assert ("the moving averages' decay: held in a tensor on the TF2 side, not compared; the "
          "steps' numbers are") in report.unread
  with tf.io.gfile.GFile(header) as f:
    recorded = json.load(f)
  del recorded["facts"]["ema"]
  tf.io.gfile.remove(header)  # ram:// opened for writing keeps what was there
  with tf.io.gfile.GFile(header, "w") as f:
    json.dump(recorded, f)
  report = porting.compare(m.port(1), record=path, steps=1)
  assert [line for line in report.unread if line.startswith(
      "the moving averages' settings: the TF1 side's are not in its record")]
