"""The kit writes as the trainers do (porting.outputs; issue 36, items 1, 2, 14): never through
a planted link, never over a checkpoint or into a run folder's `checkpoint` index unless
asked, never half. Before: a link at an output file had the file it names overwritten (a
dangling one created its target); an existing prefix was overwritten; tf2_to_tf1 into the
team's folder rewrote its index to name only the conversion; a failed write read "the port
raised PermissionDeniedError"."""

import os

import pytest
import tensorflow as tf

import porting
from porting import outputs
from tests import bn_momentum_port as m
from tests import helpers
from tests import kills

pytestmark = pytest.mark.filterwarnings("ignore:`tf.layers.")


def _team_folder(tmp_path):
  """The team's TF1 run folder (model.ckpt-2, its index) and a TF2 conversion of it."""
  data = m.batches(1, steps=2)
  team = tmp_path / "team"
  m.train_tf1(str(team / "model.ckpt-2"), data)
  tf2 = porting.tf1_to_tf2(m.port(), str(team / "model.ckpt-2"), str(tmp_path / "tf2" / "ckpt"),
                           data[0])
  return team, tf2, data


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_a_conversion_into_the_teams_folder_leaves_its_index_and_checkpoints_alone(tmp_path):
  team, tf2, data = _team_folder(tmp_path)
  index = (team / "checkpoint").read_text()
  path = porting.tf2_to_tf1(m.port(), tf2, str(team / "converted.ckpt"), data[0])
  assert path == str(team / "converted.ckpt")
  assert (team / "checkpoint").read_text() == index  # model.ckpt-2 is still the latest
  assert tf.train.latest_checkpoint(str(team)).endswith("model.ckpt-2")
  assert sorted(p.name for p in team.iterdir() if p.name.startswith("converted")) == [
      "converted.ckpt.data-00000-of-00001", "converted.ckpt.index"]
  assert not [p for p in team.iterdir() if ".tmp-" in p.name]
  # An existing checkpoint is not written over, but on request; the team's own neither.
  for prefix in ("converted.ckpt", "model.ckpt-2"):
    with pytest.raises(porting.PortError) as raised:
      porting.tf2_to_tf1(m.port(), tf2, str(team / prefix), data[0])
    assert str(raised.value) == (f"a checkpoint is already at {team / prefix} ({prefix}.data-"
                                 "00000-of-00001): give another prefix, or --overwrite to "
                                 "replace it")
  before = (team / "converted.ckpt.index").stat().st_mtime_ns
  porting.tf2_to_tf1(m.port(), tf2, str(team / "converted.ckpt"), data[0], overwrite=True)
  assert (team / "converted.ckpt.index").stat().st_mtime_ns != before
  with pytest.raises(porting.PortError):
    porting.tf1_to_tf2(m.port(), str(team / "model.ckpt-2"), tf2, data[0])


@pytest.mark.parametrize("dangling", [False, True])
def test_a_link_planted_at_an_output_file_is_refused_and_its_target_untouched(tmp_path,
                                                                             dangling):
  target = tmp_path / "elsewhere.txt"
  if not dangling:
    target.write_text("the team's file")
  out = tmp_path / "out"
  out.mkdir()
  os.symlink(target, out / "ckpt.index")
  with pytest.raises(porting.PortError) as raised:
    outputs.written(str(out / "ckpt"), lambda p: pytest.fail("written through a link"))
  assert str(raised.value).startswith(f"a symbolic link is planted at {out / 'ckpt.index'}: "
                                      "refused")
  assert target.exists() != dangling and (dangling or target.read_text() == "the team's file")


def test_a_write_that_fails_leaves_nothing_at_the_prefix(tmp_path):
  def half(temporary):
    with tf.io.gfile.GFile(temporary + ".data-00000-of-00001", "w") as f:
      f.write("half")
    raise tf.errors.ResourceExhaustedError(None, None, "No space left on device")

  with pytest.raises(porting.PortError) as raised:
    outputs.written(str(tmp_path / "ckpt"), half)
  assert str(raised.value) == (f"cannot write the checkpoint {tmp_path / 'ckpt'}: No space left "
                               "on device")
  assert os.listdir(tmp_path) == []


def test_a_read_only_folder_is_one_line_naming_the_checkpoint(tmp_path, capsys):
  if os.geteuid() == 0:  # root writes anyway: a file where the folder should be instead
    blocked = tmp_path / "file"
    blocked.write_text("")
  else:
    blocked = tmp_path / "ro"
    blocked.mkdir(mode=0o500)
  team, tf2, _ = _team_folder(tmp_path)
  del team
  result = helpers.call("porting.__main__", "--port=tests.bn_momentum_port:port",
                        "--batches=tests.bn_momentum_port:batches", "tf2_to_tf1", tf2,
                        str(blocked / "model.ckpt"))
  line = helpers.check_one_line(result, f"cannot write the checkpoint {blocked / 'model.ckpt'}")
  assert "the port raised" not in line
  capsys.readouterr()


def _stopping(at):
  return kills.Stopping(outputs.Ops, at)


def _checkpoint(values):
  return tf.train.Checkpoint(**{k: tf.Variable(v) for k, v in values.items()})


def _state(prefix):
  """{name: value} of the checkpoint at `prefix`, None where there is none (no .index)."""
  if not tf.io.gfile.exists(prefix + ".index"):
    return None
  # (load_checkpoint would take a ram:// prefix for a folder) A shard mixed from two fails.
  reader = tf.compat.v1.train.NewCheckpointReader(prefix)
  return {k.split("/")[0]: float(reader.get_tensor(k))
          for k in reader.get_variable_to_shape_map() if "VARIABLE_VALUE" in k}


@pytest.mark.parametrize("where", ["local", "ram"])
def test_an_overwrite_stopped_at_any_step_is_old_none_or_new_then_finished(
    tmp_path, monkeypatch, where):
  # Before: each .data was renamed over the old one, the .index last: a kill between left new
  # data under the old index (DataLossError on every read) and the new index under a
  # temporary name.
  root = str(tmp_path) if where == "local" else f"ram://{tmp_path.name}-outputs"
  old, new = {"a": 1.0, "b": 2.0}, {"a": 10.0, "b": 20.0}
  full = _stopping(None)
  monkeypatch.setattr(outputs, "OPS", full)
  _checkpoint(old).write(f"{root}/probe/ckpt")
  outputs.written(f"{root}/probe/ckpt", _checkpoint(new).write, overwrite=True)
  assert _state(f"{root}/probe/ckpt") == new and full.steps >= 5
  for at in range(full.steps):
    prefix = f"{root}/at-{at}/ckpt"
    _checkpoint(old).write(prefix)
    monkeypatch.setattr(outputs, "OPS", _stopping(at))
    with pytest.raises(kills.Killed):
      outputs.written(prefix, _checkpoint(new).write, overwrite=True)
    assert _state(prefix) in (old, None, new), at
    monkeypatch.setattr(outputs, "OPS", _stopping(None))
    outputs.recover(prefix)  # what the next conversion to the prefix does first
    assert _state(prefix) == (old if at == 0 else new), at
    assert sorted(tf.io.gfile.listdir(f"{root}/at-{at}")) == [
        "ckpt.data-00000-of-00001", "ckpt.index"], at
