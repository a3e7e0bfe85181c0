"""The flags of every binary, and their mapping to `cifar10.config` objects.

The trainers' flags are not written here: each is a declared setting of cifar10.config
(cifar10.settings: type, default, range, help, subject, whether the run record guards it), and
`define_declared` defines them all, `declared_values` reads them back into the configs. A new
setting of both trainers is a field of TrainConfig (or DeviceConfig) and the code that uses it
(BUILD.md, "Add a setting"). Each binary defines its flags into the FlagValues it is handed
(`define_train_flags(fv)`), so two binaries can be defined in one process (the tests call them
in-process). Libraries, the shared core included, never see flags: they receive the config
objects built here.
"""

import dataclasses
import os

from absl import flags

from cifar10 import config

from cifar10.eval_config import EvalConfig
from cifar10 import settings
from cifar10.errors import UsageError
from harness.command_line import flag_ranges
from harness.control import profiling
from tfbits import filesystems


def default(cls, name):
  return {f.name: f.default for f in dataclasses.fields(cls)}[name]


def define_declared(fv, cls, names=None, leave=()):
  """The flags of dataclass `cls`'s declared settings (cifar10.settings): each as its field's
  type says, with the declaration's default, range, help and subject; only those named in
  `names` if given, none named in `leave`."""
  for field, declared in settings.declared(cls):
    name = settings.flag_name(field, declared)
    if (names is not None and name not in names) or name in leave:
      continue
    args = (name, settings.flag_default(field, declared), declared.help)
    if declared.kind == "path":
      flag_ranges.path(*args, flag_values=fv)
    elif declared.bounds and len(declared.bounds) == 3:
      flag_ranges.number(*args, flag_values=fv)
    elif declared.bounds:
      flag_ranges.integer(*args, flag_values=fv)
    elif field.type is bool:
      flag_ranges.boolean(*args, flag_values=fv)
    else:
      flag_ranges.string(*args, flag_values=fv)


def declared_values(values, cls):
  """{field: its flag's value} of `cls`'s declared settings whose flags `values` has."""
  return {field.name: values[settings.flag_name(field, declared)].value
          for field, declared in settings.declared(cls)
          if settings.flag_name(field, declared) in values}


DATA_FLAGS = ("dataset", "data_dir", "download", "seed")


def define_data_flags(fv):
  define_declared(fv, config.TrainConfig, names=DATA_FLAGS)


def define_device_flags(fv, replicas=True):
  """The TF1 ConfigProto/GPUOptions settings, as flags (see cifar10.devices); without
  `replicas` (the evaluators, on one device) no --num_gpus."""
  define_declared(fv, config.DeviceConfig, leave=() if replicas else ("num_gpus",))


def define_train_flags(fv):
  """The training flags both trainers share (original names and defaults where they exist):
  every declared setting of TrainConfig and DeviceConfig."""
  define_declared(fv, config.TrainConfig)
  define_device_flags(fv)
  flag_ranges.boolean("use_fp16", False, "The original's name for --precision=fp16.",
                      flag_values=fv, subject=settings.DEVICES)


def _precision(values):
  if values.use_fp16 and values.precision not in ("fp32", "fp16"):
    raise config.UsageError(f"--use_fp16 means --precision=fp16, but --precision="
                            f"{values.precision}; give one of them")
  return "fp16" if values.use_fp16 else values.precision


def train_config(values):
  """The TrainConfig of define_train_flags' values: every declared setting's flag, the two
  that are not the value itself converted (--use_fp16, --profile_steps' "A,B")."""
  train = config.TrainConfig(**{
      **declared_values(values, config.TrainConfig), "precision": _precision(values),
      "profile_steps": profiling.parse(values.profile_steps), "flagfile": flagfile(values)})
  refuse_file("train_dir", train.train_dir)
  return train


def refuse_file(flag, path):
  """A local --flag=path that names a file, or a path under one: one line before TensorFlow
  starts (the OS's "File exists" came from making the folder, a minute later under load, and
  read like the opposite problem)."""
  if not path or filesystems.is_url(path):
    return
  whole = current = os.path.abspath(path)
  while not os.path.exists(current):  # the nearest part of it that is there
    if os.path.dirname(current) == current:
      return
    current = os.path.dirname(current)
  if not os.path.isdir(current):
    where = "is a file" if current == whole else f"is under {current}, a file"
    raise UsageError(f"--{flag}={path} {where}, not a folder: give a folder")


def flagfile(values):
  """The binary's own flags (absl's left out), every one with its value, one per line: what
  `--flagfile` reads back to run the same thing again (harness.folders.ownership keeps it in
  train_dir/flags.txt)."""
  ours = sorted((f for module, defined in values.flags_by_module_dict().items()
                 if not module.startswith("absl") for f in defined), key=lambda f: f.name)
  names, lines = set(), []
  for flag in ours:
    if flag.name not in names and flag.value is not None:
      names.add(flag.name)
      lines.append(flag.serialize())
  return "\n".join(lines) + "\n"


def define_eval_flags(fv):
  """The flags of the original cifar10_eval.py, plus the data flags."""
  e = lambda name: default(EvalConfig, name)
  define_data_flags(fv)
  define_device_flags(fv, replicas=False)
  kept = settings.CHECKPOINTS
  flag_ranges.path("eval_dir", "", "Where the eval summaries go; default: "
                   "<checkpoint_dir>/eval, beside the training run's, so `tensorboard "
                   "--logdir=<train_dir>` shows precision next to the loss.", flag_values=fv,
                   subject=kept)
  flag_ranges.string("eval_data", e("eval_data"), "'test' or 'train_eval'.", flag_values=fv,
                     subject=settings.DATA)
  flag_ranges.path("checkpoint_dir", "/tmp/cifar10_train", "Where training checkpoints "
                   "are.", flag_values=fv, subject=kept)
  flag_ranges.integer("eval_interval_secs", e("eval_interval_secs"), "How often to look for "
                      "a new checkpoint.", flag_values=fv, bounds=(1, flag_ranges.WEEK_SECS),
                      applies="without --run_once", subject=kept)
  flag_ranges.integer("num_examples", e("num_examples"), "Number of examples to run.",
                      flag_values=fv, bounds=(1, flag_ranges.EVAL_SPLIT),
                      applies="at most the split's size (test 10000, train_eval 50000)",
                      subject=settings.DATA)
  flag_ranges.integer("batch_size", e("batch_size"), "Eval batch size.", flag_values=fv)
  flag_ranges.boolean("run_once", e("run_once"), "Whether to run eval only once.",
                      flag_values=fv, subject=kept)


def eval_config(values):
  if values.run_once and filesystems.absent_locally(values.checkpoint_dir):
    # Before TensorFlow is imported (continuous evaluation may start before the trainer).
    raise UsageError(f"no checkpoint at {values.checkpoint_dir!r} (expected a folder or a "
                     "prefix with a .index file)")
  return EvalConfig(
      checkpoint_dir=values.checkpoint_dir,
      eval_dir=values.eval_dir or os.path.join(values.checkpoint_dir, "eval"),
      eval_data=values.eval_data, num_examples=values.num_examples,
      batch_size=values.batch_size, run_once=values.run_once,
      eval_interval_secs=values.eval_interval_secs, dataset=values.dataset,
      data_dir=values.data_dir, download=values.download, seed=values.seed,
      devices=device_config(values, num_gpus=1))


def device_config(values, num_gpus=None):
  """The DeviceConfig of define_device_flags' values (num_gpus: instead of --num_gpus)."""
  given = declared_values(values, config.DeviceConfig)
  return config.DeviceConfig(**{
      **given, "num_gpus": num_gpus or given["num_gpus"],
      "precision": _precision(values) if "precision" in values else "fp32"})


def define_example_flags(fv, steps, batch_help):
  """Data and device flags plus --steps and --batch_size, for the short example binaries."""
  define_data_flags(fv)
  define_device_flags(fv)
  flag_ranges.integer("steps", steps, "Training steps.", flag_values=fv)
  flag_ranges.integer("batch_size", 32, batch_help, flag_values=fv)


def example_configs(values):
  """DeviceConfig of define_example_flags, after checking the rest; UsageError on a bad value."""
  config.check_dataset(values.dataset, values.data_dir)
  return device_config(values)
