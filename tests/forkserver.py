"""The fork server behind tests/forked.py: a Python that has imported TensorFlow and nothing of
this project, forking one child per request. Run as a script (`python tests/forkserver.py FD`,
FD its end of the requests' socket), so that no `tests` package is in a child's sys.modules.

A child is a `python -m MODULE ARGS` or `python -c CODE ARGS` that skipped the interpreter's
start and TensorFlow's import (~3 s of CPU on a 2-core EPYC), and nothing else: it gets the
requested stdin, stdout and stderr as its fds 0-2, its working directory, environment, argv and
sys.path[0] as `python -m`/`-c` sets them, its own session if asked, and the default signal
dispositions a fresh Python has; it ends as the interpreter ends a program (atexit handlers,
non-daemon threads, a traceback and 1 for an exception, -SIGINT for an uncaught Ctrl-C). What
it does not do again is TensorFlow's import, so nothing it prints there, nothing it reads from
the environment then: tests/forked.py sends here only requests whose environment agrees with
this server's on every variable read at start.

Each request is one SOCK_SEQPACKET message (its JSON) carrying four fds: a status socket, then
the child's stdin, stdout and stderr. On the status socket the server sends `P<pid>` once the
child exists, then `S<returncode>` (subprocess's: -N for a signal) when it ends.
"""

import builtins
import json
import os
import runpy
import selectors
import signal
import socket
import sys
import types

_FDS = 4  # status socket, stdin, stdout, stderr


def _returncode(status):
  return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _send(sock, text):
  try:
    sock.send(text.encode())
  except OSError:  # the test's end already closed: nobody waits for this child
    pass


def serve(control):
  """Forks a child per request until `control` closes (the test process ended); returns the
  child's (request, fds) in the child. Reaps every child and reports its end."""
  wake_read, wake_write = os.pipe()
  os.set_blocking(wake_read, False)
  os.set_blocking(wake_write, False)
  signal.set_wakeup_fd(wake_write)
  signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes the select through the wakeup fd
  children = {}  # pid -> its status socket
  selector = selectors.DefaultSelector()
  selector.register(control, selectors.EVENT_READ)
  selector.register(wake_read, selectors.EVENT_READ)
  while True:
    for key, _ in selector.select():
      if key.fileobj == wake_read:
        while True:
          try:
            if not os.read(wake_read, 512):
              break
          except BlockingIOError:
            break
        _reap(children)
        continue
      message, fds, _, _ = socket.recv_fds(control, 1 << 20, _FDS)
      if not message:
        sys.exit(0)  # the test process is gone; its children go on, as orphans do
      status = socket.socket(fileno=fds[0])
      sys.stdout.flush()
      sys.stderr.flush()
      pid = os.fork()
      if pid == 0:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        selector.close()
        for fd in (wake_read, wake_write, control.fileno(), fds[0]):
          os.close(fd)
        for other in children.values():
          other.close()
        status.detach()
        return json.loads(message), fds[1:]
      for fd in fds[1:]:
        os.close(fd)
      children[pid] = status
      _send(status, f"P{pid}")
      _reap(children)


def _reap(children):
  while children:
    try:
      pid, code = os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
      return
    if pid == 0:
      return
    status = children.pop(pid, None)
    if status is not None:
      _send(status, f"S{_returncode(code)}")
      status.close()


def become(request, fds):
  """Makes this forked process the requested program's; returns how to run it."""
  if request["new_session"]:
    os.setsid()
  for target, fd in enumerate(fds):
    os.dup2(fd, target)
  for fd in set(fds):
    if fd > 2:
      os.close(fd)
  os.chdir(request["cwd"])
  os.environ.clear()
  os.environ.update(request["env"])
  argv = request["argv"]
  # As `python -m` and `-c` set sys.path[0]: the working directory, absolute for -m.
  sys.path.insert(0, os.getcwd() if argv[0] == "-m" else "")
  return argv


def run(argv):
  """What `python ARGV...` runs, in a fresh __main__ module, at the top level of this script:
  an exception or a SystemExit from it ends the interpreter as it would end that program."""
  main = types.ModuleType("__main__")
  main.__builtins__ = builtins
  sys.modules["__main__"] = main
  if argv[0] == "-m":
    sys.argv = [argv[1], *argv[2:]]
    runpy._run_module_as_main(argv[1])  # pylint: disable=protected-access  # what -m calls
  else:
    sys.argv = ["-c", *argv[2:]]
    exec(compile(argv[1], "<string>", "exec"), main.__dict__)  # pylint: disable=exec-used


if __name__ == "__main__":
  del sys.path[0]  # this script's folder, which a child's sys.path does not hold
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  # CUDA's probe too (its cuInit line, on a machine without a GPU, which a binary's own stderr
  # filter drops: the filter starts at TensorFlow's first import, which a child skips). It
  # starts no thread and no runtime: a child still sets its devices and pools.
  tf.config.list_physical_devices()
  control_socket = socket.socket(fileno=int(sys.argv[1]))
  control_socket.send(b"ready")
  run(become(*serve(control_socket)))
