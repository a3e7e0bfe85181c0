"""The flags of the exporters (strategies.export, compat_v1.export) and of strategies.predict,
and the ExportConfig they become."""

import dataclasses

from cifar10 import settings
from cifar10.errors import UsageError
from harness.command_line import flag_ranges
from tfbits import filesystems

WEIGHTS = ("averages", "raw")
EXPORT = settings.EXPORT


@dataclasses.dataclass(frozen=True)
class ExportConfig:
  checkpoint_dir: str
  export_dir: str
  version: int  # 0: the checkpoint's global step
  weights: str  # one of WEIGHTS
  overwrite: bool


def define_export_flags(fv):
  flag_ranges.path("checkpoint_dir", None, "The checkpoint to export: a folder (its newest "
                   "checkpoint) or a checkpoint prefix, of either trainer or of the original "
                   "tutorial.", flag_values=fv, subject=settings.CHECKPOINTS)
  flag_ranges.path("export_dir", None, "Where the SavedModel goes, as TensorFlow Serving "
                   "reads it: <export_dir>/<version>/.", flag_values=fv, subject=EXPORT)
  flag_ranges.integer("version", 0, "The version folder's number (0: the checkpoint's "
                      "global step).", flag_values=fv,
                      bounds=(0, 2 ** 63 - 1),  # TensorFlow Serving's versions are int64
                      applies="0: the checkpoint's global step", subject=EXPORT)
  flag_ranges.enum("weights", "averages", WEIGHTS, "Export the moving averages of the "
                   "weights (what the evaluators score) or the raw weights.", flag_values=fv,
                   subject=EXPORT)
  flag_ranges.boolean("overwrite", False, "Replace <export_dir>/<version> if it exists.",
                      flag_values=fv, subject=EXPORT)


def export_config(values):
  """The ExportConfig of define_export_flags' values; UsageError without the two folders."""
  if not (values.checkpoint_dir and values.export_dir):
    raise UsageError("name the checkpoint and where it goes: --checkpoint_dir=... "
                     "--export_dir=...")
  if filesystems.absent_locally(values.checkpoint_dir):  # before TensorFlow is imported
    raise UsageError(f"no checkpoint at {values.checkpoint_dir!r} (expected a folder or a "
                     "prefix with a .index file)")
  return ExportConfig(checkpoint_dir=values.checkpoint_dir, export_dir=values.export_dir,
                      version=values.version, weights=values.weights,
                      overwrite=values.overwrite)


def define_predict_flags(fv):
  flag_ranges.path("model", None, "A SavedModel (an export_dir: its newest version; or a "
                   "version folder) or a checkpoint (a folder or prefix: its moving "
                   "averages).", flag_values=fv, subject=EXPORT)
  flag_ranges.integer("top_k", 3, "How many classes to print for each image.", flag_values=fv,
                      bounds=(1, 10), subject=EXPORT)  # CIFAR-10's classes
