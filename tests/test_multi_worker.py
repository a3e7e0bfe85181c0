"""MultiWorkerMirroredStrategy on a local cluster of processes (127.0.0.1, free ports).

A job stopped with SIGTERM saves at once, and launched again continues from there; a worker
that never comes up is an error after a bounded wait. (That 2 workers x 1 replica compute the
v1 towers' run bit for bit is tested by the equivalence report, in
tests/test_equivalence.py::test_the_report_of_the_command_passes_and_flags_a_difference.)
"""

import glob
import json
import os
import re
import signal
import subprocess
import time

import pytest
import tensorflow as tf

from cifar10 import checkpoints
from tests import forked
from tests import helpers

pytestmark = pytest.mark.slow
FLAGS = ("--dataset=synthetic", "--batch_size=8", "--seed=2", "--log_frequency=4")


def _no_task_left(train_dir):
  out = subprocess.run(["pgrep", "-f", f"--train_dir={train_dir}"], capture_output=True,
                       text=True, check=False).stdout
  return not out.strip()


def _worker_pids(train_dir):
  """The pids of this job's MWMS workers (their command names train_dir)."""
  pids = []
  for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
      with open(f"/proc/{pid}/cmdline", "rb") as f:
        cmdline = f.read().decode(errors="replace")
    except OSError:
      continue
    if "strategies.train" in cmdline and f"--train_dir={train_dir}" in cmdline:
      pids.append(int(pid))
  return pids


def _threads(pid):
  with open(f"/proc/{pid}/status", encoding="utf-8") as f:
    return int(re.search(r"^Threads:\s+(\d+)", f.read(), re.MULTILINE)[1])


def test_a_stopped_job_saves_and_launched_again_continues_from_there(tmp_path, monkeypatch):
  temp = tmp_path / "temp"  # the workers' temp dir, where nothing of theirs may stay
  temp.mkdir()
  monkeypatch.setenv("TMPDIR", str(temp))
  tmp_path = tmp_path / "train"

  def args(max_steps):
    return ["--workers=2", "--timeout_secs=240", "--", *FLAGS, f"--max_steps={max_steps}",
            "--save_checkpoint_steps=15", f"--train_dir={tmp_path}"]
  proc = helpers.start("strategies.launch", *args(5000))
  threads = []  # each worker's thread count at ckpt-15 and at ckpt-30
  try:
    deadline = time.time() + 180
    for step in (15, 30):
      while not glob.glob(f"{tmp_path}/ckpt-{step}.index") and time.time() < deadline:
        assert proc.poll() is None, proc.stdout.read()[-3000:]
        time.sleep(0.1)
      threads.append([_threads(pid) for pid in _worker_pids(tmp_path)])
    proc.send_signal(signal.SIGTERM)  # what a cluster manager sends before it kills
    out, _ = proc.communicate(timeout=60)
  finally:
    proc.kill()
  # A thread per collective lived for --peer_timeout_secs when every collective had a
  # timeout: ~6 more per step (482 at step 50, 2,294 at step 350; ~90 over these 15 steps).
  # Now none per step.
  assert len(threads[0]) == len(threads[1]) == 2, threads
  assert all(later - earlier < 40 for earlier, later in zip(*threads)), threads
  assert proc.returncode != 0
  assert _no_task_left(tmp_path)
  # Both workers learn of the request in the same all-reduce, so they stop after the same
  # step and save together (the save is collective), between the periodic checkpoints.
  stops = re.findall(r"\[worker:(\d)\] stopped: SIGTERM after step (\d+); saved (\S+);", out)
  assert sorted(w for w, _, _ in stops) == ["0", "1"], out[-3000:]
  (_, stopped_at, path), = set((0, s, p) for _, s, p in stops)
  stopped_at = int(stopped_at)
  assert path == f"{tmp_path}/ckpt-{stopped_at}" == tf.train.latest_checkpoint(str(tmp_path))
  assert checkpoints.read(path).global_step == stopped_at
  # What a SIGKILLed worker 1 leaves: its scratch checkpoint, half written. (Before, such
  # folders stayed in the temp dir, 25 MB each, with no name a restart could find.)
  scratch = tmp_path / ".worker-1"
  scratch.mkdir()
  (scratch / "ckpt-3.data-00000-of-00001").write_bytes(b"\0" * 1000)
  result = helpers.run("strategies.launch", *args(stopped_at + 5))
  assert result.returncode == 0, result.stdout[-3000:]
  assert "[worker:0]" in result.stdout and "[worker:1]" in result.stdout
  assert f"Resumed from {path} at step {stopped_at}" in result.stdout
  assert checkpoints.read(str(tmp_path)).global_step == stopped_at + 5
  assert _no_task_left(tmp_path)
  assert not scratch.exists() and not list(temp.iterdir())
  # Only the chief writes into train_dir: per launch, the events file of its loop and the
  # one of the driver's speed scalars (harness.control.run_summaries.SPEED_TAGS).
  assert len(glob.glob(f"{tmp_path}/events.out.tfevents.*")) == 2 * 2


def test_a_worker_that_never_comes_up_is_a_bounded_error(tmp_path):
  spec = {"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]},
          "task": {"type": "worker", "index": 1}}
  begin = time.time()
  result = forked.run(
      [helpers.sys.executable, "-m", "strategies.train", "--strategy=multi_worker_mirrored",
       "--peer_timeout_secs=2", *FLAGS, f"--train_dir={tmp_path}"],
      capture_output=True, text=True, timeout=120, cwd="/",
      env=dict(helpers.env(), TF_CONFIG=json.dumps(spec)))
  assert result.returncode != 0 and time.time() - begin < 90
  assert helpers.error_line(result) == (
      "error: not every worker of TF_CONFIG came up within 2 s; check that each one was "
      "started and that its port is reachable")
  assert not tf.io.gfile.glob(f"{tmp_path}/ckpt-*")


def test_a_worker_whose_peer_dies_mid_run_ends_in_one_line_to_retry(tmp_path, monkeypatch):
  """Pods of a TFJob are not stopped together: worker 0 must notice that worker 1 is gone
  (no timeout on the collectives any more, see strategies/devices.py) and end, not hang."""
  from harness.clusters import cluster  # pylint: disable=g-import-not-at-top
  from harness.clusters import launcher  # pylint: disable=g-import-not-at-top
  workers = [f"127.0.0.1:{p}" for p in launcher.free_ports(2)]
  procs = []
  for index in range(2):
    monkeypatch.setenv("TF_CONFIG", cluster.to_json({"worker": workers}, "worker", index))
    procs.append(helpers.start("strategies.train", "--strategy=multi_worker_mirrored", *FLAGS,
                               "--max_steps=100000", "--save_checkpoint_steps=20",
                               f"--train_dir={tmp_path}", fork=True))
  try:
    deadline = time.time() + 120
    while not glob.glob(f"{tmp_path}/ckpt-20.index") and time.time() < deadline:
      time.sleep(0.1)
    procs[1].kill()
    began = time.time()
    out, _ = procs[0].communicate(timeout=120)
    waited = time.time() - began
  finally:
    for proc in procs:
      proc.kill()
      proc.wait()
  assert procs[0].returncode == 143, out[-3000:]
  assert out.strip().splitlines()[-1].startswith(
      "error: a peer of this job stopped (/job:worker/replica:0/task:1)"), out[-3000:]
  assert "Traceback" not in out and waited < 60, waited
