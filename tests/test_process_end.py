"""A binary's process ends with its last line: no interpreter finalization after it.

After `Done:` or `stopped:` Python's finalization (TensorFlow's and Keras' modules freed
object by object, TensorFlow's C++ destructors) kept the prompt away 0.7 s on a quiet 2-core
box and 1.4 s under load (harness.command_line.process_end). Here a finalizer planted in the
child would hold its exit for two minutes if the interpreter finalized.
"""

import subprocess
import sys
import time

import pytest

from tests import forked
from tests import helpers

_SLOW_FINALIZER = """
import time
class _Slow:
  def __del__(self):
    time.sleep(120)
keep = _Slow()
"""


def _planted(tmp_path):
  site = tmp_path / "site"
  site.mkdir()
  (site / "sitecustomize.py").write_text(_SLOW_FINALIZER)
  return dict(helpers.env(), PYTHONPATH=f"{site}:{helpers.REPO}")


def test_an_error_ends_the_process_with_its_line_and_status(tmp_path):
  not_a_folder = tmp_path / "file"
  not_a_folder.write_text("x")
  start = time.time()
  result = subprocess.run([sys.executable, "-m", "strategies.train", "--dataset=synthetic",
                           f"--train_dir={not_a_folder}"], env=_planted(tmp_path),
                          cwd=tmp_path, capture_output=True, text=True, timeout=240)
  assert result.returncode == 2, result.stderr
  assert result.stderr.strip().splitlines()[-1].startswith("error: "), result.stderr
  assert time.time() - start < 60, "the planted finalizer ran: the interpreter finalized"


@pytest.mark.slow
def test_a_finished_run_ends_after_done_with_its_files_whole(tmp_path):
  train_dir = tmp_path / "run"
  start = time.time()
  result = subprocess.run([sys.executable, "-m", "strategies.train", "--dataset=synthetic",
                           "--max_steps=2", "--batch_size=4", "--save_summaries_steps=1",
                           f"--train_dir={train_dir}"], env=_planted(tmp_path), cwd=tmp_path,
                          capture_output=True, text=True, timeout=240)
  assert result.returncode == 0, result.stderr
  assert time.time() - start < 90, "the planted finalizer ran: the interpreter finalized"
  assert "Done: step 2," in result.stderr.strip().splitlines()[-1], result.stderr
  # Written whole before the end: the summaries of both steps, the checkpoint, the log.
  from equivalence import runs  # pylint: disable=g-import-not-at-top
  assert runs.summaries(str(train_dir))["learning_rate"].keys() == {0, 1}
  assert (train_dir / "checkpoint").read_text().startswith('model_checkpoint_path: "ckpt-2"')
  assert "Done: step 2," in (train_dir / "log.txt").read_text().rstrip().splitlines()[-1]


def _reader_gone(*args):
  """`python -m args` whose stdout's reader is gone before it writes (`| head` that ended):
  (status, stderr)."""
  proc = forked.Popen([sys.executable, "-m", *args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=helpers.env(),
                          cwd=helpers.REPO)
  proc.stdout.close()
  try:
    return proc.wait(timeout=240), proc.stderr.read()
  finally:
    proc.kill()


@pytest.mark.parametrize("binary", ["strategies.train", "compat_v1.eval", "porting"])
def test_help_into_a_closed_pipe_ends_quietly(binary):
  # Before: `--help | head -3` could end in BrokenPipeError's traceback, status 1.
  status, stderr = _reader_gone(binary, "--help")
  assert (status, stderr) == (0, "")


@pytest.mark.slow
@pytest.mark.parametrize("command", [
    ["porting", "compare", "--port=tests.dropout_adam_port:port",
     "--batches=tests.dropout_adam_port:batches", "--replicas=1", "--steps=1"],
    ["equivalence", "--num_gpus=1", "--steps=1", "--batch_size=2"]], ids=lambda c: c[0])
def test_a_report_into_a_closed_pipe_still_ends_with_its_verdict(command):
  # Before: the kit said "error: the kit failed: BrokenPipeError ...", status 2; equivalence
  # ended in a traceback, status 1. The verdict (0: equal) is the status either way.
  status, stderr = _reader_gone(*command)
  assert status == 0 and "Error" not in stderr and "Traceback" not in stderr, stderr[-2000:]
  if command[0] == "porting":
    # The port is MIGRATION's dropout and Adam example, written with tf.compat.v1.layers:
    # before, 12 lines of "`tf.layers.conv2d` is deprecated ..." came before the report, on
    # the screen the kit exists to be read on. (One process for both: a TensorFlow start is
    # most of a short comparison's CPU.)
    assert "deprecated" not in stderr and "Warning" not in stderr, stderr[-2000:]
