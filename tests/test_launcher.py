"""The local cluster launcher: prefixes, exit status, and no process left behind."""

import json
import os
import sys
import time

from cifar10 import launcher


def _task(job, index, code, server=False):
  return launcher.Task(job, index, [sys.executable, "-c", code], server=server)


def _alive(pid):
  """Running or sleeping; a zombie (killed, waiting for init to reap it) counts as gone."""
  try:
    with open(f"/proc/{pid}/stat") as f:
      return f.read().rsplit(")", 1)[1].split()[0] != "Z"
  except FileNotFoundError:
    return False


def test_chief_success_ends_the_job_and_stops_the_servers(capsys, tmp_path):
  pidfile = tmp_path / "pids"
  # The server also forks a grandchild: killing the process group must take it too.
  server = ("import os, subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', "
            "'import time; time.sleep(600)']); open(%r, 'w').write(f'{os.getpid()} {p.pid}'); "
            "print('serving', flush=True); time.sleep(600)" % str(pidfile))
  chief = "import time; time.sleep(1); print('trained', flush=True)"
  begin = time.time()
  status = launcher.run([_task("worker", 0, chief), _task("ps", 0, server, server=True)],
                        chief="worker:0", grace=2)
  assert status == 0 and time.time() - begin < 30
  out = capsys.readouterr().out
  assert "[worker:0] trained\n" in out and "[ps:0] serving\n" in out
  pids = [int(p) for p in pidfile.read_text().split()]
  time.sleep(0.2)
  assert not any(_alive(p) for p in pids)


def test_a_failing_task_stops_the_job_with_its_status(capsys):
  tasks = [_task("worker", 0, "import time; time.sleep(600)"),
           _task("worker", 1, "import sys; print('bad'); sys.exit(3)")]
  begin = time.time()
  assert launcher.run(tasks, chief="worker:0", grace=2) == 3
  assert time.time() - begin < 30
  out = capsys.readouterr().out
  assert "[worker:1] bad" in out and "worker:1 failed with exit status 3" in out


def test_timeout_stops_everything():
  begin = time.time()
  status = launcher.run([_task("worker", 0, "import time; time.sleep(600)")], chief="worker:0",
                        timeout=1, grace=1)
  assert status == 124 and time.time() - begin < 15


def test_cluster_spec_and_tf_config():
  spec = launcher.cluster(chief=1, worker=2, ps=0)
  assert list(spec) == ["chief", "worker"] and len(spec["worker"]) == 2
  ports = [int(a.split(":")[1]) for addrs in spec.values() for a in addrs]
  assert len(set(ports)) == 3 and all(a.startswith("127.0.0.1:") for a in spec["worker"])
  config = json.loads(launcher.tf_config(spec, "worker", 1))
  assert config == {"cluster": spec, "task": {"type": "worker", "index": 1}}
