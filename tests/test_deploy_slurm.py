"""deploy/slurm.sbatch runs as written: each task of its srun step started as a process on
127.0.0.1 with the SLURM_* variables Slurm would give it; and Slurm steps as clusters."""

import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest

from harness.clusters import launcher
from tests import deploy_jobs
from tests import forked
from tests import helpers


def _srun_line(script):
  """The trainer's command of the batch script's srun line, with its flags."""
  with open(script, encoding="utf-8") as f:
    line, = [l for l in f if l.startswith("srun ")]
  words = line.replace('"$TRAIN_DIR"', "TRAIN_DIR").split()
  start = words.index("python")
  return words[start + 2], words[start + 3:]


@pytest.mark.slow
def test_the_slurm_script_trains_like_mirrored(tmp_path):
  module, args = _srun_line(os.path.join(deploy_jobs.DEPLOY, "slurm.sbatch"))
  assert module == "strategies.train"
  # What Slurm gives each task of `srun -N1 -n2` (the script asks for two nodes with one task
  # each; on one machine, two tasks of one node): its rank, the step's node list and tasks per
  # node. The trainer takes ports base and base + 1 on the node.
  base = next(p for p in launcher.free_ports(8) if deploy_jobs.port_is_free(p + 1))
  tasks = 2
  commands = []
  for rank in range(tasks):
    env = _slurm_env(rank, tasks)
    commands.append((f"task:{rank}", [sys.executable, "-m", module,
                                      *deploy_jobs.args(args, tmp_path / "job"),
                                      f"--slurm_port_base={base}"], env))
  results = deploy_jobs.run_all(commands)
  for name, (status, out) in results.items():
    assert status == 0, f"{name}:\n{out[-3000:]}"
  # The reference in this process (its logical CPUs): the job's processes must match it.
  reference = helpers.call("strategies.train", "--strategy=mirrored", f"--num_gpus={tasks}",
                           *[a for a in deploy_jobs.args(args, tmp_path / "ref")
                             if not a.startswith(("--strategy", "--num_gpus"))])
  assert reference.returncode == 0, reference.stderr[-3000:]
  job_weights, ref_weights = deploy_jobs.weights(tmp_path / "job"), deploy_jobs.weights(tmp_path / "ref")
  assert job_weights.keys() == ref_weights.keys()
  for key, value in ref_weights.items():
    np.testing.assert_array_equal(job_weights[key], value, err_msg=key)


def _slurm_env(rank, tasks):
  """What Slurm gives task `rank` of `srun -N1 -n<tasks>` on a node named localhost."""
  env = dict(helpers.env(), SLURM_PROCID=str(rank), SLURM_LOCALID=str(rank),
             SLURM_NODEID="0", SLURM_STEP_NODELIST="localhost", SLURM_JOB_NODELIST="localhost",
             SLURM_STEP_NUM_TASKS=str(tasks), SLURM_NTASKS=str(tasks),
             SLURM_STEP_TASKS_PER_NODE=str(tasks), SLURM_TASKS_PER_NODE=str(tasks),
             SLURMD_NODENAME="localhost", SLURM_JOB_ID="4242")
  env.pop("TF_CONFIG", None)
  return env


@pytest.mark.slow
def test_the_v1_sync_replicas_job_runs_as_a_slurm_step_to_the_exact_step(tmp_path):
  """The TF1 recipe under srun: the first --slurm_ps_tasks tasks serve, the rest train. With
  --sync_replicas the global step is exact and every worker ends by itself."""
  base = next(p for p in launcher.free_ports(8) if deploy_jobs.port_is_free(p + 1) and deploy_jobs.port_is_free(p + 2))
  flags = ["--dataset=synthetic", "--batch_size=4", "--seed=2", "--max_steps=16",
           "--log_frequency=4", "--sync_replicas", f"--train_dir={tmp_path}",
           f"--slurm_port_base={base}"]
  argv = [sys.executable, "-m", "compat_v1.train", *flags]
  ps = forked.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                    env=_slurm_env(0, 3), cwd="/")
  begin = time.time()
  try:
    results = deploy_jobs.run_all([(f"worker:{i}", argv, _slurm_env(i + 1, 3)) for i in range(2)])
    seconds = time.time() - begin
  finally:
    ps.kill()
    out, _ = ps.communicate()
  assert f"ps:0 serving at localhost:{base}" in out, out[-2000:]
  for name, (status, worker_out) in results.items():
    assert status == 0, f"{name}:\n{worker_out[-3000:]}"
  assert helpers.trained(tmp_path, seed=2).global_step == 16
  # Each of the 16 updates averaged 2 gradients: the workers computed at least 32 between
  # them, however unevenly they shared the work (measured 19 + 15, 18 + 16, 19 + 15); the
  # extra ones are stale gradients SyncReplicas dropped and the last ones in flight at stop.
  local = [int(re.search(r"worker:\d done at global step \d+ after (\d+) local", o)[1])
           for _, o in results.values()]
  assert 32 <= sum(local) <= 32 + 2 * 4, local
  # With TF's default stop grace period the chief waited ~120 s for tokens at close.
  assert seconds < 90, seconds


def test_slurm_steps_become_a_cluster_in_rank_order():
  from cifar10.errors import UsageError  # pylint: disable=g-import-not-at-top
  from harness.clusters import slurm  # pylint: disable=g-import-not-at-top
  assert slurm.expand_hostlist("gpu[01-03,7],login1") == ["gpu01", "gpu02", "gpu03", "gpu7",
                                                             "login1"]
  assert slurm.expand_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
  step = {"SLURM_STEP_NODELIST": "n[1-2]", "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
          "SLURM_STEP_NUM_TASKS": "4"}
  layout = [("chief", 1), ("ps", 1), ("worker", None)]
  tasks = [slurm.from_slurm(layout, 9000, dict(step, SLURM_PROCID=str(r))) for r in range(4)]
  assert tasks[0].cluster == {"chief": ["n1:9000"], "ps": ["n1:9001"],
                              "worker": ["n2:9000", "n2:9001"]}
  assert [(t.type, t.index) for t in tasks] == [("chief", 0), ("ps", 0), ("worker", 0),
                                                ("worker", 1)]
  # auto: TF_CONFIG first, a one-task step trains alone, and the cluster is exported.
  env = dict(step, SLURM_PROCID="3")
  task = slurm.resolve("auto", [("worker", None)], 9000, env)
  assert (task.type, task.index) == ("worker", 3)
  assert json.loads(env["TF_CONFIG"])["task"] == {"type": "worker", "index": 3}
  single = {"SLURM_PROCID": "0", "SLURM_STEP_NODELIST": "n1", "SLURM_STEP_NUM_TASKS": "1"}
  assert slurm.resolve("auto", [("worker", None)], 9000, single).cluster is None
  with pytest.raises(UsageError, match=re.escape(
      "the Slurm step has 2 task(s) and this is task 0; the job needs 3 or more (1 chief, "
      "1 ps, at least 1 worker)")):
    slurm.from_slurm(layout, 9000, {"SLURM_PROCID": "0", "SLURM_STEP_NODELIST": "n[1-2]"})
  with pytest.raises(UsageError, match="run srun with --distribution=block"):
    slurm.from_slurm(layout, 9000, dict(step, SLURM_PROCID="0", SLURMD_NODENAME="n2"))
  with pytest.raises(UsageError, match="--cluster_resolver=slurm but this is not a Slurm job "
                                       "step: start each task with srun"):
    slurm.resolve("slurm", layout, 9000, {})
