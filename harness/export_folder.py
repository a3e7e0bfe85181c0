"""Where an exporter writes: TensorFlow Serving's layout, `<export_dir>/<version>/`, never
half-written. Both exporters (strategies.export, compat_v1.export) write through `exported`.

The SavedModel is written into a temporary folder beside the version's (`.tmp-<version>-...`,
a name TensorFlow Serving skips: it serves folders named by a number only), then renamed to
`<version>`: a version folder is whole or absent, whatever stops the export (a full or
read-only disk, a kill). `export_dir` may hold other versions (Serving serves the newest);
the version asked for is refused if it is there already, unless `overwrite`, and a symbolic
link planted as it (or as the export folder) is refused before anything is written. Every
file goes through tf.io.gfile: `ram://` and `gs://` work as local folders do (there the
files move one by one, saved_model.pb last: `_move`).
"""

import contextlib
import os
import uuid

from absl import logging
import tensorflow as tf

from cifar10 import checkpoints
from cifar10.errors import UsageError
from harness import ownership
from harness import run_folder


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


@contextlib.contextmanager
def exported(export_dir, version, overwrite):
  """Yields a temporary folder to write the SavedModel into; when the block ends without an
  error it becomes `<export_dir>/<version>` (replacing the old one if `overwrite`), and in
  every case the temporary folder is gone afterwards. A write the filesystem refuses is a
  UsageError naming the version folder."""
  target = check(export_dir, version, overwrite)
  ownership.usable_dir(export_dir, "export_dir")
  scratch = os.path.join(export_dir, f".tmp-{version}-{uuid.uuid4().hex[:12]}")
  try:
    yield scratch
    if tf.io.gfile.exists(target):  # --overwrite: the old version goes only now
      run_folder.remove(target)
    _move(scratch, target)
  except (OSError, tf.errors.OpError) as e:
    raise UsageError(f"cannot write {target}: {run_folder.error_words(e)}") from None
  finally:
    try:
      if tf.io.gfile.exists(scratch) or run_folder.is_link(scratch):
        run_folder.remove(scratch)
    except tf.errors.NotFoundError:
      pass  # ram:// answers `exists` for a renamed folder's old name, which holds nothing
  logging.info("Exported %s", target)


def _move(folder, target):
  """Renames `folder` to `target`: one rename on a local disk. Elsewhere (ram://, object
  storage) a folder's rename is not the files': each file moves on its own, saved_model.pb
  last, so a server that waits for it (TensorFlow Serving does) never loads half a model."""
  if run_folder.is_local(folder):
    os.rename(run_folder.os_path(folder), run_folder.os_path(target))
    return
  files = [os.path.join(root, name) for root, _, names in tf.io.gfile.walk(folder)
           for name in names]
  files.sort(key=lambda path: os.path.basename(path) == "saved_model.pb")
  for path in files:
    moved = os.path.join(target, os.path.relpath(path, folder))
    tf.io.gfile.makedirs(os.path.dirname(moved))
    tf.io.gfile.rename(path, moved)


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
  print(target, flush=True)
  return target
