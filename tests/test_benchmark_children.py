"""A benchmark's measuring child dies with its parent (benchmarks.children): SIGTERM or SIGKILL
to the parent alone, as `timeout` and schedulers send it. Before, `python -m
benchmarks.input_pipeline` (and throughput, porting_scale) left its child running, a core
busy, until killed by hand."""

import os
import signal
import subprocess
import sys
import time

import pytest

from tests import helpers

CHILD = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(120)"


def _alive(pid):
  try:
    with open(f"/proc/{pid}/status", encoding="utf-8") as f:
      return not any(line.split() == ["State:", "Z", "(zombie)"] for line in f)
  except FileNotFoundError:
    return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a parent-death signal is "
                    "Linux's")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_the_child_ends_with_its_parent(tmp_path, signum):
  pidfile = tmp_path / "child.pid"
  parent = subprocess.Popen(
      [sys.executable, "-c", "import sys; from benchmarks import children; "
       f"children.run([sys.executable, '-c', {CHILD!r}, {str(pidfile)!r}])"],
      cwd=helpers.REPO, env=helpers.env())
  try:
    deadline = time.monotonic() + 60
    while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
      time.sleep(0.05)
    child = int(pidfile.read_text())
    assert _alive(child)
    parent.send_signal(signum)
    parent.wait(timeout=30)
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
      time.sleep(0.05)
    assert not _alive(child)
  finally:
    parent.kill()
    if pidfile.exists() and pidfile.read_text() and _alive(int(pidfile.read_text())):
      os.kill(int(pidfile.read_text()), signal.SIGKILL)


def test_a_long_benchmark_says_how_far_it_is_on_stderr(capsys):
  # Before: benchmarks.throughput printed nothing between its rows (1.5 min a child on a busy
  # 2-core box) and porting_scale nothing before its first.
  from benchmarks import children  # pylint: disable=g-import-not-at-top
  now = [0.0]
  progress = children.Progress(3, clock=lambda: now[0])

  def child(seconds):
    now[0] += seconds
    return seconds

  assert progress.measured("v1:1:fp32", lambda: child(80.0)) == 80.0
  progress.measured("tf2:1:fp32", lambda: child(100.0))
  progress.measured("v1:2:fp32", lambda: child(90.0))
  captured = capsys.readouterr()
  assert captured.out == ""  # the results' table alone on standard output
  assert captured.err.splitlines() == [
      "[1/3] v1:1:fp32: 80 s; about 160 s left",
      "[2/3] tf2:1:fp32: 100 s; about 90 s left",
      "[3/3] v1:2:fp32: 90 s"]
