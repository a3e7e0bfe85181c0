"""A run folder on a filesystem the OS cannot see: TensorFlow's in-memory `ram://`.

What holds for gs:// or s3:// holds here: every file of a run folder (checkpoints, index, run
record, lock, summaries, the evaluator's) goes through tf.io.gfile, and nothing is written to
a local path that looks like the URL (before, the lock and run_config.json landed in
./ram:/...). The whole life of a run: train, SIGTERM, resume bit-identically, evaluate.
"""

import os
import signal
import uuid

import numpy as np
import pytest
import tensorflow as tf

from cifar10 import checkpoints
from cifar10 import config
from cifar10 import errors
from harness.folders import ownership
from harness.folders import recovery
from harness.folders import run_folder
from harness.control import run_errors
from tests import helpers


def _run(train_dir, **kwargs):
  return config.TrainConfig(train_dir=train_dir, dataset="synthetic", batch_size=8, seed=3,
                            max_steps=4, save_summaries_steps=2, **kwargs)


@pytest.mark.slow
@pytest.mark.parametrize("trainer", [helpers.train_tf2, helpers.train_v1])
def test_train_stop_resume_and_evaluate_on_ram(trainer, tmp_path, monkeypatch, caplog):
  monkeypatch.chdir(tmp_path)  # where a URL taken for a local path would have gone
  root = f"ram://{uuid.uuid4().hex}"
  run = _run(f"{root}/train")

  def preempt(step, loss, lr):  # pylint: disable=unused-argument
    if step == 1:
      os.kill(os.getpid(), signal.SIGTERM)

  previous = signal.getsignal(signal.SIGTERM)
  try:
    with pytest.raises(run_errors.Stopped) as stopped:
      trainer(run, on_step=preempt)
  finally:
    signal.signal(signal.SIGTERM, previous)
  # The request comes after step 1's call: the next call runs, then it saves and stops.
  assert f"after step 3; saved {run.train_dir}/" in str(stopped.value)
  assert checkpoints.read(run.train_dir).global_step == 3
  assert trainer(run) == 4
  reference = _run(str(tmp_path / "local"))
  trainer(reference)
  resumed, local = checkpoints.read(run.train_dir), checkpoints.read(reference.train_dir)
  assert resumed.global_step == 4
  for name, value in local.weights.items():
    np.testing.assert_array_equal(resumed.weights[name], value, err_msg=name)
    np.testing.assert_array_equal(resumed.averages[name], local.averages[name], err_msg=name)
  names = set(tf.io.gfile.listdir(run.train_dir))
  assert {"run_config.json", ownership.LOCK_FILE, "checkpoint"} <= names
  assert any(n.startswith("events.out.tfevents") for n in names)
  assert "is not locked: its filesystem has no locks" in caplog.text
  # The evaluator reads it and writes beside it, by default into train_dir/eval.
  evaluator = "strategies.eval" if trainer is helpers.train_tf2 else "compat_v1.eval"
  scored = helpers.call(evaluator, f"--checkpoint_dir={run.train_dir}", "--run_once",
                        "--dataset=synthetic", "--seed=3", "--num_examples=16",
                        "--batch_size=8")
  assert scored.returncode == 0, scored.stderr[-2000:]
  assert scored.stdout.startswith("step 4: precision @ 1 = ")
  assert "(16 examples, ram://" in scored.stdout
  assert any(n.startswith("events.out.tfevents")
             for n in tf.io.gfile.listdir(f"{run.train_dir}/eval"))
  assert os.listdir(tmp_path) == ["local"]  # nothing under ./ram:


def test_recovery_rewrites_a_damaged_index_on_ram():
  root = f"ram://{uuid.uuid4().hex}"
  run = _run(root, save_checkpoint_steps=2)
  helpers.train_tf2(run)
  run_folder.write_atomically(f"{root}/checkpoint", "garbage {")
  tf.io.gfile.makedirs(f"{root}/ckpt-6_temp")  # debris of an interrupted save
  newest, keep = recovery.recover(root)
  assert newest == f"{root}/ckpt-4" and keep == [f"{root}/ckpt-2", f"{root}/ckpt-4"]
  assert not tf.io.gfile.exists(f"{root}/ckpt-6_temp")
  assert tf.train.latest_checkpoint(root) == f"{root}/ckpt-4"


def test_the_classic_bin_files_are_read_from_any_filesystem(tmp_path):
  from cifar10 import data_sources  # pylint: disable=g-import-not-at-top
  helpers.write_bin_dataset(str(tmp_path), seed=4, train_per_file=3, num_test=5)
  remote = f"ram://{uuid.uuid4().hex}/data"
  for name in os.listdir(tmp_path / data_sources.BIN_FOLDER):
    tf.io.gfile.makedirs(f"{remote}/{data_sources.BIN_FOLDER}")
    tf.io.gfile.copy(str(tmp_path / data_sources.BIN_FOLDER / name),
                     f"{remote}/{data_sources.BIN_FOLDER}/{name}")
  for split in ("train", "test"):
    local, there = data_sources.load_bin(str(tmp_path), split), data_sources.load_bin(remote,
                                                                                     split)
    np.testing.assert_array_equal(there[0], local[0])
    np.testing.assert_array_equal(there[1], local[1])
  assert there[0].shape == (5, 32, 32, 3)
  # A tarball there is not unpacked into the bucket: one line says what to do.
  tf.io.gfile.rmtree(f"{remote}/{data_sources.BIN_FOLDER}")
  with tf.io.gfile.GFile(f"{remote}/{data_sources.BIN_TARBALL}", "wb") as f:
    f.write(b"\0")
  with pytest.raises(errors.UsageError, match="is not unpacked, and --data_dir is not a local"):
    data_sources.load_bin(remote, "train")
