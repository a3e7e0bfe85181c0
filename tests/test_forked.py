"""tests/forked.py: a child forked from the server's TensorFlow is the fresh interpreter's
child in everything a test of a running program reads (argv, sys.path, working directory,
environment, streams, session, exit status), TensorFlow's import aside; and what it could not
run as a fresh interpreter does starts a fresh one."""

import json
import os
import signal
import subprocess
import sys

import pytest

from tests import forked
from tests import helpers

# What a program sees of its start: the same for both kinds of child but the last two.
_PROBE = """
import json, os, sys
print(json.dumps({"argv": sys.argv, "path0": sys.path[0], "cwd": os.getcwd(),
                  "planted": os.environ.get("PLANTED"), "main": __name__,
                  "main_file": hasattr(sys.modules["__main__"], "__file__"),
                  "session": os.getsid(0) == os.getpid(), "stdin": sys.stdin.read(),
                  "tests": sorted(m for m in sys.modules if m.split(".")[0] == "tests"),
                  "interrupt": signal_name(), "pipe": pipe_name(),
                  "ppid": os.getppid(), "tensorflow": "tensorflow" in sys.modules}))
sys.stdout.flush()
os._exit(0)  # not the ~0.7 s of CPU an interpreter holding TensorFlow takes to finalize
"""
_PROBE_DEFS = """
import signal
def signal_name():
  return str(signal.getsignal(signal.SIGINT))
def pipe_name():
  return str(signal.getsignal(signal.SIGPIPE))
"""


def _both(args, **kwargs):
  """(fresh, forked): the CompletedProcess of each kind of child."""
  kwargs = {"capture_output": True, "text": True, "timeout": 120, "env": helpers.env(), **kwargs}
  return subprocess.run(args, **kwargs), forked.run(args, **kwargs)


@pytest.mark.parametrize("new_session", [False, True])
def test_a_forked_child_sees_what_a_fresh_one_sees(tmp_path, new_session):
  env = dict(helpers.env(), PLANTED="yes")
  fresh, child = _both([sys.executable, "-c", _PROBE_DEFS + _PROBE, "a", "--b=c"], input="in",
                       cwd=tmp_path, start_new_session=new_session, env=env)
  assert fresh.returncode == child.returncode == 0, fresh.stderr + child.stderr
  seen, seen_forked = json.loads(fresh.stdout), json.loads(child.stdout)
  assert seen["ppid"] == os.getpid() != seen_forked["ppid"]  # the server's child
  assert not seen["tensorflow"] and seen_forked["tensorflow"]
  for key in ("ppid", "tensorflow"):
    del seen[key], seen_forked[key]
  assert seen_forked == seen
  assert seen == {"argv": ["-c", "a", "--b=c"], "path0": "", "cwd": str(tmp_path),
                  "planted": "yes", "main": "__main__", "main_file": False,
                  "session": new_session, "stdin": "in", "tests": [],
                  "interrupt": str(signal.default_int_handler),
                  "pipe": str(signal.SIG_IGN)}


def test_a_module_runs_as_python_m_runs_it():
  fresh, child = _both([sys.executable, "-m", "json.tool", "--sort-keys"], input='{"b": 1, "a": 2}',
                       cwd="/")
  assert fresh.returncode == child.returncode == 0
  assert child.stdout == fresh.stdout == '{\n    "a": 2,\n    "b": 1\n}\n'
  assert child.stderr == fresh.stderr == ""


@pytest.mark.parametrize("code,status", [
    ("import sys; print('out'); sys.stderr.write('err\\n'); sys.exit(3)", 3),
    ("raise ValueError('broken')", 1),
    ("import os, signal; os.kill(os.getpid(), signal.SIGTERM)", -signal.SIGTERM),
    ("raise KeyboardInterrupt", -signal.SIGINT),  # Python ends by the signal, as at a Ctrl-C
])
def test_a_forked_child_ends_with_the_fresh_ones_status_and_lines(code, status):
  fresh, child = _both([sys.executable, "-c", code], cwd="/")
  assert fresh.returncode == child.returncode == status
  assert child.stdout == fresh.stdout
  # A traceback's last line; the frames above it are the server's (its file, then <string>).
  assert child.stderr.splitlines()[-1:] == fresh.stderr.splitlines()[-1:]


def test_streams_merge_and_signals_reach_the_child(tmp_path):
  with open(tmp_path / "both", "w", encoding="utf-8") as out:
    forked.run([sys.executable, "-c", "import os; os.write(1, b'1\\n'); os.write(2, b'2\\n'); "
                "os.write(1, b'3\\n'); os._exit(0)"], stdout=out, stderr=subprocess.STDOUT,
               env=helpers.env(), cwd="/", timeout=60)
  assert (tmp_path / "both").read_text(encoding="utf-8") == "1\n2\n3\n"
  proc = forked.Popen([sys.executable, "-c", "import os, signal, time\n"
                       "signal.signal(signal.SIGTERM, lambda *_: os._exit(7))\n"
                       "print('ready', flush=True)\ntime.sleep(60)"],
                      stdout=subprocess.PIPE, text=True, env=helpers.env(), cwd="/")
  assert proc.stdout.readline() == "ready\n"
  assert proc.poll() is None
  with pytest.raises(subprocess.TimeoutExpired):
    proc.wait(timeout=0.2)
  proc.terminate()
  assert proc.wait(timeout=30) == 7 and proc.poll() == 7


def test_a_run_past_its_timeout_is_killed():
  with pytest.raises(subprocess.TimeoutExpired):
    forked.run([sys.executable, "-c", "import time; print('started', flush=True); "
                "time.sleep(60)"], capture_output=True, text=True, env=helpers.env(),
               cwd="/", timeout=1)


def _other(env, name, one, another):
  """`env` with `name` set to a value it does not hold (the suite runs under emulations)."""
  return dict(env, **{name: another if env.get(name) == one else one})


def test_what_a_fork_would_change_starts_a_fresh_interpreter():
  env = helpers.env()
  args = [sys.executable, "-c", "pass"]
  assert forked.forks(args, env=env)
  assert forked.forks(args, env=dict(env, TF_CONFIG="{}", ANYTHING="1"))  # read after start
  assert not forked.forks(args, env=_other(env, "TF_ENABLE_ONEDNN_OPTS", "0", "1"))
  assert not forked.forks(args, env=_other(env, "ONEDNN_MAX_CPU_ISA", "AVX2", "AVX512_CORE"))
  assert not forked.forks(args, env=_other(env, "TF_NUM_INTRAOP_THREADS", "1", "2"))
  assert not forked.forks(args, env=dict(env, PYTHONPATH="/elsewhere"))
  assert not forked.forks(args, env={k: v for k, v in env.items() if k != "TF_CPP_MIN_LOG_LEVEL"})
  assert not forked.forks(["taskset", "-c", "0", *args], env=env)
  assert not forked.forks([sys.executable, "-S", "-c", "pass"], env=env)
  assert not forked.forks(args, env=env, preexec_fn=os.getpid)
  assert not forked.forks(args, env=env, pass_fds=(0,))
  with pytest.raises(FileNotFoundError):
    forked.run(args, env=env, cwd="/no/such/folder", timeout=60)
  # And a refused one runs as subprocess runs it: this process's child.
  result = forked.run([sys.executable, "-c", "import os; print(os.getppid())"], text=True,
                      capture_output=True, env=_other(env, "TF_ENABLE_ONEDNN_OPTS", "0", "1"),
                      timeout=60)
  assert result.stdout == f"{os.getpid()}\n"


@pytest.mark.slow  # a server of its own: TensorFlow's import, ~2.7 s of CPU
def test_a_server_that_ended_is_an_error_with_what_it_said(monkeypatch):
  monkeypatch.setattr(forked, "_server", {})  # a server of this test's own
  args = [sys.executable, "-c", "pass"]
  assert forked.run(args, env=helpers.env(), timeout=60).returncode == 0
  server = forked._server["proc"]  # pylint: disable=protected-access
  server.kill()
  server.wait()
  with pytest.raises(RuntimeError, match=r"the fork server ended \(status -9\)"):
    forked.run(args, env=helpers.env(), timeout=60)
