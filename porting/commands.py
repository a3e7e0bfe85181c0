"""The porting kit's commands: their flags, and what each one does (`main`).

porting.__main__ is the command line over them (its docstring: the commands and their
arguments); `main(values, args)` runs one command and returns its exit status (compare: 0
EQUAL, 1 NOT EQUAL), every failure a PortError of one line.
"""

import importlib
import importlib.util
import logging
import os
import shutil
import sys

from absl import flags

from tfbits import filesystems
from tfbits import process_end
from porting import errors
from porting.errors import PortError

COMMANDS = ("compare", "record", "tf1_to_tf2", "tf2_to_tf1")
# porting.devices.MAX_REPLICAS, read here before TensorFlow is imported (a test holds them equal).
MAX_REPLICAS = 64
MAX_STEPS = 100_000  # a comparison's steps: each is a step of both sides, read variable by variable
MAX_TOLERANCE = 1.0  # a relative difference of 1 is 100%: past it nothing is compared


def define_flags(fv):
  flags.DEFINE_string("port", None, "module:attribute of the porting.Port (or a function "
                      "returning one).", flag_values=fv)
  flags.DEFINE_string("batches", None, "module:function: batches(replicas) -> the global "
                      "batches, a list of (images, labels) or a function of the step.",
                      flag_values=fv)
  # Ranges absl checks while parsing: a refusal before anything is imported or written.
  flags.DEFINE_integer("replicas", 2, "Towers and replicas (GPUs, or logical CPU devices).",
                       lower_bound=1, upper_bound=MAX_REPLICAS, flag_values=fv)
  flags.DEFINE_integer("steps", 3, "Steps to compare.", lower_bound=1, upper_bound=MAX_STEPS,
                       flag_values=fv)
  flags.DEFINE_string("start_from", None, "compare: a TF1 checkpoint both sides start from "
                      "(weights, optimizer slots and the global step).", flag_values=fv)
  flags.DEFINE_string("record", None, "compare: a folder `record` wrote (the TF1 side run "
                      "elsewhere); its batches and replicas are used.", flag_values=fv)
  flags.DEFINE_bool("overwrite", False, "tf1_to_tf2, tf2_to_tf1: replace a checkpoint "
                    "already at the prefix written.", flag_values=fv)
  flags.DEFINE_string("tf1_checkpoint", None, "tf2_to_tf1: the run's own TF1 checkpoint, for "
                      "the TF1 variables the port has no counterpart of (variable_map to "
                      "None: loss averages).", flag_values=fv)
  flags.DEFINE_integer("width", 100, "compare: the report's columns at most (a terminal "
                       "narrower than that: its own), the verdict, the first difference and "
                       "the causes first; 0: every line whole, the table first.",
                       lower_bound=0, upper_bound=10000, flag_values=fv)
  flags.DEFINE_float("tolerance", 0.0, "Largest max relative difference per variable that "
                     "still counts as equal (0: the same bits).", lower_bound=0.0,
                     upper_bound=MAX_TOLERANCE, flag_values=fv)
  # absl's bounds let NaN through (every comparison with it is false).
  flags.register_validator("tolerance", lambda value: 0 <= value <= MAX_TOLERANCE,
                           message=f"must be a number from 0 to {MAX_TOLERANCE:g}",
                           flag_values=fv)


def _module(reference, what):
  """The module of a module:attribute flag; PortError where it is malformed or no such module
  is there (found, not imported: before TensorFlow starts, in a tenth of a second)."""
  module_name, _, attribute = (reference or "").partition(":")
  if not module_name or not attribute:
    raise PortError(f"--{what} must be module:attribute (e.g. my_team.port:PORT), got "
                     f"{reference!r}")
  if os.getcwd() not in sys.path:
    sys.path.insert(0, os.getcwd())  # the team's own modules, from where the command runs
  try:
    missing = importlib.util.find_spec(module_name) is None
  except ImportError:  # a parent package that fails: said by its import, below
    missing = False
  if missing:
    raise PortError(f"--{what}: cannot import {module_name} (No module named "
                    f"'{module_name}')")
  return module_name, attribute


def _load(reference, what):
  module_name, attribute = _module(reference, what)
  try:
    module = importlib.import_module(module_name)
  except ImportError as e:
    raise PortError(f"--{what}: cannot import {module_name} ({e})") from None
  if not hasattr(module, attribute):
    raise PortError(f"--{what}: {module_name} has no {attribute!r}")
  return getattr(module, attribute)


def main(values, args):
  if not args:
    raise PortError(f"give a command: {', '.join(COMMANDS)}")
  if args[0] not in COMMANDS:
    import difflib  # pylint: disable=g-import-not-at-top
    near = difflib.get_close_matches(args[0], COMMANDS, n=1)
    raise PortError(f"unknown command {args[0]!r}" + (f" (did you mean {near[0]}?)" if near
                                                      else "") + f"; the commands: "
                    f"{', '.join(COMMANDS)}")
  command, paths = args[0], args[1:]
  if command == "compare" and paths:  # a typo'd flag would be a silent no-op
    raise PortError(f"compare takes no path (got {' '.join(paths)}): its inputs are flags "
                    "(--port, --batches, --record, --start_from)")
  if command == "record" and len(paths) != 1:
    raise PortError("record takes one path: the folder to record the TF1 side in")
  if command in ("tf1_to_tf2", "tf2_to_tf1") and len(paths) != 2:
    raise PortError(f"{command} takes two paths: the checkpoint to read and the one to write")
  for what, path in (("--start_from", values.start_from), ("--record", values.record),
                     ("--tf1_checkpoint", values.tf1_checkpoint),
                     *(("the path", path) for path in paths)):
    why = filesystems.missing(path)
    if why:
      raise PortError(f"{what}={path}: {why}" if what.startswith("--") else
                      f"{what} {path}: {why}")
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  # TensorFlow's Python log is not the kit's screen (the report and one line are): its
  # per-variable "Reduce to /cpu:0" INFO lines after the report, the "Error reported to
  # Coordinator" traceback before the kit's line for a replica loss that raises, the
  # saver's absl lines. Quiet while the kit runs, and set back however it ends: a caller in
  # the same process keeps its warnings (the command line quiets them again for its exit,
  # command_line).
  loggers = quiet_python_logs()
  try:
    return _run(values, command, paths)
  finally:
    for name, level in loggers.items():
      logging.getLogger(name).setLevel(level)


def say(*lines):
  """Each line to stdout; nothing once its reader is gone (process_end.write_out)."""
  if lines:
    process_end.write_out("".join(line + "\n" for line in lines))


def _width(asked):
  """The report's width: `asked`, or a narrower terminal's; 0: unwrapped."""
  if not asked or not sys.stdout.isatty():
    return asked
  return min(asked, shutil.get_terminal_size((asked, 24)).columns)


def quiet_python_logs():
  """TensorFlow's and absl's Python loggers quiet (errors only); returns their levels."""
  loggers = {name: logging.getLogger(name).level for name in ("tensorflow", "absl")}
  logging.getLogger("tensorflow").setLevel(logging.CRITICAL)
  logging.getLogger("absl").setLevel(logging.ERROR)
  return loggers


def _run(values, command, paths):
  """The command, its failures as one PortError line."""
  import porting  # pylint: disable=g-import-not-at-top  # imports TensorFlow
  try:
    _module(values.port, "port")
    if not (command == "compare" and values.record):
      _module(values.batches, "batches")
    porting.replica_devices(values.replicas if command == "compare" else 1)
    port = _load(values.port, "port")
    port = port if isinstance(port, porting.Port) else port()
    if not isinstance(port, porting.Port):
      raise PortError(f"--port={values.port} is not a porting.Port")
    if command == "compare" and values.record:
      batches = None  # the record's
    else:
      batches = _load(values.batches, "batches")(
          values.replicas if command in ("compare", "record") else 1)
    if command == "record":
      from porting import record  # pylint: disable=g-import-not-at-top
      written = record.write(port, batches, paths[0], replicas=values.replicas,
                             steps=values.steps)
      say(f"wrote {written}")
      return
    if command == "compare":
      if values.record and values["replicas"].present:
        from porting import record  # pylint: disable=g-import-not-at-top
        held = record.Recorded(values.record).replicas
        if held != values.replicas:  # the record's would be used: said, not overridden
          raise PortError(f"--replicas={values.replicas}, but the record {values.record} "
                          f"holds {held} tower(s): a record is compared at its own "
                          "replicas; drop --replicas")
      report = porting.compare(port, batches, replicas=values.replicas, steps=values.steps,
                               tolerance=values.tolerance, start_from=values.start_from,
                               record=values.record)
      # A reader gone (`| head`) reads nothing more; the status is still the verdict.
      process_end.write_out(report.text(width=_width(values.width)) + "\n")
      return 0 if report.equal else 1  # a verdict: only with a report printed
    example = batches(0) if callable(batches) else list(batches)[0]
    alone = sorted(k for k, v in (port.variable_map or {}).items() if v is None)
    notes = []  # the script's own variables (a learning rate): carried or said
    if command == "tf1_to_tf2":
      say("wrote " + porting.tf1_to_tf2(port, *paths, example, overwrite=values.overwrite,
                                          notes=notes))
      if alone:  # said, not dropped silently: the TF2 model has no place for them
        say(f"not carried (no TF2 counterpart, variable_map to None): {', '.join(alone)}")
      say(*notes)
      return
    say("wrote " + porting.tf2_to_tf1(port, *paths, example, overwrite=values.overwrite,
                                        tf1_checkpoint=values.tf1_checkpoint, notes=notes))
    if alone:
      say(f"carried from {values.tf1_checkpoint}: {', '.join(alone)}")
    say(*notes)
  except SystemExit as e:  # the team's module or tower code exited: there is no verdict
    raise PortError(errors.one_line(e, f"exited (sys.exit({e.code!r}))") + "; no comparison ran "
                     "to its end") from None
  except PortError:
    raise
  except Exception as e:  # pylint: disable=broad-except  # the team's own code failed
    raise PortError(errors.one_line(e)) from None
