"""Resume never silently starts over: a damaged, missing or moved checkpoint index, a lost
newest `.index`, debris of interrupted saves, and --max_checkpoints_to_keep across restarts.

Each trainer trains 3 steps (a checkpoint every step); the folder is damaged; the run goes on
to step 4 and must end with the bits of an uninterrupted 4-step run, having said where it
resumed. The loops run in-process (tests.helpers.train_tf2 / train_v1).
"""

import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from cifar10 import checkpoints
from cifar10 import config
from harness.folders import recovery
from tests import helpers

pytestmark = pytest.mark.slow
TRAINERS = {"tf2": (helpers.train_tf2, "ckpt"), "v1": (helpers.train_v1, "model.ckpt")}


def _config(train_dir, max_steps, **kwargs):
  return config.TrainConfig(train_dir=str(train_dir), max_steps=max_steps, batch_size=4,
                            seed=5, dataset="synthetic", save_checkpoint_steps=1, **kwargs)


@pytest.fixture(name="runs", scope="module")
def fixture_runs(tmp_path_factory):
  """{trainer: (3-step folder, 4-step reference state)}."""
  out = {}
  for name, (train, _) in TRAINERS.items():
    root = tmp_path_factory.mktemp(name)
    assert train(_config(root / "three", 3)) == 3
    assert train(_config(root / "four", 4)) == 4
    out[name] = (root / "three", checkpoints.read(str(root / "four")))
  return out


def _assert_same(state, expected):
  assert state.global_step == expected.global_step
  for name in expected.weights:
    np.testing.assert_array_equal(state.weights[name], expected.weights[name], err_msg=name)
    np.testing.assert_array_equal(state.averages[name], expected.averages[name], err_msg=name)


def _damage(train_dir, how, prefix):
  index = train_dir / "checkpoint"
  if how == "deleted":
    index.unlink()
  elif how == "empty":
    index.write_text("")
  elif how == "garbage":
    index.write_bytes(b"\x00\xff not a checkpoint state {{{")
  elif how == "dangling":
    index.write_text(f'model_checkpoint_path: "{prefix}-99"\n')
  elif how == "newest_index_deleted":
    (train_dir / f"{prefix}-3.index").unlink()
  return 2 if how == "newest_index_deleted" else 3


DAMAGES = ["deleted", "empty", "garbage", "dangling", "newest_index_deleted"]


@pytest.mark.parametrize("trainer", sorted(TRAINERS))
@pytest.mark.parametrize("how", DAMAGES)
def test_every_damaged_index_is_recovered_to_the_newest_complete_checkpoint(runs, trainer, how,
                                                                           tmp_path):
  # Where a run resumes is decided by harness.folders.recovery.recover (the driver's, before any
  # loop runs); the resumes below show that each trainer goes on from there to the bit.
  _, prefix = TRAINERS[trainer]
  train_dir = tmp_path / "run"
  shutil.copytree(runs[trainer][0], train_dir)
  resumed_at = _damage(train_dir, how, prefix)
  newest, keep = recovery.recover(str(train_dir))
  assert newest == f"{train_dir}/{prefix}-{resumed_at}"
  assert keep[-1] == newest and len(keep) == resumed_at
  assert tf.train.latest_checkpoint(str(train_dir)) == newest  # the index is rewritten


@pytest.mark.parametrize("trainer", sorted(TRAINERS))
@pytest.mark.parametrize("how", ["garbage", "newest_index_deleted"])
def test_a_damaged_index_resumes_from_the_newest_complete_checkpoint(runs, trainer, how,
                                                                      tmp_path, caplog):
  train, prefix = TRAINERS[trainer]
  three, expected = runs[trainer]
  train_dir = tmp_path / "run"
  shutil.copytree(three, train_dir)
  resumed_at = _damage(train_dir, how, prefix)
  caplog.set_level("INFO")
  assert train(_config(train_dir, 4)) == 4
  assert f"Resumed from {train_dir}/{prefix}-{resumed_at} at step {resumed_at}" in caplog.text
  _assert_same(checkpoints.read(str(train_dir)), expected)


@pytest.mark.parametrize("trainer", sorted(TRAINERS))
def test_a_moved_folder_resumes_from_its_own_files(runs, trainer, tmp_path, caplog):
  train, prefix = TRAINERS[trainer]
  three, expected = runs[trainer]
  shutil.copytree(three, tmp_path / "old")
  os.rename(tmp_path / "old", tmp_path / "new")  # the old path no longer exists
  index = (tmp_path / "new" / "checkpoint").read_text()
  assert str(tmp_path) not in index and f'"{prefix}-3"' in index  # relative paths
  caplog.set_level("INFO")
  assert train(_config(tmp_path / "new", 4)) == 4
  assert f"Resumed from {tmp_path}/new/{prefix}-3 at step 3" in caplog.text
  _assert_same(checkpoints.read(str(tmp_path / "new")), expected)


@pytest.mark.parametrize("trainer", sorted(TRAINERS))
def test_checkpoints_are_kept_to_the_limit_across_restarts_and_debris_is_removed(trainer,
                                                                                  tmp_path):
  train, prefix = TRAINERS[trainer]
  for steps in (2, 4):
    assert train(_config(tmp_path, steps, max_checkpoints_to_keep=2)) == steps
  (tmp_path / f"{prefix}-9_temp").mkdir()  # a save killed mid-way, as both trainers leave it
  (tmp_path / f"{prefix}-9_temp" / "part-00000-of-00001.data-00000-of-00001").write_text("x")
  (tmp_path / "checkpoint.tmp1f2e").write_text("x")
  (tmp_path / f"{prefix}-9.meta.tmp3c4d").write_text("x")
  assert train(_config(tmp_path, 6, max_checkpoints_to_keep=2)) == 6
  names = sorted(os.listdir(tmp_path))
  assert sorted({n.split(".")[0] if n.startswith("ckpt") else n.split(".data")[0].split(
      ".index")[0].split(".meta")[0] for n in names if "ckpt-" in n}) == [
          f"{prefix}-5", f"{prefix}-6"], names
  assert not [n for n in names if "_temp" in n or ".tmp" in n], names


def _checkpoint_steps(train_dir):
  return sorted(step for step, prefix in checkpoints.steps(str(train_dir))
                if checkpoints.is_complete(prefix))


@pytest.mark.parametrize("trainer", sorted(TRAINERS))
def test_a_kill_between_the_index_and_the_delete_keeps_the_flags_count(trainer, tmp_path,
                                                                        monkeypatch):
  """A v1 Saver writes the index before it deletes the oldest checkpoint: a SIGKILL between
  the two left that checkpoint for ever (5 kept of 3 after two such kills). Here every save
  of the first run is killed there (its deletes never happen); the next start keeps exactly
  --max_checkpoints_to_keep."""
  train, prefix = TRAINERS[trainer]
  if trainer == "v1":
    monkeypatch.setattr(tf.compat.v1.train.Saver, "_MaybeDeleteOldCheckpoints",
                        lambda self, meta_graph_suffix="meta": None)
  else:  # the TF2 manager deletes before it writes the index; the same state, made by hand
    monkeypatch.setattr(tf.train.CheckpointManager, "_sweep", lambda self: None)
  assert train(_config(tmp_path, 5, max_checkpoints_to_keep=3)) == 5
  assert _checkpoint_steps(tmp_path) == [1, 2, 3, 4, 5]  # what the kills left
  monkeypatch.undo()
  assert train(_config(tmp_path, 6, max_checkpoints_to_keep=3)) == 6
  assert _checkpoint_steps(tmp_path) == [4, 5, 6]
  listed = tf.train.get_checkpoint_state(str(tmp_path)).all_model_checkpoint_paths
  assert [os.path.basename(p) for p in listed] == [f"{prefix}-{s}" for s in (4, 5, 6)]
