"""The deployment files run as written: each pod or Slurm task of deploy/ started as a process
on 127.0.0.1 with exactly the environment its scheduler would give it."""

import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf
import yaml

from harness import launcher
from tests import helpers

DEPLOY = os.path.join(helpers.REPO, "deploy")
# What the tests change in the files' arguments: a run that fits in a test.
SMALL = {"--batch_size": "4", "--max_steps": "6", "--save_checkpoint_steps": "3",
         "--log_frequency": "3", "--evaluator_num_examples": "64"}


def _args(args, train_dir):
  """The manifest's arguments with SMALL's values and train_dir (others as written)."""
  given = dict(a.split("=", 1) for a in args)
  given.update(SMALL, **{"--train_dir": str(train_dir)})
  return [f"{k}={v}" for k, v in given.items()]


def _run_all(commands, timeout=240):
  """Starts every (name, argv, env) at once; returns {name: (status, output)}."""
  procs = {name: subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, env=env, cwd="/")
           for name, argv, env in commands}
  deadline, results = time.time() + timeout, {}
  try:
    for name, proc in procs.items():
      out, _ = proc.communicate(timeout=max(1.0, deadline - time.time()))
      results[name] = (proc.returncode, out)
  finally:
    for proc in procs.values():
      proc.kill()
      proc.wait()
  return results


def _weights(train_dir):
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(train_dir)))
  return {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map()
          if "OPTIMIZER_SLOT" not in k and k != "_CHECKPOINTABLE_OBJECT_GRAPH"}


def _tfjob_pods(manifest, train_dir):
  """(specs, cluster, [(name, argv, env)]) of every pod of a TFJob manifest, as the operator
  starts them: the TF_CONFIG of each (chief, workers and ps tasks, not the evaluator, as the
  cluster; here 127.0.0.1 and a free port each instead of a service at port 2222)."""
  with open(os.path.join(DEPLOY, manifest), encoding="utf-8") as f:
    job = yaml.safe_load(f)
  assert job["kind"] == "TFJob"
  specs = job["spec"]["tfReplicaSpecs"]
  assert all(s["restartPolicy"] == "ExitCode" for s in specs.values())
  training = [(t, i) for t in ("Chief", "Worker", "PS") if t in specs
              for i in range(specs[t]["replicas"])]
  ports = iter(launcher.free_ports(len(training)))
  cluster = {}
  for kind, _ in training:
    cluster.setdefault(kind.lower(), []).append(f"127.0.0.1:{next(ports)}")
  pods = []
  for kind, index in training + [("Evaluator", i)
                                 for i in range(specs["Evaluator"]["replicas"])]:
    container, = specs[kind]["template"]["spec"]["containers"]
    assert container["name"] == "tensorflow"
    assert container["command"][:2] == ["python", "-m"]
    tf_config = {"cluster": cluster, "task": {"type": kind.lower(), "index": index},
                 "environment": "cloud"}
    pods.append((f"{kind.lower()}:{index}",
                 [sys.executable, *container["command"][1:],
                  *_args(container["args"], train_dir)],
                 dict(helpers.env(), TF_CONFIG=json.dumps(tf_config))))
  return specs, cluster, pods


def _evaluated_the_final_step(out, train_dir, step):
  final = str(train_dir / f"ckpt-{step}")
  assert re.search(r"precision @ 1 = \d\.\d{3} \(64 examples, step %d, " % step
                   + re.escape(final), out), out[-3000:]
  assert f"Scored the final step {step} of --max_steps={step}; the evaluator is done" in out
  assert tf.io.gfile.glob(str(train_dir / "eval" / "events.out.tfevents.*"))


@pytest.mark.slow
def test_the_tfjob_manifest_trains_like_mirrored_and_its_evaluator_scores_the_last_step(
    tmp_path):
  specs, cluster, pods = _tfjob_pods("tfjob.yaml", tmp_path / "job")
  results = _run_all(pods)
  for name, (status, out) in results.items():
    assert status == 0, f"{name}:\n{out[-3000:]}"
  # The job equals `mirrored` over as many replicas, bit for bit.
  replicas = sum(len(hosts) for hosts in cluster.values())
  args = _args(specs["Chief"]["template"]["spec"]["containers"][0]["args"], tmp_path / "ref")
  args = [a for a in args if not a.startswith(("--strategy", "--num_gpus"))]
  reference = helpers.run("strategies.train", "--strategy=mirrored",
                          f"--num_gpus={replicas}", *args)
  assert reference.returncode == 0, reference.stderr[-3000:]
  job_weights, ref_weights = _weights(tmp_path / "job"), _weights(tmp_path / "ref")
  assert job_weights.keys() == ref_weights.keys()
  for key, value in ref_weights.items():
    np.testing.assert_array_equal(job_weights[key], value, err_msg=key)
  # The evaluator scored the final checkpoint, wrote its summary, and ended by itself.
  _evaluated_the_final_step(results["evaluator:0"][1], tmp_path / "job", 6)


@pytest.mark.slow
def test_the_parameter_server_tfjob_stops_at_the_exact_step(tmp_path):
  from cifar10 import checkpoints  # pylint: disable=g-import-not-at-top
  _, _, pods = _tfjob_pods("tfjob_parameter_server.yaml", tmp_path / "job")
  # The job ends with its chief (the operator's success policy); its workers and ps tasks
  # serve until they are stopped, as the operator's cleanPodPolicy does.
  servers = [p for p in pods if p[0].startswith(("worker", "ps"))]
  procs = {name: subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, env=env, cwd="/") for name, argv, env in servers}
  try:
    results = _run_all([p for p in pods if p not in servers])
  finally:
    for proc in procs.values():
      proc.kill()
      proc.wait()
  for name, (status, out) in results.items():
    assert status == 0, f"{name}:\n{out[-3000:]}"
  assert checkpoints.read(str(tmp_path / "job")).global_step == 6
  _evaluated_the_final_step(results["evaluator:0"][1], tmp_path / "job", 6)


def _srun_line(script):
  """The trainer's command of the batch script's srun line, with its flags."""
  with open(script, encoding="utf-8") as f:
    line, = [l for l in f if l.startswith("srun ")]
  words = line.replace('"$TRAIN_DIR"', "TRAIN_DIR").split()
  start = words.index("python")
  return words[start + 2], words[start + 3:]


@pytest.mark.slow
def test_the_slurm_script_trains_like_mirrored(tmp_path):
  module, args = _srun_line(os.path.join(DEPLOY, "slurm.sbatch"))
  assert module == "strategies.train"
  # What Slurm gives each task of `srun -N1 -n2` (the script asks for two nodes with one task
  # each; on one machine, two tasks of one node): its rank, the step's node list and tasks per
  # node. The trainer takes ports base and base + 1 on the node.
  base = next(p for p in launcher.free_ports(8) if _free(p + 1))
  tasks = 2
  commands = []
  for rank in range(tasks):
    env = dict(helpers.env(), SLURM_PROCID=str(rank), SLURM_LOCALID=str(rank),
               SLURM_NODEID="0", SLURM_STEP_NODELIST="localhost", SLURM_JOB_NODELIST="localhost",
               SLURM_STEP_NUM_TASKS=str(tasks), SLURM_NTASKS=str(tasks),
               SLURM_STEP_TASKS_PER_NODE=str(tasks), SLURM_TASKS_PER_NODE=str(tasks),
               SLURMD_NODENAME="localhost", SLURM_JOB_ID="4242")
    env.pop("TF_CONFIG", None)
    commands.append((f"task:{rank}", [sys.executable, "-m", module,
                                      *_args(args, tmp_path / "job"),
                                      f"--slurm_port_base={base}"], env))
  results = _run_all(commands)
  for name, (status, out) in results.items():
    assert status == 0, f"{name}:\n{out[-3000:]}"
  reference = helpers.run("strategies.train", "--strategy=mirrored", f"--num_gpus={tasks}",
                          *[a for a in _args(args, tmp_path / "ref")
                            if not a.startswith(("--strategy", "--num_gpus"))])
  assert reference.returncode == 0, reference.stderr[-3000:]
  job_weights, ref_weights = _weights(tmp_path / "job"), _weights(tmp_path / "ref")
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
def test_the_v1_ps_worker_job_runs_as_a_slurm_step(tmp_path):
  # The TF1 recipe under srun: the first --slurm_ps_tasks tasks serve, the rest train.
  from cifar10 import checkpoints  # pylint: disable=g-import-not-at-top
  base = next(p for p in launcher.free_ports(8) if _free(p + 1) and _free(p + 2))
  flags = ["--dataset=synthetic", "--batch_size=4", "--max_steps=5", "--log_frequency=1",
           f"--train_dir={tmp_path}", f"--slurm_port_base={base}"]
  argv = [sys.executable, "-m", "compat_v1.train", *flags]
  ps = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                        env=_slurm_env(0, 3), cwd="/")
  try:
    results = _run_all([(f"worker:{i}", argv, _slurm_env(i + 1, 3)) for i in range(2)])
  finally:
    ps.kill()
    out, _ = ps.communicate()
  assert f"ps:0 serving at localhost:{base}" in out, out[-2000:]
  for name, (status, worker_out) in results.items():
    assert status == 0, f"{name}:\n{worker_out[-3000:]}"
  assert checkpoints.read(str(tmp_path)).global_step >= 5


def _free(port):
  import socket  # pylint: disable=g-import-not-at-top
  with socket.socket() as probe:
    try:
      probe.bind(("127.0.0.1", port))
    except OSError:
      return False
  return True


def test_managed_cluster_tf_configs_are_read_with_their_evaluator_outside_the_cluster():
  from harness import cluster  # pylint: disable=g-import-not-at-top
  spec = {"chief": ["c:2222"], "worker": ["w0:2222", "w1:2222"]}
  # TFJob / AI Platform: extra keys, the evaluator not in the cluster.
  task = cluster.parse(json.dumps({"cluster": spec, "task": {"type": "evaluator", "index": 0},
                                   "environment": "cloud", "job": {"args": []}}))
  assert task.is_evaluator and task.training_cluster == spec
  cluster.check_port(task)  # the evaluator listens on nothing
  # Hand-written ones that list it: the training tasks leave it out of their cluster.
  task = cluster.parse(json.dumps({"cluster": dict(spec, evaluator=["e:2222"]),
                                   "task": {"type": "worker", "index": 1}}))
  assert not task.is_evaluator and task.training_cluster == spec and task.index == 1


def test_slurm_steps_become_a_cluster_in_rank_order():
  from cifar10.errors import UsageError  # pylint: disable=g-import-not-at-top
  from harness import cluster  # pylint: disable=g-import-not-at-top
  assert cluster.expand_hostlist("gpu[01-03,7],login1") == ["gpu01", "gpu02", "gpu03", "gpu7",
                                                             "login1"]
  assert cluster.expand_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
  step = {"SLURM_STEP_NODELIST": "n[1-2]", "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
          "SLURM_STEP_NUM_TASKS": "4"}
  layout = [("chief", 1), ("ps", 1), ("worker", None)]
  tasks = [cluster.from_slurm(layout, 9000, dict(step, SLURM_PROCID=str(r))) for r in range(4)]
  assert tasks[0].cluster == {"chief": ["n1:9000"], "ps": ["n1:9001"],
                              "worker": ["n2:9000", "n2:9001"]}
  assert [(t.type, t.index) for t in tasks] == [("chief", 0), ("ps", 0), ("worker", 0),
                                                ("worker", 1)]
  # auto: TF_CONFIG first, a one-task step trains alone, and the cluster is exported.
  env = dict(step, SLURM_PROCID="3")
  task = cluster.resolve("auto", [("worker", None)], 9000, env)
  assert (task.type, task.index) == ("worker", 3)
  assert json.loads(env["TF_CONFIG"])["task"] == {"type": "worker", "index": 3}
  single = {"SLURM_PROCID": "0", "SLURM_STEP_NODELIST": "n1", "SLURM_STEP_NUM_TASKS": "1"}
  assert cluster.resolve("auto", [("worker", None)], 9000, single).cluster is None
  with pytest.raises(UsageError, match=re.escape(
      "the Slurm step has 2 task(s) and this is task 0; the job needs 3 or more (1 chief, "
      "1 ps, at least 1 worker)")):
    cluster.from_slurm(layout, 9000, {"SLURM_PROCID": "0", "SLURM_STEP_NODELIST": "n[1-2]"})
  with pytest.raises(UsageError, match="run srun with --distribution=block"):
    cluster.from_slurm(layout, 9000, dict(step, SLURM_PROCID="0", SLURMD_NODENAME="n2"))
  with pytest.raises(UsageError, match="--cluster_resolver=slurm but this is not a Slurm job "
                                       "step: start each task with srun"):
    cluster.resolve("slurm", layout, 9000, {})


@pytest.mark.parametrize("trainer,strategy", [("strategies.train", "multi_worker_mirrored"),
                                              ("strategies.train", "parameter_server"),
                                              ("compat_v1.train", None)])
def test_an_evaluator_task_scores_the_final_checkpoint_and_ends(trainer, strategy, tmp_path,
                                                               monkeypatch):
  # Both trainers' entry points, as a TFJob's Evaluator pod runs them (the v1 one in a ps/worker
  # job's TF_CONFIG): the continuous evaluator over the chief's train_dir until --max_steps.
  train_dir = tmp_path / "train"
  flags = ["--dataset=synthetic", "--batch_size=4", "--max_steps=2", f"--train_dir={train_dir}"]
  made = helpers.call(trainer, *flags, "--save_checkpoint_steps=1")
  assert made.returncode == 0, made.stderr[-2000:]
  spec = {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"], "ps": ["127.0.0.1:3"]}
  monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": spec, "environment": "cloud",
                                              "task": {"type": "evaluator", "index": 0}}))
  result = helpers.call(trainer, *flags, "--evaluator_num_examples=16",
                        *([f"--strategy={strategy}"] if strategy else []))
  assert result.returncode == 0, result.stderr[-2000:]
  scored = re.findall(r"precision @ 1 = \d\.\d{3} \(16 examples, step (\d+), ", result.stderr)
  assert scored == ["2"], result.stderr[-2000:]
  assert "Scored the final step 2 of --max_steps=2; the evaluator is done" in result.stderr
  assert tf.io.gfile.glob(str(train_dir / "eval" / "events.out.tfevents.*"))
