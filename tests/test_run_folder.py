"""A run's folder is its own, and a bad folder is one line: the lock, files in the way, full
and read-only disks, an evaluator racing the trainer's deletions.

The faults of a careless or hostile user, each against both trainers (and the Keras path
where it applies), in-process through helpers.call unless a process is what is tested.
"""

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys

import pytest

from harness.folders import ownership
from tests import helpers

TRAINERS = pytest.mark.parametrize("trainer", ["strategies.train", "compat_v1.train",
                                               "examples.keras_fit"])
FLAGS = ("--dataset=synthetic", "--batch_size=4", "--max_steps=2", "--save_checkpoint_steps=1")


@TRAINERS
@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_a_second_run_on_a_train_dir_in_use_is_refused_naming_the_owner(trainer, tmp_path):
  with ownership.own(str(tmp_path)):
    line = helpers.check_one_line(helpers.call(trainer, *FLAGS, f"--train_dir={tmp_path}"),
                  f"--train_dir={tmp_path} is in use by another run (host ")
  assert f"pid {os.getpid()}" in line
  assert not [f for f in os.listdir(tmp_path) if f != ownership.LOCK_FILE]
  # Once the owner is gone the folder is free again.
  assert helpers.call(trainer, *FLAGS, f"--train_dir={tmp_path}").returncode == 0


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_a_sigkilled_owner_leaves_no_stuck_lock(tmp_path):
  holder = subprocess.Popen(
      [sys.executable, "-c", "import sys, time; from harness.folders import ownership\n"
       f"with ownership.own({str(tmp_path)!r}):\n  print('held', flush=True); time.sleep(60)"],
      stdout=subprocess.PIPE, text=True, cwd=helpers.REPO)
  try:
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(ownership.UsageError, match="is in use by another run"):
      with ownership.own(str(tmp_path)):
        pass
    holder.send_signal(signal.SIGKILL)
    holder.wait(30)
    with ownership.own(str(tmp_path)):
      pass
  finally:
    holder.kill()
    holder.wait(30)


@TRAINERS
def test_a_train_dir_that_is_a_file_or_under_one_is_one_line(trainer, tmp_path):
  path = tmp_path / "file"
  path.write_text("not a folder")
  # Named as a file before TensorFlow starts (it was the OS's "File exists" or "Not a
  # directory", after it had started).
  for train_dir, where in ((path, "is a file"), (path / "sub", f"is under {path}, a file")):
    helpers.check_one_line(helpers.call(trainer, *FLAGS, f"--train_dir={train_dir}"),
                           f"--train_dir={train_dir} {where}, not a folder: give a folder")
  assert path.read_text() == "not a folder"


@pytest.mark.parametrize("evaluator", ["strategies.eval", "compat_v1.eval"])
def test_an_eval_dir_that_is_a_file_is_one_line(evaluator, tmp_path):
  path = tmp_path / "file"
  path.write_text("not a folder")
  helpers.check_one_line(helpers.call(evaluator, "--dataset=synthetic", "--run_once", "--num_examples=8",
                      f"--checkpoint_dir={tmp_path}", f"--eval_dir={path}"),
         f"cannot use --eval_dir={path}: ")


@pytest.mark.parametrize("error,expected", [
    (OSError(28, "No space left on device", "/d/x/ckpt-2.index"),
     "cannot write to /d/x/ckpt-2.index: No space left on device; "),
    ("ResourceExhaustedError", "cannot write to /d/x/model.ckpt-2.data-00000-of-00001"
     ".tempstate42: No space left on device; "),
    (OSError(30, "Read-only file system"), "cannot write to a file: Read-only file system; "),
    (OSError(1, "Operation not permitted", "/d/x/.lock"),
     "cannot access /d/x/.lock: Operation not permitted; "),
])
def test_a_write_the_disk_refuses_is_one_line(error, expected):
  from harness.command_line import cli  # pylint: disable=g-import-not-at-top
  if error == "ResourceExhaustedError":  # TensorFlow's words for errno 28 in a Saver
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    error = tf.errors.ResourceExhaustedError(
        None, None, "/d/x/model.ckpt-2.data-00000-of-00001.tempstate42; No space left on "
        "device\n\tFailed to flush")
  assert str(cli.storage(error)).startswith(expected)
  assert "resumes from the newest" in str(cli.storage(error))
  # A GPU out of memory is ResourceExhausted too, but not a disk's problem.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  assert cli.storage(tf.errors.ResourceExhaustedError(None, None, "OOM when allocating")) is None
  assert cli.storage(ValueError("No space left on device")) is None


def _can_mount():
  if not shutil.which("unshare"):
    return False
  return subprocess.run(["unshare", "-m", "mount", "-t", "tmpfs", "tmpfs", "/mnt"],
                        capture_output=True, timeout=30).returncode == 0


@pytest.mark.slow
def test_a_full_or_read_only_disk_is_one_line_and_loses_nothing(tmp_path):
  # Real disks: tmpfs mounts in a private mount namespace (tests/storage_faults.py).
  if not _can_mount():
    pytest.skip("needs `unshare -m` and tmpfs mounts (root with CAP_SYS_ADMIN)")
  result = subprocess.run(["unshare", "-m", sys.executable, "-m", "tests.storage_faults",
                           str(tmp_path)], capture_output=True, text=True, timeout=240,
                          env=helpers.env(), cwd=helpers.REPO)
  assert result.returncode == 0, result.stderr[-3000:]
  seen = json.loads(result.stdout.strip().splitlines()[-1])
  for trainer in ("strategies.train", "compat_v1.train", "examples.keras_fit"):
    runs = seen[trainer]
    assert runs["first"]["status"] == 0, runs["first"]["tail"]
    # Full: one line naming the file, exit 2; the step-1 checkpoint is still the newest.
    assert runs["full"]["status"] == 2, runs["full"]["tail"]
    assert re.fullmatch(r"error: cannot write to /\S+: No space left on device; .*",
                        runs["full"]["line"]), runs["full"]["line"]
    assert "Traceback" not in runs["full"]["tail"]
    assert runs["after_full"]["latest"] in ("ckpt-1", "model.ckpt-1")
    assert runs["after_full"].get("complete", True)
    # Room again: resumes at step 1, reaches 3, no temporary files left behind.
    assert runs["again"]["status"] == 0 and runs["resumed"], runs["again"]["tail"]
    assert runs["final"]["latest"] in ("ckpt-3", "model.ckpt-3")
    assert runs["final"].get("step", 3) == 3 and runs["final"]["debris"] == []
    assert runs["read_only"]["status"] == 2
    assert runs["read_only"]["line"].endswith("/train: Read-only file system")
  for evaluator in ("strategies.eval", "compat_v1.eval"):
    assert seen[evaluator]["eval_dir_read_only"]["status"] == 2
    assert seen[evaluator]["eval_dir_read_only"]["line"].endswith("/eval: Read-only file system")
    # A read-only run folder can still be evaluated.
    assert seen[evaluator]["checkpoint_dir_read_only"]["status"] == 0
    assert seen[evaluator]["checkpoint_dir_read_only"]["printed"].startswith(
        "step 3: precision @ 1 = ")


class _Done(Exception):
  pass


@pytest.mark.slow
@pytest.mark.parametrize("trainer,evaluator", [("strategies.train", "strategies.evaluator"),
                                               ("compat_v1.train", "compat_v1.evaluator")])
def test_an_evaluator_skips_a_checkpoint_the_trainer_deletes_while_it_is_read(
    trainer, evaluator, tmp_path):
  # The race of continuous evaluation against a trainer that keeps one checkpoint: the
  # checkpoint found is deleted before it is read. Before: the evaluator died (exit 2, a
  # misleading "Variable name ... missing").
  import contextlib  # pylint: disable=g-import-not-at-top
  import importlib  # pylint: disable=g-import-not-at-top
  from cifar10 import eval_config  # pylint: disable=g-import-not-at-top
  train_dir = str(tmp_path / "train")
  train = lambda steps: helpers.call(trainer, *FLAGS, f"--max_steps={steps}",
                                     "--max_checkpoints_to_keep=1", f"--train_dir={train_dir}")
  assert train(1).returncode == 0
  for run_once in (True, False):
    with contextlib.closing(importlib.import_module(evaluator).Evaluator(eval_config.EvalConfig(
        checkpoint_dir=train_dir, eval_dir=str(tmp_path / "eval"), num_examples=8,
        batch_size=8, run_once=run_once, eval_interval_secs=1, dataset="synthetic"))) as scorer:
      _evaluate_while_the_trainer_deletes(scorer, train, run_once)


def _evaluate_while_the_trainer_deletes(scorer, train, run_once):
  from harness.folders import polling  # pylint: disable=g-import-not-at-top
  seen = []

  def evaluate(path):
    seen.append(os.path.basename(path))
    if len(seen) == 1:  # the trainer moves on meanwhile, and deletes `path`
      assert train(int(path.rsplit("-", 1)[1]) + 1).returncode == 0
      assert not os.path.exists(path + ".index")
    result = scorer.evaluate(path)
    if not run_once:
      raise _Done(result)
    return result

  if run_once:
    _, step = polling.evaluate_each(evaluate, scorer.config)
    assert step == 2
    assert [s.split("ckpt-")[1] for s in seen] == ["1", "2"]
  else:
    with pytest.raises(_Done) as done:
      polling.evaluate_each(evaluate, scorer.config)
    assert done.value.args[0][1] == 3
    assert [s.split("ckpt-")[1] for s in seen] == ["2", "3"]


@pytest.mark.slow
@pytest.mark.parametrize("trainer,prefix", [("tf2", "ckpt"), ("v1", "model.ckpt")])
def test_a_newest_checkpoint_with_flipped_bits_is_set_aside_and_the_one_before_resumes(
    trainer, prefix, tmp_path, caplog):
  import numpy as np  # pylint: disable=g-import-not-at-top
  from cifar10 import checkpoints  # pylint: disable=g-import-not-at-top
  from cifar10 import config  # pylint: disable=g-import-not-at-top
  caplog.set_level("INFO")
  train = helpers.train_tf2 if trainer == "tf2" else helpers.train_v1
  runs = {name: config.TrainConfig(train_dir=str(tmp_path / name), dataset="synthetic",
                                   batch_size=4, max_steps=4, save_checkpoint_steps=2)
          for name in ("damaged", "whole")}
  for run in runs.values():
    train(run)
  data = tmp_path / "damaged" / f"{prefix}-4.data-00000-of-00001"
  raw = bytearray(data.read_bytes())
  raw[len(raw) // 2] ^= 0xFF  # one flipped byte: the same size, the index still whole
  data.write_bytes(bytes(raw))
  # Before: the restart stopped with "cannot restore" and two TensorFlow warnings.
  assert train(dataclasses.replace(runs["damaged"], max_steps=6)) == 6
  assert f"{prefix}-4 does not read back whole" in caplog.text
  assert f"Resumed from {tmp_path}/damaged/{prefix}-2 at step 2" in caplog.text
  assert (tmp_path / "damaged" / f"{prefix}-4.data-00000-of-00001.damaged").exists()
  train(dataclasses.replace(runs["whole"], max_steps=6))
  resumed, whole = (checkpoints.read(str(tmp_path / n)) for n in ("damaged", "whole"))
  assert resumed.global_step == whole.global_step == 6
  for name, value in whole.weights.items():
    np.testing.assert_array_equal(resumed.weights[name], value, err_msg=name)


@pytest.mark.parametrize("evaluator", ["strategies.eval", "compat_v1.eval"])
@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_evaluators_read_a_folder_whose_index_is_empty_or_damaged(evaluator, tmp_path):
  from cifar10 import config  # pylint: disable=g-import-not-at-top
  helpers.train_tf2(config.TrainConfig(train_dir=str(tmp_path / "run"), dataset="synthetic",
                                       batch_size=4, max_steps=2, save_checkpoint_steps=1))
  common = ("--dataset=synthetic", "--num_examples=8", "--batch_size=8",
            f"--checkpoint_dir={tmp_path / 'run'}", f"--eval_dir={tmp_path / 'eval'}")
  for index in ("", "garbage {"):  # before: ValueError: Invalid checkpoint state
    (tmp_path / "run" / "checkpoint").write_text(index)
    once = helpers.call(evaluator, *common, "--run_once")
    assert once.returncode == 0, once.stderr[-2000:]
    assert once.stdout.startswith("step 2: precision @ 1 = ")
    assert once.stdout.endswith(f"(8 examples, {tmp_path}/run/ckpt-2)\n")
  # Continuous, as a managed cluster's evaluator task runs: it ends at the final step.
  from cifar10 import eval_config  # pylint: disable=g-import-not-at-top
  from harness.folders import polling  # pylint: disable=g-import-not-at-top
  run = eval_config.EvalConfig(checkpoint_dir=str(tmp_path / "run"),
                               eval_dir=str(tmp_path / "e"), eval_interval_secs=1, last_step=2)
  seen = []
  assert polling.evaluate_each(lambda path: seen.append(path) or (0.5, 2), run) == (0.5, 2)
  assert seen == [f"{tmp_path}/run/ckpt-2"]
