"""What a binary reads is checked before it writes: a URL of a filesystem TensorFlow does not
have (any path flag or argument of any binary), a folder where a run keeps one of its files,
a --flagfile that is not text, --init_from naming nothing, a --data_dir without the data.
Each is one line, exit 2, and the run folder is left as it was (a new one is not made)."""

import inspect
import os

from absl import flags
import pytest

from harness.command_line import cli
from tests import helpers
from tests import test_flag_ranges

TRAINERS = pytest.mark.parametrize("trainer", ["strategies.train", "compat_v1.train"])
QUICK = ("--dataset=synthetic", "--batch_size=2", "--max_steps=1")


def _path_flags(module):
  fv = flags.FlagValues()
  module.define_flags(fv)
  return [name for name in sorted(fv) if fv[name].parser.flag_type() == "path"]


@pytest.mark.parametrize("binary", test_flag_ranges.BINARIES)
def test_every_path_flag_refuses_a_scheme_tensorflow_lacks(binary, capsys):
  module = test_flag_ranges._binary(binary)  # pylint: disable=protected-access
  takes_args = len(inspect.signature(module.main).parameters) == 2
  ran = []
  for name in _path_flags(module):
    status = cli.call(module.define_flags, lambda *a: ran.append(a),
                      [f"--{name}=hdfs://namenode/run"], takes_args=takes_args)
    lines = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and not ran, (binary, name)
    assert lines[-1].startswith(f"error: --{name}=hdfs://namenode/run: TensorFlow has no "
                                "filesystem for hdfs:// here (it has "), lines
    # A scheme it has is taken as given.
    assert cli.call(module.define_flags, lambda *a: ran.append(a),
                    [f"--{name}=ram://run"], takes_args=takes_args) == 0 and ran
    ran.clear()


def test_the_trainers_path_flags_are_the_ones_a_user_has():
  binary = test_flag_ranges._binary  # pylint: disable=protected-access
  assert _path_flags(binary("strategies.train")) == ["data_dir", "init_from", "train_dir"]
  assert _path_flags(binary("compat_v1.eval")) == ["checkpoint_dir", "data_dir", "eval_dir"]


@pytest.mark.parametrize("binary, args, expected", [
    ("equivalence.checkpoints", ("hdfs://nn/a", "/tmp/b"), "error: checkpoint hdfs://nn/a: "),
    ("porting.__main__", ("--port=tests.bn_momentum_port:port", "--start_from=s3://b/x",
                          "compare"), "error: --start_from=s3://b/x: "),
    ("porting.__main__", ("--port=tests.bn_momentum_port:port", "tf1_to_tf2", "/tmp/a",
                          "foo://x"), "error: the path foo://x: "),
    ("benchmarks.throughput", ("--out=gs://bucket/results",), "error: --out=gs://bucket/"
     "results: give a local folder"),
])
def test_paths_among_arguments_are_checked_too(binary, args, expected, tmp_path):
  result = helpers.call(binary, *args)
  assert result.returncode == 2 and helpers.error_line(result).startswith(expected), \
      result.stderr[-1500:]


@TRAINERS
@pytest.mark.parametrize("name", [".lock", "run_config.json", "flags.txt"])
def test_a_folder_where_a_run_keeps_a_file_is_one_line(trainer, name, tmp_path):
  (tmp_path / name).mkdir()  # before: IsADirectoryError, a traceback
  result = helpers.call(trainer, *QUICK, f"--train_dir={tmp_path}")
  helpers.check_one_line(result, f"{tmp_path / name} is a folder (or not a regular file) "
                                 "where the run keeps a file of that name: move it away")
  assert os.listdir(tmp_path) == [name]


def test_a_folder_at_a_file_is_refused_on_any_filesystem():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from cifar10.errors import UsageError  # pylint: disable=g-import-not-at-top
  from harness.folders import run_folder  # pylint: disable=g-import-not-at-top
  tf.io.gfile.makedirs("ram://inputs_first/flags.txt/inside")
  with pytest.raises(UsageError, match="is a folder"):
    run_folder.write_atomically("ram://inputs_first/flags.txt", "text")


@TRAINERS
def test_a_flagfile_that_is_not_utf8_is_one_line(trainer, tmp_path):
  flagfile = tmp_path / "run.flags"
  flagfile.write_bytes(b"--max_steps=5\n--train_dir=/tmp/x\xff\xfe\n")
  result = helpers.call(trainer, f"--flagfile={flagfile}")
  helpers.check_one_line(result, f"--flagfile={flagfile} is not UTF-8 text (byte 0xff at "
                                 "offset 32 of a file it reads)")


@TRAINERS
@pytest.mark.parametrize("bad", ["init_from", "data_dir"])
def test_a_start_that_fails_on_its_input_writes_nothing(trainer, bad, tmp_path):
  """Before: .lock, flags.txt and run_config.json were left in the new folder, and the
  corrected command met a record it had not asked for."""
  train_dir = tmp_path / "run"
  empty = tmp_path / "empty"
  empty.mkdir()
  args = {"init_from": (*QUICK, f"--init_from={tmp_path / 'nothing'}"),
          "data_dir": ("--dataset=cifar10_bin", f"--data_dir={empty}", "--batch_size=2",
                       "--max_steps=1")}[bad]
  result = helpers.call(trainer, *args, f"--train_dir={train_dir}")
  helpers.check_one_line(result, "no checkpoint at" if bad == "init_from"
                         else "missing CIFAR-10 file")
  assert not train_dir.exists()


@pytest.mark.parametrize("evaluator", ["strategies.eval", "compat_v1.eval"])
def test_an_evaluation_that_fails_on_its_input_writes_nothing(evaluator, tmp_path):
  """Before: the eval dir (and a --checkpoint_dir naming nothing) were made first."""
  empty = tmp_path / "empty"
  empty.mkdir()
  missing = tmp_path / "no_run"
  helpers.check_one_line(helpers.call(evaluator, "--dataset=synthetic", "--run_once",
                                      f"--checkpoint_dir={missing}"), "no checkpoint at")
  assert not missing.exists()
  helpers.check_one_line(helpers.call(evaluator, "--dataset=cifar10_bin", f"--data_dir={empty}",
                                      "--run_once", f"--checkpoint_dir={tmp_path}"),
                         "missing CIFAR-10 file")
  assert sorted(os.listdir(tmp_path)) == ["empty"]


@pytest.mark.parametrize("evaluator", ["strategies.eval", "compat_v1.eval"])
@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_a_waiting_evaluator_says_so_and_ctrl_c_there_is_a_clean_end(evaluator, tmp_path,
                                                                     monkeypatch):
  """Before: silence while it waited, and Ctrl-C was `error: interrupted`, exit 130."""
  from harness.folders import polling  # pylint: disable=g-import-not-at-top
  train_dir = tmp_path / "run"
  assert helpers.call("strategies.train", *QUICK, f"--train_dir={train_dir}").returncode == 0

  def interrupted(seconds):
    raise KeyboardInterrupt

  monkeypatch.setattr(polling.time, "sleep", interrupted)
  result = helpers.call(evaluator, "--dataset=synthetic", "--num_examples=16",
                        f"--checkpoint_dir={train_dir}", "--eval_interval_secs=30")
  assert result.returncode == 0, result.stderr[-2000:]
  assert "precision @ 1 = " in result.stdout
  assert f"Waiting for a new checkpoint in {train_dir} (looking every 30 s" in result.stderr
  assert "Ctrl-C: stopped waiting for checkpoints" in result.stderr
  assert "error" not in result.stderr.splitlines()[-1]


@pytest.mark.parametrize("command", [
    ("strategies.export", "--checkpoint_dir=/nonexistent/run", "--export_dir=/tmp/unused"),
    ("compat_v1.export", "--checkpoint_dir=/nonexistent/run", "--export_dir=/tmp/unused"),
    ("strategies.eval", "--checkpoint_dir=/nonexistent/run", "--run_once"),
    ("compat_v1.eval", "--checkpoint_dir=/nonexistent/run", "--run_once"),
    ("strategies.predict", "--model=/nonexistent/run", "/tmp/unused.png"),
])
def test_a_missing_local_path_is_refused_before_tensorflow_is_imported(command, tmp_path):
  # Before: each imported TensorFlow first (~4 s on 2 cores, ~10 s on a busy box) to say
  # that a mistyped path holds nothing. A `tensorflow` that refuses to be imported stands in
  # for the real one at the boundary.
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  (tmp_path / "tensorflow").mkdir()
  (tmp_path / "tensorflow" / "__init__.py").write_text(
      "raise ImportError('tensorflow was imported')\n")
  result = subprocess.run([sys.executable, "-m", *command], capture_output=True, text=True,
                          timeout=60, cwd="/", env=dict(
                              helpers.env(), PYTHONPATH=f"{tmp_path}:{helpers.REPO}"))
  line = helpers.check_one_line(result, "/nonexistent/run")
  assert "no checkpoint at '/nonexistent/run'" in line or "no such folder or file" in line
