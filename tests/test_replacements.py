"""Nothing lost when a replacement is stopped midway: `--overwrite` of an export version and
the files a killed checkpoint rotation leaves. Each replacement is stopped at every one of its
filesystem steps as a SIGKILL stops it (that step and every later one never happen, cleanup
included), on a local disk and on ram://; at that instant the version folder must hold the old
model whole, no model, or the new one whole, and the next export must finish the job."""

import os
import uuid

import pytest
import tensorflow as tf

from harness.folders import export_folder
from harness.folders import recovery
from tests import kills

OLD = {"saved_model.pb": "old pb", "variables/variables.index": "old index",
       "variables/variables.data-00000-of-00001": "old data"}
NEW = {"saved_model.pb": "new pb", "variables/variables.index": "new index",
       "variables/variables.data-00000-of-00001": "new data",
       "assets/vocab.txt": "new asset"}


def _stopping(at):
  return kills.Stopping(export_folder.Ops, at)


def _write(folder, files):
  for name, text in files.items():
    tf.io.gfile.makedirs(os.path.dirname(os.path.join(folder, name)))
    with tf.io.gfile.GFile(os.path.join(folder, name), "w") as f:
      f.write(text)


def _model(folder):
  """The files of `folder` ({relative name: text}), or None where it is no model (no
  saved_model.pb: TensorFlow Serving and tf.saved_model.load read that first)."""
  if not tf.io.gfile.exists(os.path.join(folder, "saved_model.pb")):
    return None
  found = {}
  for root, _, names in tf.io.gfile.walk(folder):
    for name in names:
      with tf.io.gfile.GFile(os.path.join(root, name)) as f:
        found[os.path.relpath(os.path.join(root, name), folder)] = f.read()
  return found


def _export(export_dir, files):
  with export_folder.exported(export_dir, 7, overwrite=True) as folder:
    _write(folder, files)


def _roots(tmp_path):
  return [str(tmp_path / "local"), f"ram://{uuid.uuid4().hex}/exports"]


@pytest.mark.parametrize("where", ["local", "ram"])
def test_an_overwrite_stopped_at_any_step_is_old_absent_or_new_and_then_finished(
    tmp_path, monkeypatch, where):
  full = _stopping(None)
  monkeypatch.setattr(export_folder, "OPS", full)
  root = _roots(tmp_path)[where == "ram"]
  _write(f"{root}/probe/7", OLD)
  _export(f"{root}/probe", NEW)
  assert _model(f"{root}/probe/7") == NEW
  assert full.steps >= 4
  for at in range(full.steps):
    export_dir = f"{root}/at-{at}"
    _write(f"{export_dir}/7", OLD)
    monkeypatch.setattr(export_folder, "OPS", _stopping(at))
    with pytest.raises(kills.Killed):
      _export(export_dir, NEW)
    assert _model(f"{export_dir}/7") in (OLD, None, NEW), at
    # What the next export into the folder does first (of any version: here, 8).
    monkeypatch.setattr(export_folder, "OPS", _stopping(None))
    with export_folder.exported(export_dir, 8, overwrite=False) as folder:
      _write(folder, NEW)
    if at == 0:  # stopped before the new model was marked whole: the old one stays
      assert _model(f"{export_dir}/7") == OLD
      export_folder.recover(export_dir, 7)  # an export of 7 removes what that one left
    else:
      assert _model(f"{export_dir}/7") == NEW, at
    assert sorted(n.rstrip("/") for n in tf.io.gfile.listdir(export_dir)) == ["7", "8"], at


def test_a_stop_before_the_model_is_whole_leaves_the_old_and_its_debris_goes(tmp_path):
  export_dir = str(tmp_path / "exports")
  _write(f"{export_dir}/7", OLD)
  _write(f"{export_dir}/.tmp-7-0123456789ab", {"variables/variables.index": "half"})
  export_folder.recover(export_dir, 7)
  assert os.listdir(export_dir) == ["7"] and _model(f"{export_dir}/7") == OLD


@pytest.mark.parametrize("where", ["local", "ram"])
def test_a_rotation_killed_inside_its_delete_leaves_nothing_after_a_start(tmp_path, where):
  # A v1 Saver deletes the oldest checkpoint's .meta, .index, then its data: a kill between
  # left the data (8.3 MB of model.ckpt-56) beside the kept ones for ever.
  train_dir = _roots(tmp_path)[where == "ram"]
  tf.io.gfile.makedirs(train_dir)
  checkpoint = tf.train.Checkpoint(v=tf.Variable([1.0, 2.0]))
  for step in (57, 58):
    checkpoint.write(f"{train_dir}/model.ckpt-{step}")
  _write(train_dir, {"model.ckpt-56.data-00000-of-00001": "x" * 100,
                     "model.ckpt-59.meta": "a save killed before its checkpoint"})
  newest, keep = recovery.recover(train_dir, max_to_keep=2)
  assert newest == f"{train_dir}/model.ckpt-58" and len(keep) == 2
  assert sorted(tf.io.gfile.listdir(train_dir)) == [
      "checkpoint", "model.ckpt-57.data-00000-of-00001", "model.ckpt-57.index",
      "model.ckpt-58.data-00000-of-00001", "model.ckpt-58.index"]


def test_the_version_folder_is_printed_in_one_write():
  # print() wrote the path and its newline apart: unbuffered, a log line on stderr between
  # the two spliced both into one line under `2>&1` (2 of 15 compat_v1.export runs).
  class Recorder:
    def __init__(self):
      self.writes = []

    def write(self, text):
      self.writes.append(text)

    def flush(self):
      pass
  out = Recorder()
  export_folder.say("/tmp/models/200", out)
  assert out.writes == ["/tmp/models/200\n"]
