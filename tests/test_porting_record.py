"""The TF1 side recorded where it runs and compared where the port runs (porting.record):
`python -m porting record` in the TF1 code's environment, `compare --record` in the port's.
Measured once across versions (MIGRATION.md): TensorFlow 2.15.1 + Keras 2.15 recording, 2.21
comparing, the same reports as records made in 2.21. Here both ends run in this TensorFlow,
on ram:// (every file through tf.io.gfile)."""

import functools
import os
import re
import shlex
import uuid

import pytest
import tensorflow as tf

import porting
from porting import record
from tests import dropout_adam_port as drop
from tests import helpers
from tests import slim_style_port as slim

pytestmark = pytest.mark.filterwarnings("ignore:`tf.layers.", "ignore:`layer.apply`")


def _folder():
  return f"ram://record-{uuid.uuid4().hex}"


def test_a_recorded_tf1_side_replays_as_the_towers_did():
  path = _folder()
  written = record.write(drop.port(), drop.batches(2), path, replicas=2, steps=3)
  assert written == f"{path}/record.json"
  assert sorted(tf.io.gfile.listdir(path)) == ["record.json", "regularization.npz", "start.npz",
                                               "step-0.npz", "step-1.npz", "step-2.npz"]
  report = porting.compare(drop.port(), record=path, steps=3)
  # Dropout + Adam from the recorded weights on the recorded batches: the same bits.
  assert report.equal, report.text()
  assert len(report.rows) == 84 and report.replicas == 2
  assert f"  TF1 side recorded on: {report.machine.line()}" in report.text().splitlines()
  assert report.tf1.facts["random_draws"] == {i: [("uniform", (4, drop.HIDDEN))]
                                              for i in range(2)}


@pytest.mark.slow  # a second whole comparison; the replay's bits are held above
def test_a_wrong_port_against_a_record_is_named_as_against_the_towers():
  path = _folder()
  record.write(slim.port(2), slim.batches(2), path, replicas=2, steps=2)
  report = porting.compare(
      slim.port(2, replica_loss=functools.partial(slim.replica_loss, penalty=False)),
      record=path, steps=2)
  assert any(h.startswith("an L2 penalty is in the TF1 loss only") for h in report.hints), (
      report.hints)


def test_a_record_is_refused_in_one_line_where_it_cannot_be_what_it_says():
  path = _folder()
  record.write(drop.port(), drop.batches(1), path, replicas=1, steps=1)
  refusals = [
      (lambda: record.write(drop.port(), drop.batches(1), path, replicas=1, steps=1),
       f"the record folder {path} is not empty: give a new one"),
      (lambda: porting.compare(drop.port(), record=path, steps=2),
       f"the record {path} holds 1 step(s); compare at most that many"),
      (lambda: porting.compare(drop.port(), record=path, start_from="/x/model.ckpt"),
       "give start_from or record, not both"),
  ]
  unfinished = _folder()
  tf.io.gfile.makedirs(unfinished)
  with tf.io.gfile.GFile(f"{unfinished}/start.npz", "wb") as f:
    f.write(b"")
  refusals.append((lambda: porting.compare(drop.port(), record=unfinished),
                   f"{unfinished} holds no record (record.json is missing: written last, so "
                   "the recording did not finish)"))
  for call, expected in refusals:
    with pytest.raises(porting.PortError) as raised:
      call()
    assert str(raised.value).startswith(expected), str(raised.value)


def test_the_command_line_records_and_compares_a_record(capsys):
  path = _folder()
  port = "--port=tests.dropout_adam_port:port"
  result = helpers.call("porting.__main__", port, "--batches=tests.dropout_adam_port:batches",
                        "--replicas=2", "--steps=2", "record", path)
  assert result.returncode == 0, result.stderr
  assert capsys.readouterr().out.strip() == f"wrote {path}/record.json"
  result = helpers.call("porting.__main__", port, f"--record={path}", "--steps=2", "compare")
  printed = capsys.readouterr().out
  assert result.returncode == 0, result.stderr
  assert printed.rstrip().endswith("\nEQUAL") and "TF1 side recorded on: " in printed
  result = helpers.call("porting.__main__", port, "--batches=tests.dropout_adam_port:batches",
                        "record")
  helpers.check_one_line(result, "record takes one path: the folder to record the TF1 side in")


def test_migrations_record_commands_run_as_written(tmp_path, capsys):
  with open(os.path.join(helpers.REPO, "MIGRATION.md"), encoding="utf-8") as f:
    section = f.read().split("## The TF1 side recorded where it runs")[1].split("\n## ")[0]
  commands = re.findall(r"```sh\n(.*?)```", section, re.DOTALL)[0].strip().splitlines()
  assert len(commands) == 2
  folder = str(tmp_path / "port_record")
  for command in commands:
    result = helpers.call("porting.__main__",
                          *shlex.split(command.replace("/tmp/port_record", folder))[3:])
    assert result.returncode == 0, result.stderr
  assert capsys.readouterr().out.rstrip().endswith("\nEQUAL")


def test_a_link_planted_as_the_record_folder_is_refused(tmp_path):
  elsewhere = tmp_path / "elsewhere"
  elsewhere.mkdir()
  os.symlink(elsewhere, tmp_path / "record")
  with pytest.raises(porting.PortError) as raised:
    record.write(drop.port(), drop.batches(1), str(tmp_path / "record"), replicas=1, steps=1)
  assert str(raised.value).startswith(f"a symbolic link is planted at {tmp_path / 'record'}: "
                                      "refused")
  assert not list(elsewhere.iterdir())


def test_a_recording_stopped_midway_leaves_no_record_and_the_rerun_works(tmp_path, capsys):
  # Before: the files were written in place; a kill left a partial folder, and the same
  # command then refused it ("is not empty") until the user deleted it.
  path = str(tmp_path / "record")
  (tmp_path / ".record.tmp-0123456789ab").mkdir()  # killed while writing
  (tmp_path / ".record.tmp-0123456789ab" / "start.npz").write_bytes(b"half")
  os.mkdir(path)  # killed while moving it file by file (object storage): no record.json yet
  (tmp_path / "record" / "start.npz").write_bytes(b"moved")
  (tmp_path / "record" / "step-0.npz").write_bytes(b"moved")
  assert record.write(drop.port(), drop.batches(1), path, replicas=1, steps=1) == (
      f"{path}/record.json")
  assert sorted(os.listdir(tmp_path)) == ["record"]
  assert sorted(os.listdir(path)) == ["record.json", "regularization.npz", "start.npz",
                                      "step-0.npz"]
  said = capsys.readouterr().err
  assert f"removed {tmp_path}/.record.tmp-0123456789ab: left by a recording stopped" in said
  assert f"had moved into {path} (no record.json)" in said
  assert porting.compare(drop.port(), record=path, steps=1).equal


def test_a_record_that_cannot_be_written_is_the_kits_line_naming_the_folder(tmp_path):
  (tmp_path / "file").write_text("")
  for path, expected in (
      (str(tmp_path / "file"), f"the record folder {tmp_path}/file is a file: give a folder"),
      (str(tmp_path / "file" / "record"), f"cannot write {tmp_path}/file/record: ")):
    result = helpers.call("porting.__main__", "--port=tests.dropout_adam_port:port",
                          "--batches=tests.dropout_adam_port:batches", "--replicas=1",
                          "--steps=1", "record", path)
    line = helpers.check_one_line(result, expected)
    assert "the port raised" not in line
  assert sorted(os.listdir(tmp_path)) == ["file"]


def test_replicas_given_against_a_record_of_others_is_one_line():
  """compare --record takes the record's replicas: --replicas=1 against a record of 2 ran
  2 against 2 and said nothing."""
  path = _folder()
  record.write(drop.port(), drop.batches(2), path, replicas=2, steps=1)
  port = "--port=tests.dropout_adam_port:port"
  helpers.check_one_line(
      helpers.call("porting.__main__", port, f"--record={path}", "--replicas=1", "compare"),
      f"--replicas=1, but the record {path} holds 2 tower(s): a record is compared at its own "
      "replicas; drop --replicas")
  same = helpers.call("porting.__main__", port, f"--record={path}", "--replicas=2",
                      "--steps=1", "compare")
  assert same.returncode == 0, same.stdout + same.stderr
