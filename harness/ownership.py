"""One run per train_dir: an OS file lock held for the whole run by the process that writes it.

`own(train_dir)` creates the folder if needed, takes an exclusive `flock` on
`train_dir/.lock` and writes the owner (host, PID, command) into it. A second trainer on the
same folder, from any process on this host (or any host, on file systems with working
locks), is refused with one line naming the owner. The lock belongs to the open file: the
kernel drops it when the process ends in any way, SIGKILL included, so nothing is left stuck.
A folder that cannot be created or written is a one-line error too (`usable_dir` checks any
output folder, such as the evaluators' --eval_dir, the same way). `own_run(config, replicas)`,
what the trainers' loops hold, also keeps the run's settings (cifar10.run_record): checked
before anything is written, recorded once the folder is held.
"""

import contextlib
import fcntl
import os
import socket
import sys

from cifar10 import run_record
from cifar10.errors import UsageError

LOCK_FILE = ".lock"


def usable_dir(path, flag):
  """Creates folder `path` if needed; UsageError naming --`flag` if it cannot be written."""
  try:
    os.makedirs(path, exist_ok=True)
    probe = os.path.join(path, f".probe-{os.getpid()}")
    with open(probe, "w", encoding="utf-8"):
      pass
    os.remove(probe)
  except OSError as e:
    raise UsageError(f"cannot use --{flag}={path}: {e.strerror or e}") from None


def _owner(path):
  try:
    with open(path, encoding="utf-8") as f:
      return f.read().strip() or "another process"
  except OSError:
    return "another process"


@contextlib.contextmanager
def own(train_dir):
  """Holds train_dir for the block; UsageError if another run holds it or it is unusable."""
  path = os.path.join(train_dir, LOCK_FILE)
  try:
    os.makedirs(train_dir, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
  except OSError as e:
    raise UsageError(f"cannot use --train_dir={train_dir}: {e.strerror or e}") from None
  try:
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      raise UsageError(f"--train_dir={train_dir} is in use by another run ({_owner(path)}); "
                       "wait for it to end or choose another --train_dir") from None
    me = f"host {socket.gethostname()}, pid {os.getpid()}: {' '.join(sys.argv)}"
    try:
      os.ftruncate(fd, 0)
      os.write(fd, me.encode() + b"\n")
    except OSError as e:
      raise UsageError(f"cannot write to --train_dir={train_dir}: {e.strerror or e}") from None
    yield
  finally:
    os.close(fd)  # releases the lock


@contextlib.contextmanager
def own_run(config, replicas):
  """own(config.train_dir) for a run of TrainConfig `config` on `replicas` replicas; a restart
  with other settings than the recorded run is a UsageError (see cifar10.run_record)."""
  record = run_record.check(config, replicas)
  with own(config.train_dir):
    run_record.write(config.train_dir, record)
    yield
