"""The range of every numeric flag of every binary, where it applies, and its --help subject.

Binaries define their flags with `integer`, `number`, `integers` (and `path`, `string`,
`boolean`, `enum`, `listing`): absl then checks each value while it parses the command line or
a --flagfile, so a value outside its range is one line and exit status 2 (harness.command_line.cli)
before TensorFlow is imported and before anything is written, whether or not this run uses the flag;
`--help` shows each range. A range has one home: a trainer's setting declares it in
cifar10.config (cifar10.settings), a flag of one binary where that binary defines it
(`bounds=`), and a name several binaries share without a declaration in SHARED; a numeric
flag with none cannot be defined. A name means the same thing in every binary that has it
(`--batch_size` is images per batch everywhere, with the declared range).

The bounds are what a real run could use, far from where a value stops meaning anything: an
upper bound keeps a typo (a million threads, 2**63 checkpoints) from becoming a process that
grows without end or an int32/int64 overflow deep inside TensorFlow. The config objects of
cifar10.config keep their own invariants for library callers; these ranges are the binaries'.
Path flags (`path`) are checked the same way: a URL whose filesystem TensorFlow does not
have here (hdfs:// without its plug-in) is one line before main runs. `table(fv)` is a
binary's numeric rows, docs/flags.md all of them."""

import math

from absl import flags

from cifar10 import config
from cifar10 import settings
from cifar10.hparams import DEFAULT
from tfbits import filesystems

MAX_TASKS = 1024  # tasks of one job
MAX_LOCAL_TASKS = 64  # a launcher's processes on one machine, each a TensorFlow of its own
WEEK_SECS = 7 * 24 * 3600
EVAL_SPLIT = DEFAULT.num_examples_per_epoch_for_train  # train_eval, the largest split scored
DECLARED = (config.TrainConfig, config.DeviceConfig)  # what cifar10.settings declares

# The ranges of names several binaries share and no config declares; a flag of one binary
# declares its range where it is defined (`bounds`), a trainer's setting in cifar10.config.
# name: (bounds, --help subject).
SHARED = {
    "steps": ((1, config.MAX_STEPS), settings.SCHEDULE),  # examples, equivalence, benchmarks
    "workers": ((1, MAX_LOCAL_TASKS), settings.CLUSTERS),  # the launchers: local processes
    "ps": ((0, MAX_LOCAL_TASKS), settings.CLUSTERS),
    "timeout_secs": ((0, WEEK_SECS), settings.CLUSTERS),
}


def declaration(name):
  """The cifar10.settings declaration whose flag is `name`, or None."""
  for cls in DECLARED:
    for field, declared in settings.declared(cls):
      if settings.flag_name(field, declared) == name:
        return declared
  return None


def bounds_of(name):
  """The range of the numeric flag `name` where no definition gives its own."""
  declared = declaration(name)
  if declared is not None and declared.bounds:
    return declared.bounds
  if name in SHARED:
    return SHARED[name][0]
  raise KeyError(f"--{name} is numeric and has no range: give its bounds where it is defined")


def _tag(flag_values, name, applies, subject):
  """What --help and docs/flags.md read of a flag besides absl's own: where it applies (when
  not in every run) and its subject (cifar10.settings.SUBJECTS)."""
  declared = declaration(name)
  flag = flag_values[name]
  flag.applies = applies or (declared.applies if declared else None)
  flag.subject = subject or (declared.subject if declared else
                             SHARED[name][1] if name in SHARED else None)


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


# The definitions take absl's arguments (name, default, help, flag_values) and add the range
# (`bounds`; bounds_of(name) without), where it applies (`applies`, if not in every run) and
# the --help subject.
def integer(name, default, help_text, flag_values, bounds=None, applies=None, subject=None):
  low, high = bounds or bounds_of(name)
  flags.DEFINE_integer(name, default, help_text, lower_bound=low, upper_bound=high,
                       flag_values=flag_values)
  _tag(flag_values, name, applies, subject)


def number(name, default, help_text, flag_values, bounds=None, applies=None, subject=None):
  flags.DEFINE(_FloatParser(*(bounds or bounds_of(name))), name, default, help_text,
               flag_values=flag_values, serializer=flags.ArgumentSerializer())
  _tag(flag_values, name, applies, subject)


def integers(name, default, help_text, flag_values, bounds=None, applies=None, subject=None):
  flags.DEFINE(_IntegersParser(*(bounds or bounds_of(name))), name, default, help_text,
               flag_values=flag_values, serializer=flags.CsvListSerializer(","))
  _tag(flag_values, name, applies, subject)


def string(name, default, help_text, flag_values, subject=None):
  flags.DEFINE_string(name, default, help_text, flag_values=flag_values)
  _tag(flag_values, name, None, subject)


def boolean(name, default, help_text, flag_values, subject=None):
  flags.DEFINE_bool(name, default, help_text, flag_values=flag_values)
  _tag(flag_values, name, None, subject)


def enum(name, default, allowed, help_text, flag_values, subject=None):
  flags.DEFINE_enum(name, default, allowed, help_text, flag_values=flag_values)
  _tag(flag_values, name, None, subject)


def listing(name, default, help_text, flag_values, subject=None):
  flags.DEFINE_list(name, default, help_text, flag_values=flag_values)
  _tag(flag_values, name, None, subject)


def choices(name, default, allowed, help_text, flag_values):
  """A comma-separated list, each item one of `allowed`, at least one."""
  flags.DEFINE_list(name, default, help_text, flag_values=flag_values)
  flags.register_validator(
      name, lambda items: bool(items) and set(items) <= set(allowed),
      message=f"give one or more of {', '.join(allowed)}, comma-separated",
      flag_values=flag_values)


class _PathParser(flags.ArgumentParser):
  """A folder or file: a local path, or a URL of a filesystem TensorFlow has (harness.command_line.cli
  checks the scheme before the binary's main runs, importing TensorFlow only for a URL)."""

  syntactic_help = "a path, or a URL of a filesystem TensorFlow has (gs://, ram://)"

  def flag_type(self):
    return "path"


def path(name, default, help_text, flag_values, subject=None):
  flags.DEFINE(_PathParser(), name, default, help_text, flag_values=flag_values,
               serializer=flags.ArgumentSerializer())
  _tag(flag_values, name, None, subject)


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
           (fv[name].default_as_str or "none").strip("'"),
           getattr(fv[name], "applies", None) or "every run")
          for name in sorted(fv) if is_numeric(fv[name])]


def markdown(binaries):
  """docs/flags.md: one table per binary, from {module: FlagValues}."""
  out = ["# The range of every numeric flag",
         "",
         "What each binary accepts, checked while the command line (or a `--flagfile`) is "
         "parsed: a value outside its range is one line and exit status 2 before anything is "
         "imported or written, whether or not this run uses the flag. `--help` shows the same "
         "ranges. Written from each flag's declaration (a trainer's setting in "
         "`cifar10/config.py`, a binary's own flag where the binary defines it) by "
         "`tests/test_flag_ranges.py` "
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
