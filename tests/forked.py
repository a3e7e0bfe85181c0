"""`Popen` and `run`, subprocess's, for the tests' `python -m`/`-c` children whose check is
about the running program (its exit status, signals, streams, files, peers), not about its
start: such a child is forked from a Python that already imported TensorFlow
(tests/forkserver.py, one per test process, started at the first request) instead of starting
an interpreter and importing TensorFlow again: ~3 s of CPU a child on a 2-core EPYC, where the
suite starts ~50 of them.

Everything else is subprocess's own (pipes, text mode, communicate, timeouts, signals by pid):
only the fork and the wait are the server's. A request that a forked child would not run as
a fresh interpreter does starts a fresh one (subprocess.Popen itself): an executable other
than this Python, options before -m/-c, Popen options the server does not take, or an
environment that differs from the server's on a variable the interpreter or TensorFlow reads
at start (the thread pools' and oneDNN's, the log level, PYTHON*). Tests of a binary's start
(its first screen, what its import reads) use subprocess directly.
"""

import atexit
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading

_SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "forkserver.py")
# Read as the interpreter or TensorFlow start (by prefix); TF_CONFIG only when a strategy
# resolves its cluster, after the server's fork.
_AT_START = ("TF_", "ONEDNN_", "DNNL_", "CUDA_", "NVIDIA_", "XLA_", "OMP_", "KMP_", "MKL",
             "OPENBLAS_", "GOTO", "PYTHON", "LD_", "MALLOC_", "GRPC_", "LANG", "LC_", "TZ",
             "TMPDIR")
_AFTER_START = ("TF_CONFIG",)
# Popen's defaults for what the server does not take: any other value starts a fresh child.
_DEFAULTS = {"executable": None, "preexec_fn": None, "close_fds": True, "pass_fds": (),
             "shell": False, "restore_signals": True, "user": None, "group": None,
             "extra_groups": None, "umask": -1, "process_group": None}

_lock = threading.Lock()
_server = {}  # "pid" (this process's), "proc", "control", "log" once started here


def server_env():
  """The server's environment, the one tests/helpers.env() gives every child."""
  return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")


def _at_start(name):
  return name.startswith(_AT_START) and name not in _AFTER_START


def forks(args, env=None, **options):
  """Whether a child `args` in `env` (None: this process's) with Popen's `options` is forked."""
  if any(options.get(k, v) != v for k, v in _DEFAULTS.items()):
    return False
  if options.get("cwd") is not None and not os.path.isdir(options["cwd"]):
    return False  # subprocess's own FileNotFoundError, not a child that fails to chdir
  if not isinstance(args, (list, tuple)) or len(args) < 3 or args[0] != sys.executable \
      or args[1] not in ("-m", "-c"):
    return False
  theirs, ours = (os.environ if env is None else env), server_env()
  return all(theirs.get(k) == ours.get(k) for k in set(theirs) | set(ours) if _at_start(k))


def _said(log):
  log.seek(0)
  return log.read().decode(errors="replace")[-2000:]


def _control():
  """The server's request socket, starting the server at the first call. A server that ended
  is an error, with what it said (its stderr: a file, which a child replaces with its own)."""
  with _lock:
    if _server.get("pid") != os.getpid():
      ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
      log = tempfile.TemporaryFile()
      proc = subprocess.Popen([sys.executable, _SERVER, str(theirs.fileno())],
                              pass_fds=[theirs.fileno()], env=server_env(), cwd="/",
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
      theirs.close()
      ours.settimeout(300)
      try:
        ready = ours.recv(16)
      except OSError:
        ready = b""
      if ready != b"ready":
        proc.kill()
        proc.wait()
        raise RuntimeError(f"the fork server did not start: {_said(log)}")
      ours.settimeout(None)
      _server.update(pid=os.getpid(), proc=proc, control=ours, log=log)
      atexit.register(_stop, proc, ours)
    elif _server["proc"].poll() is not None:
      raise RuntimeError(f"the fork server ended (status {_server['proc'].returncode}): "
                         f"{_said(_server['log'])}")
    return _server["control"]


def _stop(proc, control):
  control.close()  # the server exits at its end of file
  try:
    proc.wait(timeout=10)
  except subprocess.TimeoutExpired:
    proc.kill()
    proc.wait()


class Popen(subprocess.Popen):
  """subprocess.Popen whose child, where `forks` allows, the fork server makes."""

  _status = None  # the forked child's status socket; None for a fresh child

  def __init__(self, args, **kwargs):
    self._forking = forks(args, **kwargs)
    super().__init__(args, **kwargs)

  def _execute_child(self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env,
                     startupinfo, creationflags, shell, p2cread, p2cwrite, c2pread, c2pwrite,
                     errread, errwrite, restore_signals, *rest):
    if not self._forking:
      return super()._execute_child(args, executable, preexec_fn, close_fds, pass_fds, cwd, env,
                                    startupinfo, creationflags, shell, p2cread, p2cwrite,
                                    c2pread, c2pwrite, errread, errwrite, restore_signals,
                                    *rest)
    start_new_session = rest[-2]  # (gid, gids, uid, umask, start_new_session, process_group)
    request = {"argv": [os.fsdecode(a) for a in args[1:]], "new_session": bool(start_new_session),
               "cwd": os.path.abspath(os.fsdecode(cwd)) if cwd is not None else os.getcwd(),
               "env": dict(os.environ if env is None else env)}
    # -1: the child has this process's own stream, as a fresh child would.
    stdin, stdout = (p2cread if p2cread != -1 else 0), (c2pwrite if c2pwrite != -1 else 1)
    stderr = errwrite if errwrite != -1 else 2
    status, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
      control = _control()
      with _lock:
        socket.send_fds(control, [json.dumps(request).encode()],
                        [theirs.fileno(), stdin, stdout, stderr])
      theirs.close()
      status.settimeout(120)
      reply = status.recv(64).decode()
      if not reply.startswith("P"):
        raise RuntimeError(f"the fork server made no child for {args!r}")
      status.settimeout(None)
    except BaseException:
      status.close()
      raise
    finally:
      theirs.close()
      self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)
    self.pid, self._status, self._child_created = int(reply[1:]), status, True
    return None

  def _ended(self, reply):
    if not reply:  # the server ended before its child: nothing can wait for it now
      raise RuntimeError(f"the fork server ended before its child {self.pid}")
    self.returncode = int(reply.decode()[1:])
    self._status.close()

  def _internal_poll(self, _deadstate=None, **kwargs):
    if self._status is None or self.returncode is not None:
      return super()._internal_poll(_deadstate, **kwargs) if self._status is None \
          else self.returncode
    if not self._waitpid_lock.acquire(False):
      return None
    try:
      if self.returncode is None:
        self._status.setblocking(False)
        try:
          self._ended(self._status.recv(64))
        except BlockingIOError:
          pass
        finally:
          if self.returncode is None:
            self._status.setblocking(True)
    except RuntimeError:
      if _deadstate is None:
        raise
      self.returncode = _deadstate
    finally:
      self._waitpid_lock.release()
    return self.returncode

  def _wait(self, timeout):
    if self._status is None:
      return super()._wait(timeout)
    with self._waitpid_lock:
      if self.returncode is None:
        self._status.settimeout(timeout)
        try:
          self._ended(self._status.recv(64))
        except socket.timeout:
          raise subprocess.TimeoutExpired(self.args, timeout) from None
        finally:
          if self.returncode is None:
            self._status.settimeout(None)
    return self.returncode


def run(*popenargs, input=None, capture_output=False, timeout=None, check=False,  # pylint: disable=redefined-builtin
        **kwargs):
  """subprocess.run, its child made by `Popen` above."""
  if input is not None:
    kwargs["stdin"] = subprocess.PIPE
  if capture_output:
    kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
  with Popen(*popenargs, **kwargs) as process:
    try:
      stdout, stderr = process.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired as e:
      process.kill()
      e.output, e.stderr = process.communicate()
      raise
    except BaseException:
      process.kill()
      raise
    retcode = process.poll()
    if check and retcode:
      raise subprocess.CalledProcessError(retcode, process.args, output=stdout, stderr=stderr)
  return subprocess.CompletedProcess(process.args, retcode, stdout, stderr)
