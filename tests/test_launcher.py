"""The local cluster launcher: prefixes, exit status, and no process left behind.

Also: on SIGTERM the trainers get their grace period to save while their servers still run,
and a SIGKILLed launcher takes every task with it.
"""

import json
import os
import signal
import subprocess
import sys
import time

from harness.clusters import cluster
from harness.clusters import launcher


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


def test_a_parameter_server_worker_that_dies_is_reported_and_the_job_goes_on(capsys,
                                                                            monkeypatch):
  # strategies.launch marks a PSS job's workers expendable: the coordinator reschedules a
  # dead worker's steps (tests/test_deploy_tfjob.py kills a real one mid-run).
  import types  # pylint: disable=g-import-not-at-top
  from strategies import launch  # pylint: disable=g-import-not-at-top
  jobs = []
  monkeypatch.setattr(launcher, "run", lambda tasks, chief, timeout: jobs.append(
      (tasks, chief)) or 0)
  launch.main(types.SimpleNamespace(workers=2, ps=1, timeout_secs=0), ["--dataset=synthetic"])
  (tasks, chief), = jobs
  assert chief == "chief:0" and {t.name: (t.server, t.expendable) for t in tasks} == {
      "ps:0": (True, False), "worker:0": (True, True), "worker:1": (True, True),
      "chief:0": (False, False)}
  monkeypatch.undo()
  # The launcher: a SIGKILLed expendable task is one line; the chief's success ends the job.
  dies = "import os, signal; print('stepping', flush=True); os.kill(os.getpid(), signal.SIGKILL)"
  tasks = [launcher.Task("worker", 1, [sys.executable, "-c", dies], server=True,
                         expendable=True),
           _task("chief", 0, "import time; time.sleep(1.5); print('trained', flush=True)")]
  assert launcher.run(tasks, chief="chief:0", grace=2) == 0
  out = capsys.readouterr().out
  assert "[launch] worker:1 exited with status -9; the job goes on\n" in out
  assert "[worker:1] stepping\n" in out and "[chief:0] trained\n" in out


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
  text = cluster.to_json(spec, "worker", 1)
  assert json.loads(text) == {"cluster": spec, "task": {"type": "worker", "index": 1}}
  task = cluster.parse(text)
  assert (task.type, task.index, task.num_workers, task.is_chief) == ("worker", 1, 2, False)
  assert cluster.parse(cluster.to_json(spec, "chief", 0)).is_chief
  assert cluster.parse(cluster.to_json({"worker": spec["worker"]}, "worker", 0)).is_chief
  assert cluster.parse(None) == cluster.Task(None) and cluster.Task(None).num_workers == 1


def _launch_in_subprocess(tasks_code):
  """A launcher process of its own (so the test can signal it) running `tasks_code`'s tasks."""
  code = ("import sys; from harness.clusters import launcher; T = launcher.Task; "
          f"sys.exit(launcher.run({tasks_code}, chief='worker:0', grace=5))")
  root = os.path.dirname(os.path.dirname(os.path.abspath(launcher.__file__)))
  return subprocess.Popen([sys.executable, "-c", code], cwd=root, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _wait_for(path, proc):
  deadline = time.time() + 30
  while not os.path.exists(path) and time.time() < deadline:
    assert proc.poll() is None, proc.stdout.read()
    time.sleep(0.05)
  assert os.path.exists(path)


def test_sigterm_lets_workers_save_while_their_servers_still_run(tmp_path):
  ps_pid, saved = tmp_path / "ps", tmp_path / "saved"
  ps = f"import os, time; open({str(ps_pid)!r}, 'w').write(str(os.getpid())); time.sleep(600)"
  # The worker "saves" on SIGTERM, which needs its ps: it records whether the ps was alive.
  worker = ("import os, signal, sys, time\n"
            "def save(*_):\n"
            f"  pid = int(open({str(ps_pid)!r}).read())\n"
            "  time.sleep(0.5)\n"
            f"  open({str(saved)!r}, 'w').write(str(os.path.exists(f'/proc/{{pid}}')))\n"
            "  sys.exit(42)\n"
            "signal.signal(signal.SIGTERM, save)\n"
            "print('training', flush=True)\n"
            "time.sleep(600)\n")
  tasks = (f"[T('worker', 0, [sys.executable, '-c', {worker!r}]), "
           f"T('ps', 0, [sys.executable, '-c', {ps!r}], server=True)]")
  proc = _launch_in_subprocess(tasks)
  try:
    _wait_for(ps_pid, proc)
    time.sleep(1)  # the worker has installed its handler
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
  finally:
    proc.kill()
  assert proc.returncode == 130, out
  assert "[launch] stopping the job: the tasks get 5 s to save and exit" in out
  assert saved.read_text() == "True"
  assert not _alive(int(ps_pid.read_text()))


def test_a_sigkilled_launcher_takes_every_task_with_it(tmp_path):
  pid_file = tmp_path / "pid"
  worker = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); " \
           "time.sleep(600)"
  proc = _launch_in_subprocess(f"[T('worker', 0, [sys.executable, '-c', {worker!r}])]")
  try:
    _wait_for(pid_file, proc)
    proc.kill()  # no cleanup possible: PR_SET_PDEATHSIG must do it
    proc.wait(10)
  finally:
    proc.kill()
  pid = int(pid_file.read_text())
  deadline = time.time() + 10
  while _alive(pid) and time.time() < deadline:
    time.sleep(0.05)
  assert not _alive(pid)
