"""--steps_per_loop=K: K steps per call of the compiled function, the same run to the bit.

Against K = 1 (one step per call, the loop every other test drives): weights, moving averages
and global step of every checkpoint, the summaries and the log lines, and the step a NaN
stops at.
"""

import logging

from absl import logging as absl_logging
import numpy as np
import pytest

from cifar10 import checkpoints
from cifar10 import config
from equivalence import runs
from harness.control import cadence
from harness.control import run_errors
from tests import helpers

REPLICAS = ("/cpu:0", "/cpu:1")


def _run(train_dir, steps_per_loop, on_step=None, **overrides):
  values = dict(train_dir=str(train_dir), dataset="synthetic", batch_size=4, max_steps=11,
                save_checkpoint_steps=6, log_frequency=5, save_summaries_steps=5, seed=3,
                max_checkpoints_to_keep=5)
  run_config = config.TrainConfig(**{**values, **overrides})
  calls, lines = [], []
  handler = logging.Handler()
  handler.emit = lambda record: lines.append(record.getMessage())
  logging.getLogger().addHandler(handler)
  absl_logging.set_verbosity(absl_logging.INFO)
  try:
    helpers.train_tf2(run_config, devices=REPLICAS, strategy="mirrored",
                      steps_per_loop=steps_per_loop,
                      on_step=lambda step, loss, lr: (calls.append((step, float(loss))),
                                                      on_step and on_step(step, loss, lr)))
  finally:
    logging.getLogger().removeHandler(handler)
  # The progress lines without their rates.
  progress = [line.split(" (")[0] for line in lines if ", loss = " in line]
  return calls, progress


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_k_steps_per_call_write_the_run_of_one_step_per_call(tmp_path):
  one_calls, one_lines = _run(tmp_path / "k1", 1)
  four_calls, four_lines = _run(tmp_path / "k4", 4)
  # The calls: step 0 and every summary step alone, the others up to 4 at a time, never
  # across a log step or a checkpoint (after step 6 and at the end).
  assert [s for s, _ in four_calls] == [0, 1, 4, 5, 6, 9, 10]
  assert dict(four_calls) == {s: loss for s, loss in one_calls if s in dict(four_calls)}
  assert four_lines == one_lines
  assert [line.split(",")[0] for line in one_lines] == ["step 0", "step 5", "step 10"]
  for name in ("ckpt-6", "ckpt-11"):
    a = checkpoints.read(str(tmp_path / "k1" / name))
    b = checkpoints.read(str(tmp_path / "k4" / name))
    assert a.global_step == b.global_step == int(name.split("-")[1])
    for key in a.weights:
      np.testing.assert_array_equal(a.weights[key], b.weights[key], err_msg=key)
      np.testing.assert_array_equal(a.averages[key], b.averages[key], err_msg=key)
  summaries_1, summaries_4 = runs.summaries(tmp_path / "k1"), runs.summaries(tmp_path / "k4")
  assert summaries_1.keys() == summaries_4.keys()
  for tag, values in summaries_1.items():
    assert summaries_4[tag] == values, tag


@pytest.mark.slow
def test_a_nan_inside_a_call_names_the_step_it_happened_at(tmp_path):
  stops = []
  for k in (1, 4):
    with pytest.raises(run_errors.NonFiniteLoss) as failure:
      _run(tmp_path / f"k{k}", k, learning_rate=1e4, max_steps=40, save_checkpoint_steps=100,
           log_frequency=100, save_summaries_steps=100)
    stops.append(failure.value.step)
  assert stops[0] == stops[1] > 1


def test_the_call_lengths_follow_the_flags():
  run = config.TrainConfig(train_dir="x", max_steps=1000, save_checkpoint_steps=250,
                           log_frequency=10, save_summaries_steps=100)
  # 998 and 999 in one call: the run's last step writes no summaries of its own.
  assert [cadence.call_length(s, run, 50) for s in (0, 1, 10, 95, 100, 241, 998, 999)] == [
      1, 9, 10, 5, 1, 9, 2, 1]
  assert cadence.call_length(1, run, 1) == 1


@pytest.mark.slow
def test_a_sigterm_inside_a_long_call_stops_after_the_step_in_hand(tmp_path):
  # Python runs its handler only once the compiled call returns: before, a SIGTERM early in a
  # call of 39 steps let the whole call run (here to --max_steps, so no stop at all; with a
  # longer run, the next call too), past a 30 s grace period where a step takes a second.
  import os  # pylint: disable=g-import-not-at-top
  import signal  # pylint: disable=g-import-not-at-top
  import threading  # pylint: disable=g-import-not-at-top
  flags = dict(max_steps=40, save_checkpoint_steps=1000, log_frequency=1000,
               save_summaries_steps=1000)
  kill = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM))

  def after(step, *_):
    if step == 0:  # step 0 is a call of its own; the next one runs steps 1-39
      kill.start()
  with pytest.raises(run_errors.Stopped) as stop:
    _run(tmp_path / "stopped", 39, on_step=after, **flags)
  kill.join()
  stopped = checkpoints.read(str(tmp_path / "stopped")).global_step
  assert f"SIGTERM after step {stopped}; saved " in str(stop.value)
  assert 1 < stopped < 30, stopped  # the call ended early, after the step in hand (measured 3)
  # Resumed, it ends with the bits of the uninterrupted run.
  _run(tmp_path / "stopped", 39, **flags)
  _run(tmp_path / "whole", 39, **flags)
  a = checkpoints.read(str(tmp_path / "stopped"))
  b = checkpoints.read(str(tmp_path / "whole"))
  assert a.global_step == b.global_step == 40
  for key in a.weights:
    np.testing.assert_array_equal(a.weights[key], b.weights[key], err_msg=key)
    np.testing.assert_array_equal(a.averages[key], b.averages[key], err_msg=key)
