"""Cluster faults are one line and every wait is bounded: stray or malformed TF_CONFIG,
peers that never come up, taken ports, flags that name no cluster.
"""

import json
import os
import signal
import subprocess
import sys

import pytest

from tests import helpers

FLAGS = ("--dataset=synthetic", "--batch_size=4", "--max_steps=2", "--save_checkpoint_steps=1")


@pytest.mark.parametrize("trainer,tf_config", [
    # Left in the shell by an earlier job: a non-chief worker of a cluster without ps tasks.
    ("strategies.train", '{"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}, '
                         '"task": {"type": "worker", "index": 1}}'),
    ("compat_v1.train", '{"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}, '
                        '"task": {"type": "worker", "index": 1}}'),
    # Not even JSON: MirroredStrategy read it and failed with a JSONDecodeError traceback.
    ("strategies.train", "not json {"),
])
@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_a_stray_tf_config_does_not_send_a_single_machine_run_elsewhere(trainer, tf_config,
                                                                      tmp_path, monkeypatch):
  monkeypatch.setenv("TF_CONFIG", tf_config)
  result = helpers.call(trainer, *FLAGS, f"--train_dir={tmp_path}")
  assert result.returncode == 0, result.stderr[-2000:]
  assert "TF_CONFIG is set but ignored" in result.stderr
  from cifar10 import checkpoints  # pylint: disable=g-import-not-at-top
  assert checkpoints.read(str(tmp_path)).global_step == 2


@pytest.mark.parametrize("trainer", [("strategies.train", "--strategy=multi_worker_mirrored"),
                                     ("strategies.train", "--strategy=parameter_server"),
                                     ("compat_v1.train", "--sync_replicas=false")])
@pytest.mark.parametrize("value,expected", [
    ("{not json", "TF_CONFIG is not JSON"),
    ('{"task": {"type": "worker", "index": "x"}}', "TF_CONFIG has a malformed task"),
    ('{"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"], "ps": ["127.0.0.1:3"]}, '
     '"task": {"type": "worker", "index": 5}}',
     "TF_CONFIG names task worker:5, but its cluster has 2 worker task(s)"),
])
def test_a_malformed_tf_config_is_one_line_where_it_matters(trainer, value, expected,
                                                            tmp_path, monkeypatch):
  monkeypatch.setenv("TF_CONFIG", value)
  module, mode = trainer
  helpers.check_one_line(helpers.call(module, mode, *FLAGS, f"--train_dir={tmp_path}"), expected)
  assert not os.listdir(tmp_path)


def _state(pid):
  """The kernel's state letter of process `pid` (Z: ended, not yet reaped), or None."""
  try:
    with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
      return f.read().rsplit(")", 1)[1].split()[0]
  except FileNotFoundError:
    return None


def test_the_peer_wait_watchdog_dies_with_the_process_it_guards():
  # Before: it slept out its whole timeout after its worker was SIGKILLed, then sent SIGKILL
  # to whatever process had the PID by then.
  import time  # pylint: disable=g-import-not-at-top
  guarded = subprocess.Popen(
      [sys.executable, "-c", "import time\nfrom harness.clusters import watchdog\n"
       "with watchdog.deadline(60, 'never') as w:\n  print(w.pid, flush=True); time.sleep(1)\n"
       "  print('waiting', flush=True); time.sleep(60)"],
      stdout=subprocess.PIPE, text=True, cwd=helpers.REPO)
  try:
    pid = int(guarded.stdout.readline())
    assert guarded.stdout.readline().strip() == "waiting"
    assert _state(pid) not in (None, "Z")
    guarded.send_signal(signal.SIGKILL)
    guarded.wait(30)
    deadline = time.time() + 3
    while _state(pid) not in (None, "Z") and time.time() < deadline:
      time.sleep(0.02)
    assert _state(pid) in (None, "Z")
  finally:
    guarded.kill()
    guarded.wait(30)


@pytest.mark.slow
def test_a_v1_worker_whose_ps_never_comes_up_is_a_bounded_error(tmp_path):
  import time  # pylint: disable=g-import-not-at-top
  from harness.clusters import launcher  # pylint: disable=g-import-not-at-top
  ps, worker = (f"127.0.0.1:{p}" for p in launcher.free_ports(2))
  begin = time.time()
  result = helpers.run("compat_v1.train", "--job_name=worker", "--task_index=0",
                       f"--ps_hosts={ps}", f"--worker_hosts={worker}", "--peer_timeout_secs=2",
                       *FLAGS, f"--train_dir={tmp_path}", timeout=120, fork=True)
  assert result.returncode != 0 and time.time() - begin < 60
  assert helpers.error_line(result) == (
      f"error: worker:0: the ps tasks and the chief of {{'ps': ['{ps}'], 'worker': "
      f"['{worker}']}} were not all up within 2 s (--peer_timeout_secs); check that each one "
      "was started and that its port is reachable")
  assert not [f for f in os.listdir(tmp_path) if "ckpt" in f or f == "checkpoint"]


@pytest.mark.parametrize("trainer", ["strategies.train", "compat_v1.train"])
def test_more_cpu_replicas_than_a_sane_bound_are_refused_up_front(trainer, tmp_path):
  # Before: --num_gpus=4096 on a machine without GPUs built towers until memory ran out.
  helpers.check_one_line(
      helpers.call(trainer, *FLAGS, "--num_gpus=4096", f"--train_dir={tmp_path}"),
      "flag --num_gpus=4096: 4096 is not an integer in the range [1, 64]")
  assert not os.listdir(tmp_path)


def _cluster(*jobs):
  from harness.clusters import launcher  # pylint: disable=g-import-not-at-top
  ports = iter(launcher.free_ports(len(jobs)))
  cluster = {}
  for job in jobs:
    cluster.setdefault(job, []).append(f"127.0.0.1:{next(ports)}")
  return cluster


@pytest.mark.parametrize("args,expected", [
    (("compat_v1.train", "--job_name=worker", "--ps_hosts=127.0.0.1:2222",
      "--worker_hosts=garbage"), "the worker job's address 'garbage' is not host:port"),
    (("compat_v1.train", "--job_name=ps", "--ps_hosts=127.0.0.1:99999",
      "--worker_hosts=127.0.0.1:2"), "the ps job's address '127.0.0.1:99999' is not host:port"),
    (("strategies.train", "--strategy=parameter_server"),
     "--strategy=parameter_server needs TF_CONFIG with chief, worker and ps tasks"),
    (("strategies.train", "--strategy=multi_worker_mirrored"),
     "--strategy=multi_worker_mirrored needs TF_CONFIG (one per worker)"),
])
def test_cluster_flags_that_name_no_cluster_are_one_line(args, expected, tmp_path, monkeypatch):
  monkeypatch.delenv("TF_CONFIG", raising=False)
  helpers.check_one_line(helpers.call(*args, *FLAGS, f"--train_dir={tmp_path}"), expected)
  assert not os.listdir(tmp_path)


@pytest.mark.parametrize("args,jobs,task", [
    (("strategies.train", "--strategy=multi_worker_mirrored"), ("worker", "worker"), "worker"),
    (("strategies.train", "--strategy=parameter_server"), ("chief", "worker", "ps"), "chief"),
    (("strategies.train", "--strategy=parameter_server"), ("chief", "worker", "ps"), "ps"),
    (("compat_v1.train",), ("worker", "ps"), "ps"),
    (("compat_v1.train",), ("worker", "ps"), "worker"),
])
def test_a_task_whose_port_is_taken_is_one_line(args, jobs, task, tmp_path, monkeypatch):
  import socket  # pylint: disable=g-import-not-at-top
  from harness.clusters import cluster  # pylint: disable=g-import-not-at-top
  spec = _cluster(*jobs)
  with socket.socket() as taken:  # another process's server on this task's port
    taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    address = spec[task][0]
    taken.bind(("127.0.0.1", int(address.rpartition(":")[2])))
    taken.listen()
    monkeypatch.setenv("TF_CONFIG", cluster.to_json(spec, task, 0))
    helpers.check_one_line(helpers.call(*args, *FLAGS, "--peer_timeout_secs=5", f"--train_dir={tmp_path}"),
           f"{task}:0 cannot listen on {address}: port {address.rpartition(':')[2]} is in use "
           "by another process on this machine")
  assert not os.listdir(tmp_path)


@pytest.mark.parametrize("kind,message,peer", [
    # The peer's socket closed in the middle of an all-reduce (a SIGKILLed worker).
    ("UnavailableError", "Graph execution error:\n\nCollective ops is aborted by: Socket "
     "closed\nAdditional GRPC error information from remote target /job:worker/replica:0/"
     "task:1 while calling /tensorflow.WorkerService/RecvBuf:", "/job:worker/replica:0/task:1"),
    # The coordination service saw its heartbeats stop.
    ("UnavailableError", "Collective ops is aborted by: Error reported from /job:worker/task:1:"
     " The following tasks are unhealthy (stopped sending heartbeats):\n/job:worker/replica:0/"
     "task:1\nThe tasks have crashed.", "/job:worker/replica:0/task:1"),
    # A ParameterServerStrategy chief whose ps task was SIGKILLed (before: its traceback).
    ("UnavailableError", "Graph execution error:\n\n2 root error(s) found.\n  (0) UNAVAILABLE:"
     "  failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:45979: Failed"
     " to connect to remote host: Connection refused\nAdditional GRPC error information from "
     "remote target /job:ps/replica:0/task:0/device:CPU:0 while calling /tensorflow.eager."
     "EagerService/RunComponentFunction:\n", "/job:ps/replica:0/task:0/device:CPU:0"),
])
def test_a_peer_lost_mid_run_is_one_line_with_a_status_to_retry(kind, message, peer, capsys):
  from harness.command_line import cli  # pylint: disable=g-import-not-at-top
  error = type(kind, (Exception,), {})(message)

  def main(values):  # pylint: disable=unused-argument
    raise error
  assert cli.call(lambda fv: None, main, []) == 143  # TFJob's ExitCode policy retries it
  assert capsys.readouterr().err.strip() == (
      f"error: a peer of this job stopped ({peer}); this task cannot go on alone: start the "
      "job again, and every task resumes from the newest checkpoint of --train_dir")
  assert cli.peer_lost(type(kind, (Exception,), {})("Socket closed")) is None


@pytest.mark.parametrize("environ,expected", [
    ({"SLURM_PROCID": "abc"}, "SLURM_PROCID='abc' is not a number"),
    ({"SLURM_PROCID": ""}, "SLURM_PROCID='' is not a number"),
    # (auto: the task count decides whether a step of one task trains alone)
    ({"SLURM_PROCID": "0", "SLURM_NTASKS": "abc", "resolver": "auto"},
     "SLURM_STEP_NUM_TASKS or SLURM_NTASKS='abc'"),
    # Unclosed: before, compat_v1's ps served at node[1-:8888 until it was killed.
    ({"SLURM_PROCID": "0", "SLURM_STEP_NODELIST": "node[1-", "SLURM_NTASKS": "2"},
     "SLURM node list 'node[1-' is not in Slurm's host list form"),
    # Before: a list of 10**8 host names, until the memory ran out.
    ({"SLURM_PROCID": "0", "SLURM_STEP_NODELIST": "n[0-99999999]", "SLURM_NTASKS": "2"},
     "names more than 100000 nodes"),
])
@pytest.mark.parametrize("trainer", ["strategies.train", "compat_v1.train"])
def test_a_slurm_step_that_is_not_one_is_one_line(trainer, environ, expected, tmp_path,
                                                  monkeypatch):
  for name in [n for n in os.environ if n.startswith("SLURM") or n == "TF_CONFIG"]:
    monkeypatch.delenv(name)
  environ = {"SLURM_JOB_NODELIST": "localhost", "resolver": "slurm", **environ}
  for name, value in environ.items():
    if name != "resolver":
      monkeypatch.setenv(name, value)
  strategy = ["--strategy=multi_worker_mirrored"] if trainer == "strategies.train" else []
  helpers.check_one_line(helpers.call(trainer, *FLAGS, *strategy,
                                      f"--cluster_resolver={environ['resolver']}",
                                      f"--train_dir={tmp_path}"), expected)
  assert not os.listdir(tmp_path)


def test_an_evaluator_task_whose_chief_is_gone_stops_in_one_line(tmp_path, monkeypatch):
  import time  # pylint: disable=g-import-not-at-top
  from harness.clusters import launcher  # pylint: disable=g-import-not-at-top
  # A chief address where nothing listens any more (its pod was killed): before, the
  # evaluator task waited for its final checkpoint for ever.
  chief = f"127.0.0.1:{launcher.free_ports(1)[0]}"
  monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"chief": [chief],
                                                          "worker": ["127.0.0.1:1"]},
                                              "task": {"type": "evaluator", "index": 0}}))
  began = time.time()
  line = helpers.check_one_line(
      helpers.call("strategies.train", "--strategy=parameter_server", "--dataset=synthetic",
                   "--max_steps=5", "--peer_timeout_secs=2", f"--train_dir={tmp_path}"),
      f"the chief ({chief}) has not answered for 2 s (--peer_timeout_secs) and the "
      "checkpoint of step 5 has not come: the job seems gone; the evaluator stops")
  assert time.time() - began < 30, line
