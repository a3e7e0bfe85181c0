"""One run per train_dir: a lock held for the whole run by the process that writes it.

`own(train_dir)` creates the folder if needed (through tf.io.gfile, so any filesystem
TensorFlow knows) and writes the owner (host, PID, command) into `train_dir/.lock`.

- A local folder: the process also holds an exclusive `flock` on that file. A second trainer
  on the same folder, from any process on this host (or any host, on file systems with
  working locks), is refused with one line naming the owner. The lock belongs to the open
  file: the kernel drops it when the process ends in any way, SIGKILL included, so nothing
  is left stuck.
- A folder on object storage or another filesystem without locks (gs://, s3://, ram://):
  there is nothing to lock. The run says so in one log line (naming the owner the `.lock`
  object recorded last, if any) and records itself there; keeping one run per folder is
  then the user's (or the job scheduler's) job.

A folder that cannot be created or written is a one-line error (`usable_dir` checks any
output folder, such as the evaluators' --eval_dir, the same way). `own_train_dir(config, replicas)`,
what the driver holds, also keeps the run's settings (harness.folders.run_record): checked before
anything is written, recorded once the folder is held; and the command's flags in
train_dir/flags.txt, every flag with its value, which `--flagfile` reads back.
"""

import contextlib
import errno
import os
import stat
import socket
import sys
import tempfile

from absl import logging
import tensorflow as tf

from cifar10.errors import UsageError
from harness.control import run_log
from harness.folders import run_folder
from harness.folders import run_record

LOCK_FILE = ".lock"
FLAGS_FILE = "flags.txt"


def _cannot(flag, path, error):
  # TensorFlow's file errors read "<file>; <what the OS said>": the folder is named already.
  return UsageError(f"cannot use --{flag}={path}: {run_folder.error_words(error)}")


def usable_dir(path, flag, made_here=False):
  """Creates folder `path` if needed; UsageError naming --`flag` if it cannot be written or
  holds a symbolic link (made_here: the project chose the folder's name, so `path` itself
  must not be a link either)."""
  if made_here and run_folder.is_link(path):
    raise UsageError(f"{path} is a symbolic link (to {os.readlink(run_folder.os_path(path))}): "
                     f"remove it, or name the folder with --{flag}")
  try:
    tf.io.gfile.makedirs(path)
    if run_folder.is_local(path):  # created exclusively, never through a planted link
      fd, probe = tempfile.mkstemp(prefix=".probe-", dir=run_folder.os_path(path))
      os.close(fd)
      os.remove(probe)
    else:
      probe = os.path.join(path, f".probe-{os.getpid()}")
      with tf.io.gfile.GFile(probe, "w") as f:
        f.write("probe")  # GFile creates the file at its first write
      tf.io.gfile.remove(probe)
  except (OSError, tf.errors.OpError) as e:
    raise _cannot(flag, path, e) from None
  run_folder.refuse_links(path, flag)


def usable_eval_dir(config):
  """usable_dir for an evaluator's EvalConfig: its default, <checkpoint_dir>/eval, is a name
  the project chose, so a link planted there is refused too."""
  usable_dir(config.eval_dir, "eval_dir",
             made_here=config.eval_dir == os.path.join(config.checkpoint_dir, "eval"))


def _owner(path):
  try:
    return (run_folder.read_text(path) or "").strip() or "another process"
  except (tf.errors.OpError, UnicodeDecodeError):
    return "another process"


def _me():
  return f"host {socket.gethostname()}, pid {os.getpid()}: {' '.join(sys.argv)}"


@contextlib.contextmanager
def own(train_dir):
  """Holds train_dir for the block; UsageError if another run holds it or it is unusable."""
  if not run_folder.is_local(train_dir):
    yield from _own_unlocked(train_dir)
    return
  import fcntl  # pylint: disable=g-import-not-at-top  # POSIX only, and only for local folders
  path = os.path.join(train_dir, LOCK_FILE)
  try:
    os.makedirs(train_dir, exist_ok=True)
    # O_NOFOLLOW: a symbolic link planted as .lock would have the owner line written into
    # (and the file truncated) wherever it points. A FIFO or device is refused the same way.
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
  except OSError as e:
    if e.errno == errno.ELOOP:
      raise UsageError(f"{path} is a symbolic link; the lock of --train_dir is never written "
                       "through one: remove it") from None
    raise _cannot("train_dir", train_dir, e) from None
  if not stat.S_ISREG(os.fstat(fd).st_mode):
    os.close(fd)
    raise UsageError(f"{path} is not a regular file (a FIFO or a device): remove it")
  try:
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      raise UsageError(f"--train_dir={train_dir} is in use by another run ({_owner(path)}); "
                       "wait for it to end or choose another --train_dir") from None
    try:
      os.ftruncate(fd, 0)
      os.write(fd, _me().encode() + b"\n")
    except OSError as e:
      raise UsageError(f"cannot write to --train_dir={train_dir}: {e.strerror or e}") from None
    yield
  finally:
    os.close(fd)  # releases the lock


def _own_unlocked(train_dir):
  path = os.path.join(train_dir, LOCK_FILE)
  try:
    tf.io.gfile.makedirs(train_dir)
    before = _owner(path) if tf.io.gfile.exists(path) else None
    run_folder.write_atomically(path, _me() + "\n")
  except (OSError, tf.errors.OpError) as e:
    raise _cannot("train_dir", train_dir, e) from None
  logging.warning("--train_dir=%s is not locked: its filesystem has no locks, so nothing "
                  "stops a second run on it; run one at a time%s", train_dir,
                  f" (it last recorded: {before})" if before else "")
  yield


@contextlib.contextmanager
def own_train_dir(config, replicas):
  """own(config.train_dir) for a run of TrainConfig `config` on `replicas` replicas; a restart
  with other settings than the recorded run is a UsageError (see harness.folders.run_record)."""
  run_folder.refuse_links(config.train_dir, "train_dir")  # before anything reads or writes
  for name in (LOCK_FILE, run_record.RECORD, FLAGS_FILE, run_log.LOG_FILE):
    run_folder.refuse_non_files(os.path.join(config.train_dir, name))
  record = run_record.check(config, replicas)
  new = not tf.io.gfile.isdir(config.train_dir) or not tf.io.gfile.listdir(config.train_dir)
  try:
    with own(config.train_dir):
      run_record.write(config.train_dir, record)
      if config.flagfile:  # the latest command, re-runnable: --flagfile=train_dir/flags.txt
        run_folder.write_atomically(
            os.path.join(config.train_dir, FLAGS_FILE),
            f"# {' '.join(sys.argv)}\n# again: --flagfile=<this file> (later flags win)\n"
            + config.flagfile)
      yield
  except UsageError:
    # A start refused before its first step (data that cannot be loaded or downloaded) in a
    # folder it made leaves no folder: the corrected command is then a new run, not a
    # restart that meets this one's lock, record and flags.
    left = {n.rstrip("/") for n in tf.io.gfile.listdir(config.train_dir)} \
        if new and tf.io.gfile.isdir(config.train_dir) else None
    if left is not None and left <= {LOCK_FILE, run_record.RECORD, FLAGS_FILE,
                                     run_log.LOG_FILE}:
      run_folder.remove(config.train_dir)
    raise
