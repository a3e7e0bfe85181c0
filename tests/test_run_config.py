"""A train_dir keeps the settings of its run: a restart with others is refused before anything
is written, unless --override_run_config asks for it."""

import dataclasses
import json
import re
import os

import pytest

from cifar10 import checkpoints
from cifar10 import config
from harness.folders import run_record
from tfbits import threads
from cifar10.errors import UsageError
from tests import helpers


def _files(folder):
  return {name: os.stat(os.path.join(folder, name)).st_mtime_ns
          for name in os.listdir(folder)}


@pytest.mark.parametrize("trainer", ["tf2", "v1"])
@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_a_restart_with_other_settings_is_refused_before_anything_is_written(trainer,
                                                                             tmp_path):
  train = helpers.train_tf2 if trainer == "tf2" else helpers.train_v1
  first = config.TrainConfig(train_dir=str(tmp_path), dataset="synthetic", batch_size=4,
                             max_steps=1, seed=3)
  assert train(first) == 1
  assert run_record.read(str(tmp_path))["settings"] == {
      "dataset": "synthetic", "data_dir": None, "seed": 3, "batch_size": 4, "replicas": 1,
      "precision": "fp32", "loss_scale": None, "learning_rate": 0.1, "decay_steps": 0,
      "decay_steps_per_global_batch": False, "ema_reads": "updated",
      # The pools this worker runs (TensorFlow's defaults, set explicitly: tfbits.threads).
      "intra_op_threads": threads.effective()[0], "inter_op_threads": threads.effective()[1]}
  before = _files(tmp_path)
  other = dataclasses.replace(first, max_steps=2, batch_size=8, learning_rate=0.05)
  with pytest.raises(UsageError) as refused:
    train(other)
  assert str(refused.value) == (
      f"--train_dir={tmp_path} holds a run of other settings (--batch_size was 4, now 8, "
      "--learning_rate was 0.1, now 0.05): rerun with its own, use a new --train_dir "
      "(--init_from keeps the weights), or pass --override_run_config")
  assert _files(tmp_path) == before
  # On purpose: it continues from step 1 with the new settings, and the record keeps what
  # they replaced.
  assert train(dataclasses.replace(other, override_run_config=True)) == 2
  assert checkpoints.read(str(tmp_path)).global_step == 2
  record = run_record.read(str(tmp_path))
  assert record["settings"]["batch_size"] == 8 and record["settings"]["learning_rate"] == 0.05
  assert record["history"] == [{"batch_size": 4, "learning_rate": 0.1}]
  # The same settings again (a longer run) need nothing.
  assert train(dataclasses.replace(other, max_steps=3)) == 3


@pytest.mark.bfloat16  # refused before the record is read where this CPU has no bf16 kernels
def test_the_quickstart_folder_reused_by_a_real_run_is_one_line(tmp_path):
  # The case: the README's synthetic batch-32 run, then a 2-replica batch-128 run on
  # the same --train_dir, which resumed it silently.
  result = helpers.call("strategies.train", "--dataset=synthetic", "--batch_size=32",
                        "--max_steps=1", f"--train_dir={tmp_path}")
  assert result.returncode == 0, result.stderr[-2000:]
  result = helpers.call("compat_v1.train", "--dataset=synthetic", "--num_gpus=2",
                        "--max_steps=2", "--precision=bf16", f"--train_dir={tmp_path}")
  assert result.returncode == 2
  assert helpers.error_line(result) == (
      f"error: --train_dir={tmp_path} holds a run of other settings (--batch_size was 32, "
      "now 128, --num_gpus or the cluster's size was 1, now 2, --precision was \"fp32\", now "
      "\"bf16\"): rerun with its own, use a new --train_dir (--init_from keeps the weights), "
      "or pass --override_run_config")


def test_a_folder_without_a_checkpoint_holds_no_run_and_one_without_a_record_takes_none(
    tmp_path):
  fresh = config.TrainConfig(train_dir=str(tmp_path / "a"), dataset="synthetic", batch_size=4)
  # A run that failed before its first checkpoint left a record: nothing to protect.
  run_record.write(fresh.train_dir, run_record.check(
      dataclasses.replace(fresh, batch_size=32), 1))
  assert run_record.check(fresh, 1)["settings"]["batch_size"] == 4
  # Checkpoints from before records existed (or from TF1 itself, or whose record was
  # deleted): their settings are unknown, so none are taken silently (before, any were).
  old = tmp_path / "b"
  old.mkdir()
  (old / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-5"\n')
  with pytest.raises(UsageError, match=re.escape(
      f"--train_dir={old} holds checkpoints but no run_config.json of their settings: pass "
      "--override_run_config to go on with these, or use a new --train_dir (--init_from "
      "keeps the weights)")):
    run_record.check(dataclasses.replace(fresh, train_dir=str(old)), 2)
  record = run_record.check(dataclasses.replace(fresh, train_dir=str(old),
                                                override_run_config=True), 2)
  from tfbits import machine  # pylint: disable=g-import-not-at-top
  assert record == {"settings": run_record.settings(fresh, 2), "history": [],
                    "machines": [machine.describe().line()]}


@pytest.mark.parametrize("trainer", ["strategies.train", "compat_v1.train"])
@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_deleting_a_damaged_record_does_not_open_the_folder_to_other_settings(trainer,
                                                                            tmp_path):
  common = ("--dataset=synthetic", "--max_steps=1", f"--train_dir={tmp_path}")
  assert helpers.call(trainer, *common, "--batch_size=8").returncode == 0
  (tmp_path / run_record.RECORD).write_text("[]")  # damaged: JSON, not a record
  line = helpers.check_one_line(helpers.call(trainer, *common, "--batch_size=16",
                                             "--max_steps=2"), "is damaged")
  assert "restore it, or pass --override_run_config" in line and "delete" not in line
  (tmp_path / run_record.RECORD).unlink()  # what the old advice said to do
  helpers.check_one_line(helpers.call(trainer, *common, "--batch_size=16", "--max_steps=2"),
                         "holds checkpoints but no run_config.json of their settings")


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_record_that_is_not_a_regular_file_is_one_line(kind, tmp_path):
  import os  # pylint: disable=g-import-not-at-top
  (tmp_path / "checkpoint").write_text('model_checkpoint_path: "ckpt-1"\n')
  path = tmp_path / run_record.RECORD
  path.mkdir() if kind == "folder" else os.mkfifo(path)  # a FIFO hung both trainers
  with pytest.raises(UsageError, match=re.escape(
      f"{path} is not a regular file (a folder, a FIFO or a device): move it away")):
    run_record.check(config.TrainConfig(train_dir=str(tmp_path), dataset="synthetic"), 1)


def test_a_damaged_record_is_one_line(tmp_path):
  (tmp_path / "checkpoint").write_text('model_checkpoint_path: "ckpt-1"\n')
  (tmp_path / run_record.RECORD).write_text('{"settings": {"batch_')
  run = config.TrainConfig(train_dir=str(tmp_path), dataset="synthetic")
  with pytest.raises(UsageError) as damaged:
    run_record.check(run, 1)
  assert str(damaged.value) == (
      f"{tmp_path}/{run_record.RECORD} is damaged; it records the settings of the run in "
      "--train_dir: restore it, or pass --override_run_config to record these settings as "
      "the run's")
  json.loads(json.dumps(run_record.settings(run, 1)))  # what is written reads back


def test_a_run_resumed_on_another_kind_of_machine_says_so_and_keeps_both(tmp_path, caplog,
                                                                         monkeypatch):
  from tfbits import machine  # pylint: disable=g-import-not-at-top
  run = config.TrainConfig(train_dir=str(tmp_path), dataset="synthetic", batch_size=2,
                           max_steps=1, seed=3)
  helpers.train_tf2(run)
  here = machine.describe()
  assert run_record.read(str(tmp_path))["machines"] == [here.line()]
  # The same folder on a CPU with oneDNN off (faked at the boundary): one warning, both kept.
  other = dataclasses.replace(here, onednn=not here.onednn)
  monkeypatch.setattr(machine, "describe", lambda: other)
  caplog.set_level("WARNING")
  helpers.train_tf2(dataclasses.replace(run, max_steps=2))
  assert run_record.read(str(tmp_path))["machines"] == [here.line(), other.line()]
  warned = [m for m in caplog.messages if "last trained on" in m]
  assert warned == [f"The run in {tmp_path} last trained on {here.line()}; it continues on "
                    f"{other.line()}: from here its bits are this machine's kernels' "
                    "(docs/determinism.md, \"Machines\")"]
