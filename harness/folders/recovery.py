"""A run folder's checkpoints after any kill: the newest complete one, the `checkpoint`
index, the count --max_checkpoints_to_keep allows, the debris of interrupted saves.

`recover(train_dir)` is what the driver runs before a trainer resumes (harness.control.driver).
Every read and write goes through tf.io.gfile (harness.folders.run_folder), so any filesystem
TensorFlow knows works.
"""

import os
import re

from absl import logging
import tensorflow as tf

from cifar10 import checkpoints
from harness.folders.run_folder import is_absolute
from harness.folders.run_folder import read_text
from harness.folders.run_folder import remove
from harness.folders.run_folder import write_atomically

# What an interrupted save leaves behind: the shards' temporary folder (`ckpt-7_temp`,
# `model.ckpt-7_temp_<hex>`) and the files written atomically through a temporary name
# (`checkpoint.tmp<hex>`, `<file>.tempstate<digits>`, `model.ckpt-7.meta.tmp<hex>`).
_DEBRIS = re.compile(r"(_temp(_[0-9a-f]+)?$|\.tempstate\d*$|\.tmp[0-9a-f]*$)")
# A checkpoint's own files, by prefix: what a rotation killed midway leaves of the oldest one.
_PIECE = re.compile(r"^((?:model\.)?ckpt-\d+)\.(?:index|meta|data-\d{5}-of-\d{5})$")

def has_checkpoint(train_dir):
  """Whether train_dir holds anything of a checkpoint (an index, a prefix's files)."""
  try:
    return any(name == "checkpoint" or ".ckpt" in name or name.startswith("ckpt-")
               for name in tf.io.gfile.listdir(train_dir))
  except tf.errors.OpError:
    return False


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


def _remove_pieces(train_dir):
  """Removes the files of every checkpoint that is not complete. A v1 Saver deletes the oldest
  checkpoint file by file (its .meta, its .index, then its data): a kill inside that leaves
  the data with no index, which nothing can restore and no later rotation deletes (it lists
  only what has an index). A save writes its index last, so a newer piece is no checkpoint
  either."""
  pieces = {}
  for name in tf.io.gfile.listdir(train_dir):
    match = _PIECE.match(name.rstrip("/"))
    if match:
      pieces.setdefault(match[1], []).append(name.rstrip("/"))
  removed = []
  for prefix, names in sorted(pieces.items()):
    if not checkpoints.is_complete(os.path.join(train_dir, prefix)):
      for name in names:
        remove(os.path.join(train_dir, name))
      removed += names
  if removed:
    logging.warning("Removed %d file(s) of checkpoints a killed save or rotation left "
                    "incomplete in %s: %s", len(removed), train_dir, ", ".join(sorted(removed)))


def recover(train_dir, repair=True, max_to_keep=None):
  """The newest complete checkpoint of train_dir (or None) and the complete ones to keep
  counting against --max_checkpoints_to_keep, oldest first. Run before a trainer resumes.

  The `checkpoint` index file is only a pointer: when it is missing, damaged, names a
  checkpoint whose files are gone, or is older than a complete checkpoint on disk (a save
  interrupted between its data and the index), the files are scanned and the index is
  rewritten, with a log line naming what was taken. Paths in it become relative. Debris of
  interrupted saves is removed, and so are the files of incomplete checkpoints (a rotation
  killed midway) and the checkpoints a save's rotation should have
  deleted (`max_to_keep`; see _rotate). With repair=False (a process that only reads
  train_dir) the folder is left as it is.
  """
  if not tf.io.gfile.isdir(train_dir):
    return None, []
  if repair:
    _remove_debris(train_dir)
    _remove_pieces(train_dir)
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
