"""A run folder on any filesystem TensorFlow knows: its checkpoint index, recovery, debris.

Every read and write here goes through tf.io.gfile, so a --train_dir of gs://, s3:// (with
the filesystem plug-in), hdfs:// or ram:// works as a local folder does. `recover(train_dir)`
is what the driver runs before a trainer resumes (harness.driver); `is_local(path)` tells
whether the OS can see a path (locks and absolute paths only make sense there).
"""

import contextlib
import os
import re
import secrets
import stat

from absl import logging
import tensorflow as tf

from cifar10 import checkpoints
from cifar10.errors import UsageError
from porting import filesystems

# What an interrupted save leaves behind: the shards' temporary folder (`ckpt-7_temp`,
# `model.ckpt-7_temp_<hex>`) and the files written atomically through a temporary name
# (`checkpoint.tmp<hex>`, `<file>.tempstate<digits>`, `model.ckpt-7.meta.tmp<hex>`).
_DEBRIS = re.compile(r"(_temp(_[0-9a-f]+)?$|\.tempstate\d*$|\.tmp[0-9a-f]*$)")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_local(path):
  """Whether `path` is a path of this machine's OS (no scheme, or file://)."""
  return not _SCHEME.match(path) or path.startswith("file://")


def os_path(path):
  """A local path as the OS names it (without file://)."""
  return path[len("file://"):] if path.startswith("file://") else path


def is_link(path):
  """Whether local `path` is a symbolic link (nothing on object storage is)."""
  return is_local(path) and os.path.islink(os_path(path))


def is_absolute(path):
  """Absolute as a checkpoint index means it: rooted locally, or a URL."""
  return os.path.isabs(path) or bool(_SCHEME.match(path))


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


def has_checkpoint(train_dir):
  """Whether train_dir holds anything of a checkpoint (an index, a prefix's files)."""
  try:
    return any(name == "checkpoint" or ".ckpt" in name or name.startswith("ckpt-")
               for name in tf.io.gfile.listdir(train_dir))
  except tf.errors.OpError:
    return False


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


def _mtime(path):
  return tf.io.gfile.stat(path).mtime_nsec / 1e9


def _indexed(train_dir):
  """(newest, all) prefixes the `checkpoint` index file names, absolute; (None, []) if it is
  missing, empty or unreadable."""
  try:
    state = tf.train.get_checkpoint_state(train_dir)
  except Exception:  # pylint: disable=broad-except  # a damaged file: parse errors of all kinds
    return None, []
  if state is None or not state.model_checkpoint_path:
    return None, []
  absolute = lambda p: p if is_absolute(p) else os.path.join(train_dir, p)
  return absolute(state.model_checkpoint_path), [absolute(p) for p in
                                                 state.all_model_checkpoint_paths]


def write_index(train_dir, prefixes):
  """Replaces train_dir's `checkpoint` index (atomically) with `prefixes`, oldest first, the
  last the newest, as paths relative to train_dir, so the folder can be moved or copied."""
  names = [os.path.basename(p) for p in prefixes]
  # With the time each was written, so tf.train.CheckpointManager counts them against
  # max_to_keep (it never deletes a checkpoint older than last_preserved_timestamp).
  times = [_mtime(p + ".index") for p in prefixes]
  write_atomically(os.path.join(train_dir, "checkpoint"),
                   f'model_checkpoint_path: "{names[-1]}"\n'
                   + "".join(f'all_model_checkpoint_paths: "{n}"\n' for n in names)
                   + "".join(f"all_model_checkpoint_timestamps: {t!r}\n" for t in times)
                   + "last_preserved_timestamp: 0.0\n")


def _remove_debris(train_dir):
  removed = [n.rstrip("/") for n in tf.io.gfile.listdir(train_dir)
             if _DEBRIS.search(n.rstrip("/"))]
  for name in removed:
    remove(os.path.join(train_dir, name))
  if removed:
    logging.info("Removed %d file(s) of an interrupted save from %s: %s", len(removed),
                 train_dir, ", ".join(sorted(removed)))


def recover(train_dir, repair=True, max_to_keep=None):
  """The newest complete checkpoint of train_dir (or None) and the complete ones to keep
  counting against --max_checkpoints_to_keep, oldest first. Run before a trainer resumes.

  The `checkpoint` index file is only a pointer: when it is missing, damaged, names a
  checkpoint whose files are gone, or is older than a complete checkpoint on disk (a save
  interrupted between its data and the index), the files are scanned and the index is
  rewritten, with a log line naming what was taken. Paths in it become relative. Debris of
  interrupted saves is removed, and so are the checkpoints a save's rotation should have
  deleted (`max_to_keep`; see _rotate). With repair=False (a process that only reads
  train_dir) the folder is left as it is.
  """
  if not tf.io.gfile.isdir(train_dir):
    return None, []
  if repair:
    _remove_debris(train_dir)
  complete = [p for _, p in checkpoints.steps(train_dir) if checkpoints.is_complete(p)]
  complete = _readable_from_newest(complete, repair)
  newest, listed = _indexed(train_dir)
  if not complete:
    return None, []
  keep = [p for p in listed if p in complete] or complete[::-1]
  if not repair:
    return complete[0], keep
  if newest != complete[0] or any(is_absolute(p) for p in _raw_paths(train_dir)):
    if newest != complete[0]:
      logging.warning("The checkpoint index of %s names %s; resuming from %s, the newest "
                      "complete checkpoint in the folder", train_dir, newest or "nothing",
                      complete[0])
    keep = [p for p in keep if p != complete[0]] + [complete[0]]
    write_index(train_dir, keep)
  if max_to_keep:
    keep = _rotate(train_dir, complete, keep, max_to_keep)
  return complete[0], keep


def _rotate(train_dir, complete, keep, max_to_keep):
  """The newest `max_to_keep` of `keep`, after removing every other complete checkpoint.

  A v1 Saver writes the index (naming the newest max_to_keep) before it deletes the oldest
  checkpoint; a kill between the two leaves that one on disk, unlisted, for ever (the Saver
  only deletes what it lists), and an index rebuilt from the files lists them all, which the
  Saver then trims by one per save, never below the count it started with. Removing them here
  keeps the flag's count after any kill, for every trainer."""
  kept = keep[-max_to_keep:]
  extra = [p for p in complete if p not in kept]
  for prefix in extra:
    for path in tf.io.gfile.glob(prefix + ".*"):
      remove(path)
  if extra:
    logging.warning("Removed %d checkpoint(s) beyond --max_checkpoints_to_keep=%d that an "
                    "interrupted save had not deleted yet: %s", len(extra), max_to_keep,
                    ", ".join(os.path.basename(p) for p in reversed(extra)))
  if kept != keep:
    write_index(train_dir, kept)
  return kept


def _readable_from_newest(complete, repair):
  """`complete` (newest first) from the newest checkpoint that reads back whole on. A newer one
  that does not (flipped bits, same size) is set aside as `<file>.damaged` (repair) or skipped,
  with a line naming it: the run goes on from the one before, never from damaged values."""
  for index, prefix in enumerate(complete):
    why = checkpoints.unreadable(prefix)
    if why is None:
      return complete[index:]
    logging.warning("Checkpoint %s does not read back whole (%s); %s", prefix, why,
                    "set aside as .damaged, resuming from the one before it" if repair else
                    "using the one before it")
    if repair:
      for path in tf.io.gfile.glob(prefix + ".*"):
        tf.io.gfile.rename(path, path + ".damaged", overwrite=True)
  return []


def _raw_paths(train_dir):
  """The paths the index file holds, as written (absolute ones are rewritten relative)."""
  try:
    text = read_text(os.path.join(train_dir, "checkpoint")) or ""
  except (tf.errors.OpError, UnicodeDecodeError):
    return []
  return re.findall(r'^\w*model_checkpoint_paths?: "([^"]*)"', text, re.MULTILINE)
