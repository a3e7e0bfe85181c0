"""deploy/tfjob*.yaml run as written: each pod started as a process on 127.0.0.1 with the
TF_CONFIG the Kubeflow operator would give it; and TF_CONFIG as managed clusters write it."""

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

from harness.clusters import launcher
from tests import deploy_jobs
from tests import forked
from tests import helpers


def _tfjob_pods(manifest, train_dir, overrides=None):
  """(specs, cluster, [(name, argv, env)]) of every pod of a TFJob manifest, as the operator
  starts them: the TF_CONFIG of each (chief, workers and ps tasks, not the evaluator, as the
  cluster; here 127.0.0.1 and a free port each instead of a service at port 2222), with the
  arguments of deploy_jobs.args."""
  with open(os.path.join(deploy_jobs.DEPLOY, manifest), encoding="utf-8") as f:
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
                  *deploy_jobs.args(container["args"], train_dir, overrides)],
                 dict(helpers.env(), TF_CONFIG=json.dumps(tf_config))))
  return specs, cluster, pods


@pytest.mark.slow
def test_the_tfjob_manifest_trains_like_mirrored_and_its_evaluator_scores_the_last_step(
    tmp_path):
  specs, cluster, pods = _tfjob_pods("tfjob.yaml", tmp_path / "job")
  results = deploy_jobs.run_all(pods)
  for name, (status, out) in results.items():
    assert status == 0, f"{name}:\n{out[-3000:]}"
  # The job equals `mirrored` over as many replicas, bit for bit.
  replicas = sum(len(hosts) for hosts in cluster.values())
  args = deploy_jobs.args(specs["Chief"]["template"]["spec"]["containers"][0]["args"], tmp_path / "ref")
  args = [a for a in args if not a.startswith(("--strategy", "--num_gpus"))]
  # The reference in this process (its logical CPUs): the job's processes must match it.
  reference = helpers.call("strategies.train", "--strategy=mirrored",
                           f"--num_gpus={replicas}", *args)
  assert reference.returncode == 0, reference.stderr[-3000:]
  job_weights, ref_weights = deploy_jobs.weights(tmp_path / "job"), deploy_jobs.weights(tmp_path / "ref")
  assert job_weights.keys() == ref_weights.keys()
  for key, value in ref_weights.items():
    np.testing.assert_array_equal(job_weights[key], value, err_msg=key)
  # The evaluator scored the final checkpoint, wrote its summary, and ended by itself.
  deploy_jobs.evaluated_the_final_step(results["evaluator:0"][1], tmp_path / "job", 6)


@pytest.mark.slow
def test_the_parameter_server_tfjob_loses_a_worker_and_stops_at_the_exact_step(tmp_path):
  """A worker killed mid-run (a lost node) does not stop the training: the coordinator
  reschedules its steps, counting the one it had in flight once, and the job ends with its
  chief at the exact step (the operator's success policy); workers and ps tasks serve until
  stopped, as the operator's cleanPodPolicy does. The evaluator scores the final step."""
  from cifar10 import checkpoints  # pylint: disable=g-import-not-at-top
  train_dir = tmp_path / "job"
  # Gently: stale asynchronous gradients at the default lr 0.1 on small batches diverged.
  _, _, pods = _tfjob_pods("tfjob_parameter_server.yaml", train_dir, {
      "--batch_size": "8", "--max_steps": "60", "--save_checkpoint_steps": "10",
      "--log_frequency": "6", "--learning_rate": "0.02"})
  procs = {name: forked.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, env=env, cwd="/") for name, argv, env in pods}
  results = {}
  try:
    deadline = time.time() + 180
    while not (train_dir / "ckpt-10.index").exists() and time.time() < deadline:
      assert procs["chief:0"].poll() is None, procs["chief:0"].communicate()[0][-3000:]
      time.sleep(0.1)
    procs["worker:1"].kill()
    assert procs["chief:0"].poll() is None  # mid-run: 50 of the 60 steps still to go
    for name in ("chief:0", "evaluator:0"):
      out, _ = procs[name].communicate(timeout=max(1.0, deadline - time.time()))
      results[name] = (procs[name].returncode, out)
  finally:
    for proc in procs.values():
      proc.kill()
      proc.wait()
  for name, (status, out) in results.items():
    assert status == 0, f"{name}:\n{out[-3000:]}"
  assert checkpoints.read(str(train_dir)).global_step == 60
  assert os.path.basename(checkpoints.resolve(str(train_dir))) == "ckpt-60"
  losses = [float(x) for x in re.findall(r"step \d+, loss = (\d+\.\d+)", results["chief:0"][1])]
  assert len(losses) == 11 and np.mean(losses[-3:]) < np.mean(losses[:3]), losses
  deploy_jobs.evaluated_the_final_step(results["evaluator:0"][1], train_dir, 60)


def test_managed_cluster_tf_configs_are_read_with_their_evaluator_outside_the_cluster():
  from harness.clusters import cluster  # pylint: disable=g-import-not-at-top
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


@pytest.mark.parametrize("trainer,strategy", [("strategies.train", "multi_worker_mirrored"),
                                              ("strategies.train", "parameter_server"),
                                              ("compat_v1.train", None)])
@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
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
  scored = re.findall(r"step (\d+): precision @ 1 = \d\.\d{3}, loss = \S+ \(16 examples, ",
                      result.stdout)
  assert scored == ["2"], result.stderr[-2000:]
  assert "Scored the final step 2 of --max_steps=2; the evaluator is done" in result.stderr
  assert tf.io.gfile.glob(str(train_dir / "eval" / "events.out.tfevents.*"))


def test_the_evaluator_tasks_bad_example_count_names_its_own_flag(tmp_path, monkeypatch):
  monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["127.0.0.1:1"]},
                                              "task": {"type": "evaluator", "index": 0}}))
  # Before: "--num_examples=20000 but the split has 10000", a flag this binary does not have.
  helpers.check_one_line(helpers.call("strategies.train", "--strategy=multi_worker_mirrored",
                                      "--dataset=synthetic", "--evaluator_num_examples=20000",
                                      f"--train_dir={tmp_path}"),
                         "--evaluator_num_examples=20000 but the test split has 10000 examples")
  assert not os.listdir(tmp_path)
