"""Nothing a run writes lands outside the folder it was given, whatever links are planted there.

TensorFlow's writers (checkpoint shards and their `_temp` folders, the merged `.index`,
events files, the profiler) open their files through a symbolic link at the name, and
`tf.io.gfile.rmtree` empties the folder a link points at. So a run folder holding a link is
refused in one line before anything is read or written (harness.folders.run_folder.refuse_links),
a link planted while the run holds the folder is removed before each save, and the project's
own files are created exclusively (the lock with O_NOFOLLOW, temporaries under unpredictable
names) or replaced by a rename.
"""

import os
import re
import subprocess

import pytest

from harness.folders import ownership
from harness.folders import recovery
from tests import helpers

FLAGS = ("--dataset=synthetic", "--batch_size=4", "--max_steps=2", "--save_checkpoint_steps=1")


def _outside(tmp_path):
  """A folder outside the run with one precious file; returns (folder, its contents)."""
  outside = tmp_path / "outside"
  outside.mkdir()
  (outside / "precious").write_text("precious\n")
  return outside, lambda: {p.name: p.read_text() for p in outside.iterdir()}


@pytest.mark.parametrize("dangling", [False, True])
def test_a_lock_planted_as_a_symbolic_link_is_refused_and_its_target_untouched(dangling,
                                                                           tmp_path):
  outside = tmp_path / "outside.txt"
  if not dangling:
    outside.write_text("precious\n")
  train_dir = tmp_path / "run"
  train_dir.mkdir()
  (train_dir / ownership.LOCK_FILE).symlink_to(outside)
  # Before: all three trainers truncated the target and wrote their owner line into it (or
  # created it, through a dangling link), and the run went on.
  with pytest.raises(ownership.UsageError, match=re.escape(
      f"{train_dir}/.lock is a symbolic link; the lock of --train_dir is never written "
      "through one: remove it")):
    with ownership.own(str(train_dir)):
      pass
  assert (outside.read_text() == "precious\n") if not dangling else not outside.exists()


# Each name a run writes (or TensorFlow writes for it) in its folder, with the trainer that
# meets it: the run record, the checkpoint index, a checkpoint's files and the `_temp` folder
# of an interrupted save, an events file, the evaluators' and the profiler's subfolders.
PLANTED = [("strategies.train", "run_config.json", "precious"),
           ("compat_v1.train", "checkpoint", "precious"),
           ("examples.keras_fit", "ckpt-1.index", "precious"),
           ("compat_v1.train", "model.ckpt-1.index", "precious"),
           ("strategies.train", "ckpt-9_temp", "."),
           ("strategies.train", "events.out.tfevents.1.host.1.v2", "precious"),
           ("compat_v1.train", "eval", "."),
           ("examples.keras_fit", "plugins", ".")]


@pytest.mark.parametrize("trainer,name,target", PLANTED)
def test_a_link_planted_in_a_run_folder_is_refused_before_anything_is_written(
    trainer, name, target, tmp_path):
  outside, contents = _outside(tmp_path)
  train_dir = tmp_path / "run"
  train_dir.mkdir()
  (train_dir / name).symlink_to((outside / target).resolve())
  helpers.check_one_line(
      helpers.call(trainer, *FLAGS, f"--train_dir={train_dir}"),
      f"{train_dir}/{name} is a symbolic link (to {(outside / target).resolve()}) inside "
      "--train_dir: TensorFlow writes through links, and nothing a run writes may land "
      "outside its folder: remove it")
  assert contents() == {"precious": "precious\n"}
  assert os.listdir(train_dir) == [name]  # nothing written, the lock neither


def test_links_planted_while_a_run_holds_its_folder_are_removed_before_the_save(tmp_path):
  from cifar10 import config  # pylint: disable=g-import-not-at-top
  outside, contents = _outside(tmp_path)
  train_dir = tmp_path / "run"
  planted = {"ckpt-2.index": outside / "precious", "ckpt-2_temp": outside,
             "checkpoint": outside / "precious"}

  def plant(step, *_):
    if step == 0:  # the run holds the folder; the save of step 2 comes next
      for name, target in planted.items():
        (train_dir / name).symlink_to(target)

  run = config.TrainConfig(train_dir=str(train_dir), dataset="synthetic", batch_size=4,
                           max_steps=2, save_checkpoint_steps=2)
  assert helpers.train_tf2(run, on_step=plant) == 2
  # Before: the save wrote ckpt-2's shard into outside/ and its merged index over `precious`.
  assert contents() == {"precious": "precious\n"}
  assert not [p for p in os.listdir(train_dir) if os.path.islink(train_dir / p)]
  from cifar10 import checkpoints  # pylint: disable=g-import-not-at-top
  assert checkpoints.steps(str(train_dir)) == [(2, f"{train_dir}/ckpt-2")]
  assert checkpoints.unreadable(f"{train_dir}/ckpt-2") is None


def test_recovery_removes_a_planted_temp_link_not_what_it_points_at(tmp_path):
  outside, contents = _outside(tmp_path)
  (tmp_path / "run").mkdir()
  (tmp_path / "run" / "ckpt-9_temp").symlink_to(outside)
  # Before: tf.io.gfile.rmtree emptied outside/, then failed with a traceback.
  assert recovery.recover(str(tmp_path / "run")) == (None, [])
  assert contents() == {"precious": "precious\n"}
  assert os.listdir(tmp_path / "run") == []


def test_an_evaluators_default_eval_folder_planted_as_a_link_is_refused(tmp_path):
  outside, contents = _outside(tmp_path)
  (tmp_path / "run").mkdir()
  (tmp_path / "run" / "eval").symlink_to(outside)
  for evaluator in ("strategies.eval", "compat_v1.eval"):
    helpers.check_one_line(
        helpers.call(evaluator, "--dataset=synthetic", f"--checkpoint_dir={tmp_path}/run",
                     "--run_once"),
        f"{tmp_path}/run/eval is a symbolic link (to {outside}): remove it, or name the "
        "folder with --eval_dir")
  assert contents() == {"precious": "precious\n"}


def test_the_scratch_of_an_unpack_planted_as_a_link_is_removed_not_what_it_points_at(
    tmp_path):
  from cifar10 import bin_tarball  # pylint: disable=g-import-not-at-top
  outside, contents = _outside(tmp_path)
  ended = subprocess.Popen(["true"])  # a pid whose process has ended
  ended.wait()
  data_dir = tmp_path / "data"
  data_dir.mkdir()
  (data_dir / f".unpacking-{ended.pid}-x").symlink_to(outside)
  bin_tarball._remove_stale_scratch(str(data_dir))  # pylint: disable=protected-access
  assert contents() == {"precious": "precious\n"}
  assert os.listdir(data_dir) == []
