"""<train_dir>/log.txt holds the screen's lines from the binary's first (harness.control.run_log).

The device set-up's line (`No GPU in use: ...`, or the GPUs a run takes) is logged before
TensorFlow starts and before the run folder is owned: log.txt, opened later, began at the
machine line, and README says what the screen lost is there."""

import re

import pytest

from tests import helpers

_DATED = re.compile(r"^(?:[WE] )?\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (.*)$")


@pytest.mark.parametrize("trainer,device_line", [
    ("strategies.train", "No GPU in use: 2 logical CPU devices stand in for 2 GPUs (/cpu:0-1)"),
    ("compat_v1.train", "No GPU in use: running 2 towers on 2 CPU devices (/cpu:0-1)")],
    ids=["tf2", "v1"])
def test_the_log_begins_with_the_screens_first_line(trainer, device_line, tmp_path):
  result = helpers.call(trainer, "--num_gpus=2", "--dataset=synthetic", "--batch_size=2",
                        "--max_steps=1", f"--train_dir={tmp_path}")
  assert result.returncode == 0, result.stderr[-2000:]
  assert device_line in result.stderr.splitlines()  # on the screen
  lines = (tmp_path / "log.txt").read_text(encoding="utf-8").splitlines()
  # Each record's first line: a warning's starts with its letter (W, E), a traceback's lines
  # have no date.
  logged = [m[1] for m in map(_DATED.match, lines) if m]
  machine = next(i for i, line in enumerate(logged) if line.startswith("Machine: "))
  assert logged[0].startswith("started: ") and device_line in logged[1:machine], logged[:4]
  assert logged.count(device_line) == 1
  assert logged[-1].startswith("Done: step 1, ")
