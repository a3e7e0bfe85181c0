"""A run folder's files on any filesystem TensorFlow knows: written whole, never through a
planted link, read only when they are files.

Every read and write here goes through tf.io.gfile, so a --train_dir of gs://, s3:// (with
the filesystem plug-in), hdfs:// or ram:// works as a local folder does; `is_local(path)`
tells whether the OS can see a path (locks and absolute paths only make sense there). Its
checkpoints, their index and their recovery after a kill are harness.folders.recovery's.
"""

import contextlib
import os
import secrets
import stat

from absl import logging
import tensorflow as tf

from cifar10.errors import UsageError
from tfbits import filesystems



def error_words(error):
  """What an OSError or a TensorFlow file error says, without TensorFlow's "<file>; " prefix
  and " [Op:...]" suffix (the caller names the file), on one line."""
  words = getattr(error, "strerror", None) or getattr(error, "message", None) or str(error)
  return words.split(" [Op:")[0].rsplit("; ", 1)[-1].splitlines()[0] if words else ""


def is_local(path):
  """Whether `path` is a path of this machine's OS (no scheme, or file://)."""
  return not filesystems.is_url(path) or path.startswith("file://")


def os_path(path):
  """A local path as the OS names it (without file://)."""
  return path[len("file://"):] if path.startswith("file://") else path


def is_link(path):
  """Whether local `path` is a symbolic link (nothing on object storage is)."""
  return is_local(path) and os.path.islink(os_path(path))


def is_absolute(path):
  """Absolute as a checkpoint index means it: rooted locally, or a URL."""
  return os.path.isabs(path) or filesystems.is_url(path)


def refuse_non_files(path):
  """UsageError if something that is not a regular file sits at `path` (a folder on any
  filesystem; locally also a FIFO or a device): the run's own files are replaced by a rename,
  which fails on a folder, and a read of a FIFO blocks. A symbolic link is refuse_links'."""
  local = is_local(path) and not os.path.islink(os_path(path))
  if tf.io.gfile.isdir(path) or (local and os.path.exists(os_path(path))
                                 and not stat.S_ISREG(os.stat(os_path(path)).st_mode)):
    raise UsageError(f"{path} is a folder (or not a regular file) where the run keeps a file "
                     "of that name: move it away")


def check_filesystem(path, what):
  """UsageError if `path` is a URL whose scheme TensorFlow has no filesystem for here (hdfs://
  or s3:// without their plug-in; a typo): every later read or write would fail deep inside
  TensorFlow or tensorflow-datasets. `what` names where the path came from (a flag, or
  words for an argument)."""
  why = filesystems.missing(path)
  if why:
    raise UsageError(f"{what}={path}: {why}" if what.startswith("--") else
                     f"{what} {path}: {why}")


def write_atomically(path, text):
  """Writes `text` to `path` through a temporary name and a rename: readers see the old file
  or the new one (on object storage the rename is a copy, still never a half-written file)."""
  refuse_non_files(path)
  # The temporary name is debris if a crash comes between (see recover). Locally it is
  # unpredictable and created exclusively, never through a link planted at it; the rename
  # replaces a link planted at `path` itself rather than writing where it points.
  if is_local(path):
    tmp = f"{os_path(path)}.tmp{secrets.token_hex(8)}"
    try:
      fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
      with os.fdopen(fd, "w") as f:
        f.write(text)
      os.replace(tmp, os_path(path))
    except OSError as e:  # a full disk fails the write, which names no file: name `path`
      with contextlib.suppress(OSError):
        os.remove(tmp)
      raise OSError(e.errno, e.strerror, os_path(path)) from None
    return
  tmp = f"{path}.tmp{secrets.token_hex(8)}"
  with tf.io.gfile.GFile(tmp, "w") as f:
    f.write(text)
  tf.io.gfile.rename(tmp, path, overwrite=True)


def refuse_links(folder, flag):
  """UsageError naming the first symbolic link inside local `folder`, at any depth.

  TensorFlow's own writers (checkpoint shards and their `_temp` folder, events files, the
  profiler's plugins/ folder) open their files through whatever link sits at the name, so a
  link planted in a run folder would have the run write, truncate or delete files outside it.
  The project never makes one; the driver checks before anything is written (and `remove`
  never follows one)."""
  if not is_local(folder) or not os.path.isdir(os_path(folder)):
    return
  for root, dirs, files in os.walk(os_path(folder)):  # never descends into a link
    for name in sorted(dirs + files):
      path = os.path.join(root, name)
      if os.path.islink(path):
        raise UsageError(f"{path} is a symbolic link (to {os.readlink(path)}) inside "
                         f"--{flag}: TensorFlow writes through links, and nothing a run "
                         "writes may land outside its folder: remove it")


def unlink_links(folder):
  """Removes symbolic links planted directly in local `folder` since refuse_links ran (the
  driver does before every save, whose files TensorFlow opens through links), each with a
  warning. Returns their names."""
  if not is_local(folder):
    return []
  links = [e.name for e in os.scandir(os_path(folder)) if e.is_symlink()]
  for name in links:
    path = os.path.join(os_path(folder), name)
    logging.warning("Removed %s, a symbolic link (to %s) planted in the run folder while "
                    "it ran: the save would have written through it", path, os.readlink(path))
    os.unlink(path)
  return links


def remove(path):
  """Removes file or folder `path` (and everything in it). A symbolic link is removed itself:
  its target, outside the folder, is never touched."""
  if is_link(path):
    os.unlink(os_path(path))
  elif tf.io.gfile.isdir(path):
    tf.io.gfile.rmtree(path)
  elif tf.io.gfile.exists(path):
    tf.io.gfile.remove(path)


def read_text(path):
  """The text of file `path`, or None if there is none. A local path that is not a regular
  file (a FIFO would block the read for ever; a folder) is a UsageError."""
  if not tf.io.gfile.exists(path):
    return None
  if is_local(path) and not stat.S_ISREG(os.stat(path).st_mode):
    raise UsageError(f"{path} is not a regular file (a folder, a FIFO or a device): move it "
                     "away")
  with tf.io.gfile.GFile(path, "r") as f:
    return f.read()
