"""The range of every numeric flag of every binary: the one table that decides which values a
run could use.

Binaries define their numeric flags with `integer`, `number` and `integers`, which look the
flag up here by name: absl then checks each value while it parses the command line or a
--flagfile, so a value outside its range is one line and exit status 2 (harness.cli) before
TensorFlow is imported and before anything is written, whether or not this run uses the flag;
`--help` shows each range. A numeric flag with no row here cannot be defined. A name means the
same thing in every binary that has it (`--batch_size` is images per batch everywhere).

The bounds are what a real run could use, far from where a value stops meaning anything: an
upper bound keeps a typo (a million threads, 2**63 checkpoints) from becoming a process that
grows without end or an int32/int64 overflow deep inside TensorFlow. The config objects of
cifar10.config keep their own invariants for library callers; these ranges are the binaries'.
Path flags (`path`) are checked the same way: a URL whose filesystem TensorFlow does not
have here (hdfs:// without its plug-in) is one line before main runs. `table(fv)` is a
binary's numeric rows.
"""

import math

from absl import flags

from cifar10 import config
from cifar10 import devices
from cifar10.hparams import DEFAULT
from tfbits import filesystems

# 2**40 steps is 35 years at a millisecond a step; the global step is an int64 in both trainers.
MAX_STEPS = 2 ** 40
MAX_BATCH = 65536  # images per batch: 4.5 GB of float32 24x24x3 crops
MAX_THREADS = 1024  # a thread pool's size: past any machine's cores
MAX_TASKS = 1024  # tasks of one job
MAX_LOCAL_TASKS = 64  # a launcher's processes on one machine, each a TensorFlow of its own
WEEK_SECS = 7 * 24 * 3600
EVAL_SPLIT = DEFAULT.num_examples_per_epoch_for_train  # train_eval, the largest split scored
MAX_HIDDEN = 65536  # benchmarks.porting_scale: units of a dense layer (~17G parameters)

# name: (low, high) for integers, inclusive; floats: (low, high, low_is_open).
INTEGERS = {
    # The trainers (harness.options, harness.cluster_options, both train.py).
    "max_steps": (1, MAX_STEPS),
    "batch_size": (1, MAX_BATCH),
    "seed": (0, 2 ** 63 - 1),  # stateless random ops take int64 seeds
    "num_gpus": (1, devices.MAX_CPU_REPLICAS),
    "decay_steps": (0, MAX_STEPS),
    "log_frequency": (1, MAX_STEPS),
    "save_summaries_steps": (1, MAX_STEPS),
    "save_checkpoint_steps": (1, MAX_STEPS),
    "max_checkpoints_to_keep": (1, 10000),
    "preemption_exit_code": (3, 255),  # 0 success, 1 a crash, 2 a usage error
    "intra_op_threads": (0, MAX_THREADS),
    "inter_op_threads": (0, MAX_THREADS),
    "gpu_memory_limit_mb": (1, 2 ** 20),  # 1 TiB
    "steps_per_loop": (1, 100000),
    "ps_partition_min_bytes": (0, 2 ** 40),
    "task_index": (0, MAX_TASKS - 1),
    "slurm_port_base": (1, 65535),
    "slurm_ps_tasks": (1, MAX_TASKS),
    "peer_timeout_secs": (1, WEEK_SECS),
    "evaluator_num_examples": (1, EVAL_SPLIT),
    # The evaluators.
    "num_examples": (1, EVAL_SPLIT),
    "eval_interval_secs": (1, WEEK_SECS),
    # The exporters and strategies.predict.
    "version": (0, 2 ** 63 - 1),  # TensorFlow Serving's versions are int64
    "top_k": (1, 10),  # CIFAR-10's classes
    # The launchers: processes on this machine.
    "workers": (1, MAX_LOCAL_TASKS),
    "ps": (0, MAX_LOCAL_TASKS),
    "timeout_secs": (0, WEEK_SECS),
    # Examples, equivalence, benchmarks.
    "steps": (1, MAX_STEPS),
    "warmup": (1, MAX_STEPS),
    "repeats": (1, 1000),
    "examples": (1, 2 ** 31 - 1),
    "warmup_examples": (0, 2 ** 31 - 1),
    "target": (1, 2 ** 31 - 1),
    "threads": (1, MAX_THREADS),
    "child_threads": (0, MAX_THREADS),  # benchmarks.input_pipeline's child; 0: not one
    "child_hidden": (0, MAX_HIDDEN),  # benchmarks.porting_scale's child; 0: not one
    "hidden": (1, MAX_HIDDEN),
}
# Where a flag takes effect, if not in every run of its binaries. A value outside the range is
# refused all the same (a flag that does not apply today may apply on the next start).
APPLIES = {
    "num_gpus": "replicas; on GPUs also at most the visible ones",
    "gpu_memory_limit_mb": "GPUs",
    "per_process_gpu_memory_fraction": "GPUs",
    "decay_steps": "0: the original's formula",
    "steps_per_loop": "mirrored, one_device, multi_worker_mirrored",
    "ps_partition_min_bytes": "parameter_server",
    "task_index": "--job_name=ps|worker",
    "slurm_port_base": "a Slurm step (--cluster_resolver=slurm or auto)",
    "slurm_ps_tasks": "a Slurm step: parameter_server, the v1 ps/worker job",
    "peer_timeout_secs": "cluster jobs",
    "evaluator_num_examples": "a cluster's evaluator task; at most its split's size",
    "num_examples": "at most the split's size (test 10000, train_eval 50000)",
    "eval_interval_secs": "without --run_once",
    "ps": "compat_v1.launch: at least 1",
    "child_threads": "internal (a measurement's own process)",
    "child_hidden": "internal (a measurement's own process)",
    "threads": "at most this machine's cores",
    "version": "0: the checkpoint's global step",
}
FLOATS = {
    "learning_rate": (0.0, config.FLOAT32_MAX, True),
    "per_process_gpu_memory_fraction": (0.0, 1.0, True),
    "rel_tolerance": (0.0, 1.0, False),
    "vehicle_weight": (0.0, 1000.0, False),
}


class _FloatParser(flags.FloatParser):
  """absl's bounded float, but NaN is outside every range (absl's own bounds let it through:
  every comparison with NaN is false) and the low end may be open."""

  def __init__(self, low, high, low_open):
    super().__init__(low, high)
    self.low_open = low_open
    self.syntactic_help = (f"a finite number in the range {'(' if low_open else '['}{low:g}, "
                           f"{high:g}]")

  def is_outside_bounds(self, val):
    above_low = val > self.lower_bound if self.low_open else val >= self.lower_bound
    return not (above_low and val <= self.upper_bound and math.isfinite(val))


class _IntegersParser(flags.ListParser):
  """A comma-separated list of integers, each in its range, at least one."""

  def __init__(self, low, high):
    super().__init__()
    self.element = flags.IntegerParser(low, high)
    self.syntactic_help = f"comma-separated integers, each in the range [{low}, {high}]"

  def parse(self, argument):
    items = argument if isinstance(argument, list) else super().parse(argument)
    if not items:
      raise ValueError(f"give at least one: {self.syntactic_help}")
    return [self.element.parse(item) for item in items]

  def flag_type(self):
    return "integer list"


# The definitions take absl's arguments (name, default, help, flag_values) and add the range:
# `bounds` where a flag of one binary declares its own, else its row above.
def integer(name, default, help_text, flag_values, bounds=None):
  low, high = bounds or INTEGERS[name]
  flags.DEFINE_integer(name, default, help_text, lower_bound=low, upper_bound=high,
                       flag_values=flag_values)


def number(name, default, help_text, flag_values):
  flags.DEFINE(_FloatParser(*FLOATS[name]), name, default, help_text, flag_values=flag_values,
               serializer=flags.ArgumentSerializer())


def integers(name, default, help_text, flag_values):
  flags.DEFINE(_IntegersParser(*INTEGERS[name]), name, default, help_text,
               flag_values=flag_values, serializer=flags.CsvListSerializer(","))


def choices(name, default, allowed, help_text, flag_values):
  """A comma-separated list, each item one of `allowed`, at least one."""
  flags.DEFINE_list(name, default, help_text, flag_values=flag_values)
  flags.register_validator(
      name, lambda items: bool(items) and set(items) <= set(allowed),
      message=f"give one or more of {', '.join(allowed)}, comma-separated",
      flag_values=flag_values)


class _PathParser(flags.ArgumentParser):
  """A folder or file: a local path, or a URL of a filesystem TensorFlow has (harness.cli
  checks the scheme before the binary's main runs, importing TensorFlow only for a URL)."""

  syntactic_help = "a path, or a URL of a filesystem TensorFlow has (gs://, ram://)"

  def flag_type(self):
    return "path"


def path(name, default, help_text, flag_values):
  flags.DEFINE(_PathParser(), name, default, help_text, flag_values=flag_values,
               serializer=flags.ArgumentSerializer())


def urls(fv):
  """(flag, value) of each path flag of `fv` whose value is a URL (has a scheme)."""
  return [(name, fv[name].value) for name in sorted(fv)
          if isinstance(fv[name].parser, _PathParser) and fv[name].value
          and filesystems.is_url(fv[name].value)]


def is_numeric(flag):
  return isinstance(flag.parser, (flags.IntegerParser, flags.FloatParser, _IntegersParser))


def table(fv):
  """(flag, type, range, default, where it applies) of each numeric flag of a binary's
  FlagValues `fv`, by name: docs/flags.md is these rows."""
  return [(name, fv[name].parser.flag_type(), fv[name].parser.syntactic_help,
           (fv[name].default_as_str or "none").strip("'"), APPLIES.get(name, "every run"))
          for name in sorted(fv) if is_numeric(fv[name])]


def markdown(binaries):
  """docs/flags.md: one table per binary, from {module: FlagValues}."""
  out = ["# The range of every numeric flag",
         "",
         "What each binary accepts, checked while the command line (or a `--flagfile`) is "
         "parsed: a value outside its range is one line and exit status 2 before anything is "
         "imported or written, whether or not this run uses the flag. `--help` shows the same "
         "ranges. Written from `harness/flag_ranges.py` by `tests/test_flag_ranges.py` "
         "(`FLAGS_MD=write python -m pytest tests/test_flag_ranges.py` rewrites it).", ""]
  for module, fv in sorted(binaries.items()):
    rows = table(fv)
    if not rows:
      continue
    out += [f"## `python -m {module.removesuffix('.__main__')}`", "",
            "| flag | type | range | default | applies to |", "|---|---|---|---|---|"]
    out += [f"| `--{name}` | {kind} | {help_text} | {default} | {where} |"
            for name, kind, help_text, default, where in rows]
    out.append("")
  return "\n".join(out)
