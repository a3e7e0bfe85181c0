"""The binaries end to end, as a user runs them: train, resume, SIGKILL, SIGTERM, NaN, eval.

One uninterrupted reference run is shared by the module; the other runs are compared with it
bit for bit, which is what the determinism contract promises for a resumed run. The binaries
run in this process (helpers.call: their flags, their loop, their one-line errors) except
where a signal must hit a process of their own.
"""

import glob
import os
import re
import shutil
import signal
import time

import numpy as np
import pytest
import tensorflow as tf

from cifar10 import checkpoints
from cifar10 import data_sources as sources
from cifar10 import input_pipeline as ip
from cifar10 import model
from tests import helpers

pytestmark = pytest.mark.slow
TRAIN = "strategies.train"
MAX_STEPS = 40
COMMON = ("--num_gpus=2", "--dataset=synthetic", "--seed=3", "--batch_size=16",
          "--save_checkpoint_steps=10", "--save_summaries_steps=10", "--log_frequency=5")


def _train(train_dir, *extra):
  return helpers.call(TRAIN, *COMMON, f"--train_dir={train_dir}", *extra)


def _variables(path):
  reader = tf.train.load_checkpoint(path)
  return {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map()
          if k.startswith(("params/", "ema/", "global_step/"))}


@pytest.fixture(name="reference", scope="module")
def fixture_reference(tmp_path_factory):
  train_dir = str(tmp_path_factory.mktemp("reference"))
  result = _train(train_dir, f"--max_steps={MAX_STEPS}")
  assert result.returncode == 0, result.stderr[-3000:]
  return train_dir, result.stderr


def test_logs_the_original_line_every_log_frequency_steps(reference):
  _, log = reference
  assert "2 logical CPU devices stand in for 2 GPUs" in log
  assert "Model: the tutorial's CNN, 1,068,298 parameters" in log
  assert "Training synthetic on 2 replica(s) (CPU:0-1), " in log
  assert re.search(r"step 0, loss = \d+\.\d\d \(first step: \d+\.\d s, tracing included; "
                   r"acc [01]\.\d\d; lr 0\.1\)", log)
  # The rate does not change in this run: said on the first line only.
  steps = [int(s) for s in re.findall(
      r"step (\d+), loss = \d+\.\d\d \(\d+\.\d examples/sec; \d+\.\d{3} sec/batch; "
      r"acc [01]\.\d\d(?:; ETA \d+:\d\d:\d\d)?\)", log)]
  # Numbered as the original: the 0-based index of the step, every log_frequency, and the last.
  assert steps == [5, 10, 15, 20, 25, 30, 35, 39]


def test_checkpoints_hold_weights_ema_and_exact_step(reference):
  train_dir, _ = reference
  assert tf.train.latest_checkpoint(train_dir).endswith("ckpt-40")
  assert sorted(os.path.basename(p) for p in glob.glob(f"{train_dir}/ckpt-*.index")) == [
      "ckpt-10.index", "ckpt-20.index", "ckpt-30.index", "ckpt-40.index"]
  values = _variables(tf.train.latest_checkpoint(train_dir))
  assert values["global_step/.ATTRIBUTES/VARIABLE_VALUE"] == MAX_STEPS
  initial = model.initial_values(3)
  for name in model.VARIABLE_NAMES:
    key = name.replace("/", ".S")
    weights = values[f"params/{key}/.ATTRIBUTES/VARIABLE_VALUE"]
    shadow = values[f"ema/{key}/.ATTRIBUTES/VARIABLE_VALUE"]
    assert weights.shape == initial[name].shape
    assert not np.array_equal(weights, initial[name]), f"{name} never trained"
    assert not np.array_equal(weights, shadow), f"{name}: EMA equals the weights"


def test_summaries_hold_loss_lr_and_histograms_every_interval(reference):
  train_dir, _ = reference
  tags = helpers.summary_steps(train_dir)
  # Every 10 steps, as the original's `step % 10 == 0` (not the last, 39 of 40: a run
  # stopped and resumed would chart a point the uninterrupted run has not).
  assert tags["loss"] == [0, 10, 20, 30]
  assert tags["learning_rate"] == [0, 10, 20, 30]
  assert tags["local3/weights/values"] == [0, 10, 20, 30]
  assert tags["conv1/weights/gradients"] == [0, 10, 20, 30]
  # The rate of each progress line after the first (which times tracing), as the line says.
  assert tags["examples_per_second"] == tags["steps_per_second"] == [5, 10, 15, 20, 25, 30,
                                                                     35, 39]


def test_the_flags_are_kept_as_a_flagfile_that_runs_it_again(reference, tmp_path):
  train_dir, _ = reference
  with open(os.path.join(train_dir, "flags.txt"), encoding="utf-8") as f:
    lines = f.read().splitlines()
  assert f"--train_dir={train_dir}" in lines and "--batch_size=16" in lines
  assert "--num_gpus=2" in lines and "--nocpu_only" in lines and "--seed=3" in lines
  # A copy of the run, continued by its flagfile alone (the copy's folder given after it).
  copy = tmp_path / "copy"
  shutil.copytree(train_dir, copy, ignore=shutil.ignore_patterns(".lock"))
  result = helpers.call(TRAIN, f"--flagfile={copy}/flags.txt", f"--train_dir={copy}",
                        f"--max_steps={MAX_STEPS + 2}")
  assert result.returncode == 0, result.stderr[-2000:]
  assert f"Resumed from {copy}/ckpt-{MAX_STEPS} at step {MAX_STEPS}" in result.stderr
  assert f"Done: step {MAX_STEPS + 2}" in result.stderr


def test_sigkill_then_restart_finishes_with_the_uninterrupted_weights(reference, tmp_path):
  proc = helpers.start(TRAIN, *COMMON, f"--train_dir={tmp_path}", f"--max_steps={MAX_STEPS}",
                       "--save_checkpoint_steps=5", fork=True)
  try:
    deadline = time.time() + 120
    while not glob.glob(f"{tmp_path}/ckpt-10.index") and time.time() < deadline:
      assert proc.poll() is None, proc.stdout.read()[-3000:]
      time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
  finally:
    proc.kill()
    proc.wait(30)
  indexed = tf.train.latest_checkpoint(str(tmp_path))
  assert indexed and int(indexed.rsplit("-", 1)[1]) < MAX_STEPS
  result = _train(tmp_path, f"--max_steps={MAX_STEPS}")
  assert result.returncode == 0, result.stderr[-3000:]
  resumed = re.search(r"Resumed from (\S+) at step (\d+)", result.stderr)
  assert resumed, result.stderr[-3000:]
  # From the checkpoint the index names, or from a newer complete one whose index update the
  # kill cut short (its files written, the index not yet): the recovery says which.
  if resumed[1] != indexed:
    assert int(resumed[2]) > int(indexed.rsplit("-", 1)[1]), result.stderr[-3000:]
    assert (f"The checkpoint index of {tmp_path} names {indexed}; resuming from {resumed[1]}, "
            "the newest complete checkpoint in the folder") in result.stderr
  resumed = _variables(tf.train.latest_checkpoint(str(tmp_path)))
  expected = _variables(tf.train.latest_checkpoint(reference[0]))
  assert resumed.keys() == expected.keys()
  for key, value in expected.items():
    np.testing.assert_array_equal(resumed[key], value, err_msg=key)


def test_sigterm_saves_and_a_restart_finishes_with_the_uninterrupted_weights(reference, tmp_path):
  # The v1 trainer against the TF2 reference: the stop and the resume lose nothing, across
  # trainers. TF2's own SIGTERM path runs in tests/test_multi_worker.py (the same loop).
  trainer = "compat_v1.train"
  proc = helpers.start(trainer, *COMMON, f"--train_dir={tmp_path}", f"--max_steps={MAX_STEPS}",
                       fork=True)
  try:
    deadline = time.time() + 120
    while not tf.io.gfile.glob(f"{tmp_path}/*ckpt-10.index") and time.time() < deadline:
      assert proc.poll() is None, proc.stdout.read()[-3000:]
      time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
  finally:
    proc.kill()
  assert proc.returncode == 143, out[-3000:]  # --preemption_exit_code, default 128 + SIGTERM
  last = out.strip().splitlines()[-1]
  match = re.fullmatch(r"stopped: SIGTERM after step (\d+); saved (\S+); run the same command "
                       r"again to continue", last)
  assert match, last
  stopped_at, path = int(match[1]), match[2]
  assert 10 <= stopped_at < MAX_STEPS and path == tf.train.latest_checkpoint(str(tmp_path))
  assert path.endswith(f"ckpt-{stopped_at}")
  assert checkpoints.read(path).global_step == stopped_at
  result = helpers.call(trainer, *COMMON, f"--train_dir={tmp_path}", f"--max_steps={MAX_STEPS}")
  assert result.returncode == 0, result.stderr[-3000:]
  assert f"Resumed from {path} at step {stopped_at}" in result.stderr
  resumed, expected = checkpoints.read(str(tmp_path)), checkpoints.read(reference[0])
  assert resumed.global_step == expected.global_step == MAX_STEPS
  for name in expected.weights:
    np.testing.assert_array_equal(resumed.weights[name], expected.weights[name], err_msg=name)
    np.testing.assert_array_equal(resumed.averages[name], expected.averages[name],
                                  err_msg=name)


def test_nan_loss_stops_with_one_line_and_saves_nothing_non_finite(tmp_path):
  result = _train(tmp_path, "--max_steps=30", "--learning_rate=1e4", "--save_checkpoint_steps=1",
                  "--save_summaries_steps=1")
  assert result.returncode == 2
  line = helpers.error_line(result)
  assert re.fullmatch(r"error: loss is NaN or Inf at step \d+; nothing of this step was applied "
                      r"or saved \(last checkpoint: .*\)\. Lower --learning_rate or check the "
                      r"data", line), line
  assert "Traceback" not in result.stderr
  last = tf.train.latest_checkpoint(str(tmp_path))
  step = int(re.search(r"at step (\d+)", line).group(1))
  assert last.endswith(f"ckpt-{step}")
  for key, value in _variables(last).items():
    assert np.all(np.isfinite(value)), key
  # The summaries of every step before the failed one, the ones that explain it.
  tags = helpers.summary_steps(tmp_path)
  assert tags["total_loss"] == tags["learning_rate"] == list(range(step))


def test_a_nan_loss_is_its_own_line_alone_on_the_screen(tmp_path):
  """As a user's process shows it (TensorFlow's warnings on, the stderr filter on): before,
  TensorFlow's "Local rendezvous is aborting with status: INVALID_ARGUMENT: loss is not
  finite" and its CheckNumerics node line came above the trainer's own line, which says it."""
  env = {k: v for k, v in helpers.env().items() if k != "TF_CPP_MIN_LOG_LEVEL"}
  result = helpers.run_with([], env, TRAIN, *COMMON, f"--train_dir={tmp_path}",
                            "--max_steps=30", "--learning_rate=1e4")
  assert result.returncode == 2, result.stderr[-2000:]
  assert helpers.error_line(result).startswith("error: loss is NaN or Inf at step ")
  assert "local_rendezvous" not in result.stderr and "CheckNumerics" not in result.stderr, (
      result.stderr[-2000:])


def _precision_printed(stdout):
  return float(re.search(r"precision @ 1 = (\d\.\d+)", stdout).group(1))


def test_eval_scores_the_moving_averages_and_training_learns(reference, tmp_path):
  train_dir, _ = reference
  result = helpers.call("strategies.eval", f"--checkpoint_dir={train_dir}", "--run_once",
                       f"--eval_dir={tmp_path}", "--dataset=synthetic", "--seed=3",
                       "--num_examples=512", "--batch_size=64")
  assert result.returncode == 0, result.stderr[-3000:]
  precision = _precision_printed(result.stdout)
  # 40 steps of 32 synthetic images: measured 0.873 (chance is 0.10); test_accuracy.py
  # holds the longer run with the stated accuracy.
  assert precision >= 0.6
  # The same number from the EMA values read independently of the evaluator.
  values = _variables(tf.train.latest_checkpoint(train_dir))
  ema = {n: values[f"ema/{n.replace('/', '.S')}/.ATTRIBUTES/VARIABLE_VALUE"]
         for n in model.VARIABLE_NAMES}
  source = sources.synthetic_source(3, "test")
  correct = 0
  for images, labels in ip.eval_dataset(source, batch_size=64, num_examples=512):
    correct += int(tf.reduce_sum(tf.cast(
        tf.math.in_top_k(labels, model.inference(ema, images), 1), tf.int32)))
  assert precision == pytest.approx(correct / 512, abs=1e-3)
  events = glob.glob(f"{tmp_path}/events.out.tfevents.*")
  assert events


def test_a_cut_newest_checkpoint_is_set_aside_and_the_one_before_resumes(reference, tmp_path):
  train_dir = tmp_path / "train"
  shutil.copytree(reference[0], train_dir)
  data = glob.glob(f"{train_dir}/ckpt-40.data-*")[0]
  with open(data, "r+b") as f:
    f.truncate(100)
  result = _train(train_dir, f"--max_steps={MAX_STEPS + 10}")
  assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-2000:]
  assert f"Checkpoint {train_dir}/ckpt-40 does not read back whole" in result.stderr
  assert f"Resumed from {train_dir}/ckpt-30 at step 30" in result.stderr
  # Set aside, not deleted: its bytes are there for whoever wants to look.
  assert os.path.getsize(data + ".damaged") == 100
  assert tf.train.latest_checkpoint(str(train_dir)).endswith(f"ckpt-{MAX_STEPS + 10}")