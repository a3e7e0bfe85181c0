"""How every binary runs: its flags parsed, its errors one line, its exit status meaningful.

A binary is two functions: `define_flags(fv)` puts its flags into the FlagValues it is given,
and `main(values)` (or `main(values, args)` for the launchers, which pass on what follows
`--`) does the work. `app_run(fv, define_flags, main)` is the `python -m` form (`fv`: the
global FlagValues, absl's flags.FLAGS); `call(define_flags, main, argv)` runs the same binary
inside this process (the tests do), with the same parsing, the same messages and the exit
status returned instead of exiting.

  OneLineError          error: <message>  exit 2 (UsageError, PortError; main may also
                                            return its exit status)
  run_errors.Stopped     stopped: <message> exit --preemption_exit_code (143); 130 on Ctrl-C
  KeyboardInterrupt     error: interrupted  exit 130
  TF placement failure  error: <one line>   exit 2 (soft placement off, see `placement`)
  disk full, read-only  error: <one line>   exit 2 (see `storage`)
  port taken            error: <one line>   exit 2 (see `server`)
  a peer died mid-run   error: <one line>   exit 143, what restart policies retry (`peer_lost`)
"""

import re
import sys

from absl import app
from absl import flags
from absl import logging

from cifar10.errors import UsageError
from harness.command_line import flag_ranges
from tfbits import process_end
from harness.control import progress
from harness.control import run_log
from tfbits import quiet
from harness.control import run_errors
from harness.command_line import usage
from tfbits import filesystems
from tfbits.errors import OneLineError

# TensorFlow's words for "this op cannot go where it was asked" (eager, tf.function, Session).
_PLACEMENT = (r"Could not satisfy device specification '(?P<device>[^']+)'",
              r"Unable to find any devices for spec (?P<device>\S+)",
              r"Cannot assign a device for operation (?P<op>[^:]+):.*?explicitly assigned to "
              r"(?P<device>\S+)")


def placement(message):
  """The UsageError for TensorFlow's placement failure `message`, or None if it is not one.

  With soft placement off, an op pinned to a device that does not exist (a GPU on a machine
  without one) or that has no kernel for it (the TF1 guides' int32 variable on a GPU) fails
  with a long graph dump; this says what happened and what to do in one line.
  """
  for pattern in _PLACEMENT:
    match = re.search(pattern, message, re.DOTALL)
    if match:
      op = match.groupdict().get("op")
      what = f"op {op}" if op else "an op"
      return UsageError(f"{what} cannot run on {match['device']}: no such device here, or no "
                        "kernel for it there, and --allow_soft_placement is off; turn it on to "
                        "let TensorFlow fall back to another device (the CPU)")
  return None


# What the OS says when a folder cannot take a write; TensorFlow's file system errors end with
# the same words (its ResourceExhausted/PermissionDenied/FailedPrecondition from errno).
_STORAGE = re.compile(r"(?:(?P<path>/[^\s;:,]+)[;:,]? )?(?:\[Errno \d+\] )?"
                      r"(?P<why>No space left on device|Disk quota exceeded|"
                      r"Read-only file system|Permission denied|Operation not permitted)")


def storage(error):
  """The UsageError for a write that the disk refused (full, over quota, read-only, not
  permitted, immutable), from an OSError or TensorFlow error `error`; None if it is not one.

  Checkpoints are written to temporary names and published by replacing the index, so a
  refused write leaves the last complete checkpoint as it was: the run can go on from it.
  """
  if not isinstance(error, OSError) and not any(
      t.__name__ == "OpError" for t in type(error).__mro__):
    return None
  match = _STORAGE.search(str(error))
  if not match:
    return None
  path = getattr(error, "filename", None) or match["path"]
  verb = "access" if match["why"] in ("Permission denied", "Operation not permitted") \
      else "write to"
  where = f" {path}" if path else " a file"
  return UsageError(f"cannot {verb}{where}: {match['why']}; the checkpoints already written "
                    "are complete, and a run started again resumes from the newest")


def server(error):
  """The UsageError for a gRPC server that could not start (its port taken after the
  entry point's check, cluster.check_port, or not available here); None if not one."""
  if type(error).__name__ == "UnknownError" and "Could not start gRPC server" in str(error):
    return UsageError("this task's gRPC server could not start: its port (TF_CONFIG, "
                      "--ps_hosts/--worker_hosts) is in use or not an address of this machine")
  return None


# TensorFlow's words when a peer is gone: the coordination service's heartbeats stopped, its
# health check found the peer down, the peer's socket closed mid-collective, or (a
# ParameterServerStrategy chief) a remote function's ps or worker no longer answers.
_PEER_LOST = re.compile(r"Collective ops is aborted|stopped sending heartbeats|is down|"
                        r"(?:Socket closed|failed to connect to all addresses)[^\n]*\n"
                        r"Additional GRPC error information from remote target /job:")
_PEER = re.compile(r"(?:remote target |stopped sending heartbeats\):\s*)(/job:\S+?):?\s|"
                   r"(/job:\S+) is down")


def peer_lost(error):
  """The UsageError for a multi-worker job whose peer died mid-run (its collectives fail once
  the strategy notices, within seconds), or None if `error` is not one."""
  if type(error).__name__ not in ("UnavailableError", "InternalError", "AbortedError") \
      or not _PEER_LOST.search(str(error)):
    return None
  peer = _PEER.search(str(error))
  who = f" ({peer[1] or peer[2]})" if peer else ""
  return UsageError(f"a peer of this job stopped{who}; this task cannot go on alone: start "
                    "the job again, and every task resumes from the newest checkpoint of "
                    "--train_dir")


def check_paths(named):
  """UsageError for the first (what, path) of `named` that is a URL of a filesystem
  TensorFlow does not have here; every path flag is checked so before main runs, and a
  binary calls this for the paths among its arguments. TensorFlow is imported only for a URL."""
  for what, path in named:
    if path and filesystems.is_url(path):
      from harness.folders import run_folder  # pylint: disable=g-import-not-at-top
      run_folder.check_filesystem(path, what)


class Exit(Exception):
  """A binary's end with `status`, its message already printed."""

  def __init__(self, status):
    super().__init__(status)
    self.status = status


def _fail(message, status=2):
  run_log.say(f"error: {message}")
  raise Exit(status)


def _main(main, values, args, takes_args, own_process=False):
  """Runs main with the error mapping of the module docstring; raises Exit on failure.
  `own_process`: the binary is this process (`python -m`), whose descriptor 2 it may filter
  for its whole life; not in a test's process."""
  if args and not takes_args:
    _fail(f"unexpected arguments: {' '.join(args)}")
  # INFO (the progress lines) unless --verbosity was given; 1 and up also brings back what
  # tfbits.quiet keeps off the first screen.
  given = "verbosity" in values and values["verbosity"].present
  if not given:
    logging.set_verbosity(logging.INFO)
  verbose = given and values["verbosity"].value >= 1
  quiet.install(verbose=verbose)
  if own_process:  # a stderr whose reader is gone (`| tee` ended by Ctrl-C) drops lines
    run_log.keep_stderr_writable()
  if own_process and not verbose:
    quiet.filter_native_stderr()
  with run_log.binary():  # a run's log.txt takes the line said after the run too
    return _mapped(main, values, args, takes_args)


def _mapped(main, values, args, takes_args):
  """main's return value, or its error as one line and Exit (the module docstring)."""
  try:
    check_paths((f"--{name}", url) for name, url in flag_ranges.urls(values))
    return main(values, args) if takes_args else main(values)
  except OneLineError as e:  # UsageError, and a PortError of a binary that uses the kit
    _fail(str(e))
  except run_errors.Stopped as e:
    run_log.say(f"stopped: {e}")
    raise Exit(e.status) from None
  except KeyboardInterrupt:
    _fail("interrupted", status=130)
  except Exception as e:  # pylint: disable=broad-except
    # Only TensorFlow's placement failures (soft placement off), refused writes and servers
    # that cannot start become one line; classes are matched by name so that bad flags
    # never wait for TensorFlow to import.
    lost = peer_lost(e)
    if lost is not None:  # not the user's fault: a status restart policies retry
      _fail(str(lost), status=run_errors.PREEMPTED_EXIT_STATUS)
    error = (placement(str(e)) if type(e).__name__ == "InvalidArgumentError"
             else storage(e) or server(e))
    if error is None:
      raise
    _fail(str(error))


def suggested(message, names):
  """absl's unknown-flag line, with the flag a user means where its name holds the word
  typed whole: absl's edit distance offered gpu_memory_limit_mb for --gpus, not num_gpus."""
  match = re.match(r"Unknown command line flag '([^']+)'", message)
  if not match:
    return message
  typed = match.group(1)
  words = lambda name: set(name.split("_"))
  meant = sorted((n for n in names if typed in words(n) or (
      words(typed) < words(n) and len(words(typed)) > 1)), key=len)
  if not meant:
    return message
  return f"Unknown command line flag '{typed}'. Did you mean: {', '.join(meant[:3])} ?"


def _parse(fv, argv):
  """absl's parser, but a bad or unknown flag is one line too, not absl's two; so is a
  --flagfile that is not text (absl reads it as UTF-8 and would end in a traceback)."""
  try:
    return fv(argv)
  except flags.Error as e:
    _fail(suggested(str(e).removeprefix("ERROR:: "), list(fv)))  # a flagfile absl cannot open
  except UnicodeDecodeError as e:
    named = [a.split("=", 1)[1] for a in argv if a.startswith(("--flagfile=", "-flagfile="))]
    which = f"--flagfile={named[0]}" if len(named) == 1 else "a --flagfile"
    _fail(f"{which} is not UTF-8 text (byte {e.object[e.start]:#04x} at offset {e.start} of "
          "a file it reads): save it as UTF-8, one --flag=value per line")


def app_run(fv, define_flags, main, takes_args=False):
  """`python -m binary`: absl's app.run (--help, --flagfile) over the mapping above. `fv` is
  the global FlagValues the entry point hands in (app.run parses into it)."""
  before = set(fv)
  define_flags(fv)
  own = {fv[name].name for name in set(fv) - before}
  # --helpfull lists the key flags of the main module; these were defined from
  # harness.command_line.options.
  for name in own:
    fv.register_key_flag_for_module(sys.argv[0], fv[name])

  def parse(argv):
    # Status 0 (absl's own --help ends with 1, so `cmd --help && ...` would fail).
    asked = _help_asked(argv)
    # Grouped by subject (harness.command_line.usage); --helpfull: every module's flags after.
    if asked:
      # The module of `main`: __main__ under `python -m`, the binary's own under a console
      # script (whose __main__ is pip's wrapper, without a docstring: absl's --helpfull
      # printed that and the flags alone).
      module = sys.modules[main.__module__]
      name = getattr(getattr(module, "__spec__", None), "name", None) or main.__module__
      usage.print_help(module.__doc__, fv, own, module=name, full=asked == "--helpfull")
      sys.exit(0)
    try:
      return _parse(fv, argv)
    except Exit as e:
      sys.exit(e.status)

  def run(argv):
    progress.use_short_prefix()  # after app.run installed absl's handler
    try:
      status = _status(_main(main, fv, argv[1:], takes_args, own_process=True))
    except Exit as e:
      status = e.status
    process_end.end_process(status)  # not sys.exit: no interpreter finalization after the end

  app.run(run, flags_parser=parse)


def _help_asked(argv):
  """The help flag in `argv` before any `--` (what follows is a launched binary's), or None."""
  for arg in argv[1:]:
    if arg == "--":
      return None
    if arg in ("--help", "-help", "-h", "-?", "--helpshort", "--helpfull"):
      return arg
  return None


def call(define_flags, main, argv, takes_args=False):
  """Runs the binary in this process on `argv` (flags, then arguments); returns its exit
  status. What it prints goes to this process's stdout/stderr."""
  fv = flags.FlagValues()
  define_flags(fv)
  try:
    args = _parse(fv, ["binary", *argv])[1:]
    return _status(_main(main, fv, args, takes_args))
  except Exit as e:
    return e.status


def _status(returned):
  """The exit status of a main that returned `returned`: an int is one (the porting kit's
  verdict, 0 or 1); anything else is success."""
  return returned if type(returned) is int else 0  # pylint: disable=unidiomatic-typecheck
