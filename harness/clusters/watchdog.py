"""Bounded waits for what no timeout of TensorFlow's own can end.

`deadline(seconds, message)` guards a block: if it has not returned after `seconds`, this
process is ended with `error: <message>` on stderr. Both trainers wrap their waits for peers
in it (MultiWorkerMirroredStrategy's and ParameterServerStrategy's start, the TF1 worker's
session on its ps tasks and chief): those waits hold the GIL and ignore signals, so only
another process can end them. That process is a small watchdog that lives exactly as long as
the one it guards: it waits on a pidfd of its parent, so it leaves the moment the parent
ends in any way (SIGKILL included), and its SIGKILL goes to that very process, never to a
later process that reuses the PID.
"""

import contextlib
import os
import subprocess
import sys

_WATCHDOG = """
import os, select, signal, sys, time
seconds, message, parent = float(sys.argv[1]), sys.argv[2], int(sys.argv[3])
try:
  pidfd = os.pidfd_open(parent)
except (AttributeError, OSError):  # no pidfd (Linux < 5.3): watch the parent link instead
  pidfd = None
if pidfd is not None:
  if select.select([pidfd], [], [], seconds)[0]:  # readable: the parent has ended
    sys.exit(0)
else:
  end = time.monotonic() + seconds
  while time.monotonic() < end:
    if os.getppid() != parent:  # reparented: the parent has ended
      sys.exit(0)
    time.sleep(0.1)
  if os.getppid() != parent:
    sys.exit(0)
sys.stderr.write("error: " + message + chr(10))
sys.stderr.flush()
if pidfd is not None:
  signal.pidfd_send_signal(pidfd, signal.SIGKILL)
else:
  os.kill(parent, signal.SIGKILL)
"""


@contextlib.contextmanager
def deadline(seconds, message):
  """Kills this process with `error: <message>` if the block runs longer than `seconds`
  (no limit if `seconds` is 0 or None). Yields the watchdog's Popen (or None)."""
  if not seconds:
    yield None
    return
  watchdog = subprocess.Popen([sys.executable, "-c", _WATCHDOG, str(seconds), message,
                               str(os.getpid())], stdin=subprocess.DEVNULL)
  try:
    yield watchdog
  finally:
    watchdog.kill()
    watchdog.wait()
