"""MultiWorkerMirroredStrategy on a local cluster of processes (127.0.0.1, free ports).

2 workers x 1 replica compute the same run as MirroredStrategy with 2 replicas and as the
v1 towers with 2 towers, bit for bit; a job killed mid-run and launched again continues from
its last checkpoint; a worker that never comes up is an error after a bounded wait.
"""

import glob
import json
import signal
import subprocess
import time

import numpy as np
import pytest
import tensorflow as tf

from cifar10 import checkpoints
from tests import helpers

pytestmark = pytest.mark.slow
FLAGS = ("--dataset=synthetic", "--batch_size=8", "--seed=2", "--log_frequency=4")


def _no_task_left(train_dir):
  out = subprocess.run(["pgrep", "-f", f"--train_dir={train_dir}"], capture_output=True,
                       text=True, check=False).stdout
  return not out.strip()


def test_two_workers_equal_the_v1_towers_bit_for_bit(tmp_path):
  mwms, towers = tmp_path / "mwms", tmp_path / "towers"
  result = helpers.run("strategies.launch", "--workers=2", "--timeout_secs=240", "--", *FLAGS,
                       "--max_steps=12", f"--train_dir={mwms}")
  assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
  assert "[worker:0]" in result.stdout and "[worker:1]" in result.stdout
  assert _no_task_left(mwms)
  result = helpers.run("compat_v1.train", *FLAGS, "--num_gpus=2", "--max_steps=12",
                       f"--train_dir={towers}")
  assert result.returncode == 0, result.stderr[-3000:]
  a, b = checkpoints.read(str(mwms)), checkpoints.read(str(towers))
  assert a.global_step == b.global_step == 12
  for name in a.weights:
    np.testing.assert_array_equal(a.weights[name], b.weights[name], err_msg=name)
    np.testing.assert_array_equal(a.averages[name], b.averages[name], err_msg=name)
  # Only the chief writes into train_dir.
  assert len(glob.glob(f"{mwms}/events.out.tfevents.*")) == 1


def test_a_killed_job_launched_again_continues_from_its_last_checkpoint(tmp_path):
  def args(max_steps):
    return ["--workers=2", "--timeout_secs=240", "--", *FLAGS, f"--max_steps={max_steps}",
            "--save_checkpoint_steps=5", f"--train_dir={tmp_path}"]
  proc = helpers.start("strategies.launch", *args(2000))
  try:
    deadline = time.time() + 180
    while not glob.glob(f"{tmp_path}/ckpt-5.index") and time.time() < deadline:
      assert proc.poll() is None, proc.stdout.read()[-3000:]
      time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) != 0
  finally:
    proc.kill()
  assert _no_task_left(tmp_path)
  killed_at = checkpoints.read(str(tmp_path)).global_step
  assert 5 <= killed_at < 2000
  result = helpers.run("strategies.launch", *args(killed_at + 5))
  assert result.returncode == 0, result.stdout[-3000:]
  assert f"Resumed from {tmp_path}/ckpt-{killed_at} at step {killed_at}" in result.stdout
  assert checkpoints.read(str(tmp_path)).global_step == killed_at + 5


def test_a_worker_that_never_comes_up_is_a_bounded_error(tmp_path):
  spec = {"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]},
          "task": {"type": "worker", "index": 1}}
  begin = time.time()
  result = subprocess.run(
      [helpers.sys.executable, "-m", "strategies.train", "--strategy=multi_worker_mirrored",
       "--peer_timeout_secs=5", *FLAGS, f"--train_dir={tmp_path}"],
      capture_output=True, text=True, timeout=120, cwd="/",
      env=dict(helpers.env(), TF_CONFIG=json.dumps(spec)))
  assert result.returncode != 0 and time.time() - begin < 90
  assert helpers.error_line(result) == (
      "error: not every worker of TF_CONFIG came up within 5 s; check that each one was "
      "started and that its port is reachable")
  assert not tf.io.gfile.glob(f"{tmp_path}/ckpt-*")
