"""The TF1 ps/worker recipe on a local cluster: a worker restarted mid-run of an asynchronous
job, and what SyncReplicasOptimizer guarantees.

Neither is step-equal to the towers (see compat_v1/cluster_loop.py); what each guarantees is
tested: the job ends cleanly, the chief's final checkpoint holds trained, finite weights;
and, on a model small enough to audit, that every SyncReplicas update averages exactly N
gradients computed at the weights it replaces, dropping the others. Asynchronous workers
overshoot: each checks the stop condition only after its own step, and a step in flight on
any worker can land before the chief's final save (measured 30, 31 and 32 for
--max_steps=30 with 2 workers), so the bound is max_steps + workers. Elsewhere: a whole
--sync_replicas job stops at the exact step and every worker ends by itself
(tests/test_deploy_slurm.py, the job as a Slurm step); a one-worker job on the .bin files
starts from another run's checkpoint and equals the one-device run, its images fed, not
constants (tests/test_init_from.py); SIGTERM saves (tests/test_stops.py).
"""

import itertools
import json
import re
import signal
import subprocess
import sys
import time

import pytest

from harness.clusters import launcher
from tests import forked
from tests import helpers

pytestmark = pytest.mark.slow
FLAGS = ("--dataset=synthetic", "--batch_size=8", "--seed=2", "--log_frequency=4")


def test_a_restarted_worker_rejoins(tmp_path):
  """Kill worker 1 mid-run and start it again: MonitoredTrainingSession lets it rejoin.

  Worker 0 is paused (SIGSTOP) from the kill until the new worker 1 has trained a step, so
  the job cannot end before worker 1 is back however long its start takes, and worker 1 must
  start while its peer does not answer: a worker's session talks to the ps tasks only
  (compat_v1.cluster_loop.worker_proto; without it, worker 1 waited for worker 0).
  """
  addresses = [f"127.0.0.1:{p}" for p in launcher.free_ports(3)]
  ps, workers = addresses[:1], addresses[1:]
  cluster = [f"--ps_hosts={ps[0]}", f"--worker_hosts={','.join(workers)}"]
  train_dir = tmp_path / "train"
  # Stale asynchronous gradients at lr 0.1 on batches of 8 can diverge (seen once: an Inf
  # loss); this test is about rejoining, so it trains gently.
  common = [*FLAGS, f"--train_dir={train_dir}", "--max_steps=60", "--learning_rate=0.02",
            "--save_checkpoint_steps=10", *cluster]

  def task(job, index):
    return helpers.start("compat_v1.train", f"--job_name={job}", f"--task_index={index}",
                         *common, fork=True)
  procs = [task("ps", 0), task("worker", 0), task("worker", 1)]
  log = tmp_path / "worker1.log"
  try:
    deadline = time.time() + 120
    while not _has_checkpoint(train_dir) and time.time() < deadline:
      time.sleep(0.2)
    assert _has_checkpoint(train_dir), "no checkpoint within 120 s"
    procs[1].send_signal(signal.SIGSTOP)
    procs[2].kill()
    procs[2].wait(30)
    with open(log, "w", encoding="utf-8") as out:
      procs.append(forked.Popen(
          [sys.executable, "-m", "compat_v1.train", "--job_name=worker", "--task_index=1",
           *common], stdout=out, stderr=subprocess.STDOUT, env=helpers.env(), cwd="/"))
    restarted = procs[-1]
    deadline = time.time() + 120
    while not re.search(r"step \d+, loss = ", log.read_text()) and time.time() < deadline:
      assert restarted.poll() is None, log.read_text()[-3000:]
      time.sleep(0.2)
    assert re.search(r"step \d+, loss = ", log.read_text()), log.read_text()[-3000:]
    procs[1].send_signal(signal.SIGCONT)
    assert restarted.wait(120) == 0, log.read_text()[-3000:]
    assert procs[1].wait(120) == 0
    assert "worker:1 done at global step" in log.read_text()
    assert 60 <= helpers.trained(train_dir, seed=2).global_step <= 62
  finally:
    for proc in procs:
      proc.kill()  # SIGKILL ends a stopped process too
      proc.wait(30)


def _has_checkpoint(train_dir):
  # The chief's first save: at step 10 of 60.
  return bool(list(train_dir.glob("model.ckpt-*.index")))


def test_each_sync_replicas_update_averages_exactly_n_fresh_gradients():
  """What SyncReplicasOptimizer guarantees, audited update by update (tests.sync_replicas_job).

  At learning rate 1 an update averaging gradients w_k - x_a and w_k - x_b lands on
  (x_a + x_b) / 2, exactly in float32 for these integers, so the weights name the gradients
  each update used. Every update must be the average of exactly two gradients computed at the
  weights it replaced; every other gradient (stale, or one too many) must have been dropped.
  """
  updates = 10
  result = forked.run([sys.executable, "-m", "tests.sync_replicas_job", str(updates)],
                      capture_output=True, text=True, timeout=150, env=helpers.env(),
                      cwd=helpers.REPO)
  assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
  job = json.loads(result.stdout.strip().splitlines()[-1])
  assert job["global_step"] == updates
  weights = _weights_in_update_order(job["records"], job["w"])
  assert len(weights) == updates + 1, weights
  for before, after in zip(weights, weights[1:]):
    xs = [x for _, seen, x in job["records"] if seen == before]
    pairs = [(a, b) for a, b in itertools.combinations(xs, 2) if (a + b) / 2 == after]
    assert len(pairs) == 1, (before, after, xs)
    assert not any(x == after for x in xs)  # not a single gradient
    assert not any(sum(t) / 3 == after for t in itertools.combinations(xs, 3))


def _weights_in_update_order(records, final):
  """The initial weight, then each update's result, from the workers' records in the order
  they were appended: each value where it is first seen. A step records after its run returns,
  and a run waits for the next update's token, so a step that read an older weight can record
  after one that read a newer (seen under load: 65784, 32502, 65784, 32502); but no weight is
  read before the update that made it, nor first recorded after the weight that follows it."""
  weights = [0.5]
  for _, seen, _ in records:
    if seen not in weights:
      weights.append(seen)
  if final not in weights:
    weights.append(final)
  return weights


def test_a_late_record_of_an_older_weight_is_not_a_new_update():
  # The order of a failed run: worker 1's steps at 65784 recorded after worker 0 saw 32502.
  records = [[0, 0.5, 1], [1, 0.5, 2], [0, 31416.0, 3], [1, 31416.0, 4], [0, 65784.0, 5],
             [0, 32502.0, 6], [1, 65784.0, 7], [0, 32502.0, 8], [1, 65784.0, 9]]
  assert _weights_in_update_order(records, 7.5) == [0.5, 31416.0, 65784.0, 32502.0, 7.5]
