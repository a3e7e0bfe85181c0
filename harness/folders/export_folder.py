"""Where an exporter writes: TensorFlow Serving's layout, `<export_dir>/<version>/`, never
half-written. Both exporters (strategies.export, compat_v1.export) write through `exported`.

The SavedModel is written into a temporary folder beside the version's (`.tmp-<version>-...`,
a name TensorFlow Serving skips: it serves folders named by a number only), then renamed to
`<version>`: a version folder is whole or absent, whatever stops the export (a full or
read-only disk, a kill). `export_dir` may hold other versions (Serving serves the newest);
the version asked for is refused if it is there already, unless `overwrite`, and a symbolic
link planted as it (or as the export folder) is refused before anything is written. Every
file goes through tf.io.gfile: `ram://` and `gs://` work as local folders do (there the
files are copied one by one, saved_model.pb last: `_finish`). `--overwrite` is marked before
the old version is touched and finished by the next export if it was stopped midway.
"""

import contextlib
import os
import re
import sys
import uuid

from absl import logging
import tensorflow as tf

from cifar10 import checkpoints
from cifar10.errors import UsageError
from harness.folders import ownership
from harness.folders import run_folder


def check(export_dir, version, overwrite):
  """UsageError, before anything is read or written, if `<export_dir>/<version>` is taken
  (unless `overwrite`) or either is a symbolic link."""
  target = os.path.join(export_dir, str(version))
  for path in (export_dir, target):
    if run_folder.is_link(path):
      raise UsageError(f"{path} is a symbolic link (to {os.readlink(run_folder.os_path(path))})"
                       ": remove it, or export to another --export_dir")
  if tf.io.gfile.exists(target) and not overwrite:
    raise UsageError(f"{target} exists: pass --overwrite to replace it, or --version=N to "
                     "export another version")
  return target


class Ops:
  """The filesystem steps of a replacement, one method each: tests stop a replacement at
  every one of them as a kill would (tests/test_replacements.py)."""

  rename = staticmethod(lambda a, b: os.rename(run_folder.os_path(a), run_folder.os_path(b)))
  remove = staticmethod(run_folder.remove)
  copy = staticmethod(lambda a, b: tf.io.gfile.copy(a, b, overwrite=True))
  makedirs = staticmethod(tf.io.gfile.makedirs)
  mark = staticmethod(lambda path: run_folder.write_atomically(path, ""))


OPS = Ops()


def _names(export_dir, version, tag):
  return (os.path.join(export_dir, f".tmp-{version}-{tag}"),
          os.path.join(export_dir, f".old-{version}-{tag}"),
          os.path.join(export_dir, f".replace-{version}-{tag}"))


@contextlib.contextmanager
def exported(export_dir, version, overwrite):
  """Yields a temporary folder to write the SavedModel into; when the block ends without an
  error it becomes `<export_dir>/<version>` (replacing the old one if `overwrite`), and in
  every case the temporary folder is gone afterwards. A write the filesystem refuses is a
  UsageError naming the version folder.

  The replacement is marked before it starts (`.replace-<version>-<tag>`, once the new model
  is whole) and `_finish` takes it to its end from any point, so an export stopped midway
  (a kill, a lost machine) is finished by the next export into the folder (`recover`). At every
  instant the version folder is the old model whole, no model (no saved_model.pb), or the new
  one whole."""
  check(export_dir, version, overwrite)
  ownership.usable_dir(export_dir, "export_dir")
  recover(export_dir, version)
  # Again: a replacement finished just now may have put the version there.
  target = check(export_dir, version, overwrite)
  tag = uuid.uuid4().hex[:12]
  scratch, _, marker = _names(export_dir, version, tag)
  committed = False
  try:
    yield scratch
    OPS.mark(marker)  # the new model is whole: from here the replacement only goes forward
    committed = True
    _finish(export_dir, version, tag)
  except (OSError, tf.errors.OpError) as e:
    raise UsageError(f"cannot write {target}: {run_folder.error_words(e)}") from None
  finally:
    if not committed:
      try:
        if tf.io.gfile.exists(scratch) or run_folder.is_link(scratch):
          OPS.remove(scratch)
      except tf.errors.NotFoundError:
        pass  # ram:// answers `exists` for a renamed folder's old name, which holds nothing
  logging.info("Exported %s", target)


def _finish(export_dir, version, tag):
  """Takes the marked replacement of `<export_dir>/<version>` by `.tmp-<version>-<tag>` to its
  end, from wherever a stop left it (each step can be done again)."""
  target = os.path.join(export_dir, str(version))
  scratch, old, marker = _names(export_dir, version, tag)
  if tf.io.gfile.exists(scratch):
    if run_folder.is_local(export_dir):
      # Two renames: the version folder is the old model, absent, then the new one.
      if tf.io.gfile.exists(old):
        OPS.remove(old)
      if tf.io.gfile.exists(target):
        OPS.rename(target, old)
      OPS.rename(scratch, target)
    else:
      # Object storage (and ram://) moves a folder file by file. The old model stops being
      # one first (its saved_model.pb, which a server loads first, goes before the rest);
      # the new one is copied with saved_model.pb last, and its folder removed only after.
      pb = os.path.join(target, "saved_model.pb")
      if tf.io.gfile.exists(pb):
        OPS.remove(pb)
      if tf.io.gfile.exists(target):
        OPS.remove(target)
      _copy(scratch, target)
      OPS.remove(scratch)
  if tf.io.gfile.exists(old):
    OPS.remove(old)
  OPS.remove(marker)


def _copy(folder, target):
  files = [os.path.join(root, name) for root, _, names in tf.io.gfile.walk(folder)
           for name in names]
  files.sort(key=lambda path: os.path.basename(path) == "saved_model.pb")
  for path in files:
    copied = os.path.join(target, os.path.relpath(path, folder))
    OPS.makedirs(os.path.dirname(copied))
    OPS.copy(path, copied)


def recover(export_dir, version=None):
  """Finishes every replacement in `export_dir` an export marked and did not end (its new
  model whole), and removes what an export of `version` stopped before that left (its
  temporary folder), each said in a line."""
  if not tf.io.gfile.isdir(export_dir):
    return
  names = [n.rstrip("/") for n in tf.io.gfile.listdir(export_dir)]
  marked = set()
  for name in names:
    match = re.match(r"^\.replace-(\d+)-([0-9a-f]+)$", name)
    if match:
      marked.add(match[2])
      _finish(export_dir, match[1], match[2])
      logging.warning("Finished replacing %s: an export stopped midway had written the new "
                      "model whole", os.path.join(export_dir, match[1]))
  for name in names:
    match = re.match(r"^\.(?:tmp|old)-(\d+)-([0-9a-f]+)$", name)
    if match and match[2] not in marked and match[1] == str(version):
      OPS.remove(os.path.join(export_dir, name))
      logging.warning("Removed %s, left by an export of version %s that was stopped before "
                      "its model was whole", os.path.join(export_dir, name), version)


def export(config, save):
  """The exporters' run: reads the checkpoint of export_options.ExportConfig `config` (its
  moving averages, or its raw weights), then `save(weights, folder)` writes the SavedModel
  into `exported`'s folder. Prints the version folder on standard output."""
  # Refusals first: nothing is read while the target is a link, or (with --version) taken.
  if config.version:
    check(config.export_dir, config.version, config.overwrite)
  kind = "ema" if config.weights == "averages" else "weights"
  path = checkpoints.resolve(config.checkpoint_dir)
  damaged = checkpoints.unreadable(path)  # any tensor, not only those exported
  if damaged:
    raise UsageError(f"checkpoint {path} does not read back whole ({damaged}): export "
                     "another one (each run keeps --max_checkpoints_to_keep)")
  state = checkpoints.read(path, kinds=(kind, "step"))
  weights = state.averages if kind == "ema" else state.weights
  version = config.version or state.global_step
  target = check(config.export_dir, version, config.overwrite)
  with exported(config.export_dir, version, config.overwrite) as folder:
    save(weights, folder)
  say(target)
  return target


def say(target, stream=None):
  """Prints the version folder on standard output in one write: print() writes the path and
  its newline apart, and unbuffered (PYTHONUNBUFFERED) the log line written on stderr between
  them spliced both into one line under `2>&1` (2 of 15 exports measured)."""
  stream = sys.stdout if stream is None else stream
  stream.write(f"{target}\n")
  stream.flush()
