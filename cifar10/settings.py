"""How a run setting is declared: once, as a field of a cifar10.config dataclass.

A field made with `setting(...)` carries everything the binaries derive from it: its
command-line flag (named after the field unless `flag` says otherwise; its type from the
field's: bool, int, float, str, or `kind="path"` for a folder, file or URL), its default,
range and help, the `--help` subject it is listed under, where it takes effect if not in every
run, and whether the run record guards it (a restart with another value is refused:
harness.folders.run_record). harness.command_line.options defines both trainers' flags from these
fields and builds the configs back from the parsed values; harness.command_line.flag_ranges takes
the ranges, harness.command_line.usage the subjects, docs/flags.md is written from them.

Pure Python, like cifar10.config: the declarations are plain data (field metadata, as flax's
config_flags and ml_collections hold theirs), read by harness without this package knowing of
flags.
"""

import dataclasses
from typing import Optional

FIELDS = object()  # flag_default's default: the flag's default is the field's

# The subjects of `--help`, in the order it shows them.
DATA = "Data"
SCHEDULE = "Schedule"
CHECKPOINTS = "Checkpoints, summaries and logs"
EXPORT = "Export and prediction"
DEVICES = "Devices and precision"
CLUSTERS = "Clusters"
SUBJECTS = (DATA, SCHEDULE, CHECKPOINTS, EXPORT, DEVICES, CLUSTERS)

# strategies.train's --strategy: declared here, with no TensorFlow, so that a mistyped one is
# refused as the flags are parsed (it was refused only after TensorFlow had started).
STRATEGIES = ("mirrored", "central_storage", "one_device", "multi_worker_mirrored",
              "parameter_server")


@dataclasses.dataclass(frozen=True)
class Setting:
  """A field's declaration (its metadata under "setting")."""
  help: str
  subject: str
  flag: Optional[str] = None  # the flag's name, where it is not the field's
  # int: (low, high), inclusive; float: (low, high, low_is_open). None: not numeric.
  bounds: Optional[tuple] = None
  kind: Optional[str] = None  # "path": a folder, file or URL; None: the field's type
  guarded: bool = False  # recorded in run_config.json; another value on a restart is refused
  applies: Optional[str] = None  # where it takes effect, if not in every run
  # The flag's default where it is not the field's (a required field: --train_dir's folder).
  flag_default: object = FIELDS


def setting(default, help_text, *, subject, **declaration):
  """A dataclass field with `default` that is a setting of the binaries (Setting's fields)."""
  return dataclasses.field(default=default, metadata={
      "setting": Setting(help=help_text, subject=subject, **declaration)})


def required(help_text, *, subject, **declaration):
  """A field without a default (the binaries' flag has `flag_default`)."""
  return dataclasses.field(metadata={
      "setting": Setting(help=help_text, subject=subject, **declaration)})


def declared(cls):
  """[(field, Setting)] of dataclass `cls`'s declared fields, in the order of the class."""
  return [(f, f.metadata["setting"]) for f in dataclasses.fields(cls)
          if "setting" in f.metadata]


def flag_name(field, declaration):
  return declaration.flag or field.name


def flag_default(field, declaration):
  if declaration.flag_default is not FIELDS:
    return declaration.flag_default
  return field.default
