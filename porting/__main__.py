r"""The porting kit's command line: compare a port, or convert its checkpoints.

  python -m porting compare --port=tests.bn_momentum_port:port \
      --batches=tests.bn_momentum_port:batches --replicas=2 --steps=3 \
      [--start_from=/runs/tf1/model.ckpt-30000]
  python -m porting record --port=... --batches=... --replicas=2 --steps=3 \
      RECORD_DIR
  python -m porting compare --port=... --record=RECORD_DIR [--steps=3]
  python -m porting tf1_to_tf2 --port=... --batches=... \
      TF1_CHECKPOINT TF2_PREFIX
  python -m porting tf2_to_tf1 --port=... --batches=... \
      TF2_CHECKPOINT TF1_PREFIX [--tf1_checkpoint=TF1_CHECKPOINT]

--port names `module:attribute`, a porting.Port or a function returning one;
--batches a function called with the number of replicas that returns the global
batches (a list of (images, labels)), or a function step -> batch. `compare`
prints the report and exits 0 when the port is equal within --tolerance, 1 when
it is not; every failure is one line, exit 2.
"""

import os
import sys

try:
  from absl import app
  from absl import flags
except ImportError:  # the recorder installed where no TensorFlow (which brings absl-py) is
  print("error: absl-py is missing here: run the kit with the Python of the environment whose "
        "TensorFlow it compares or records (TensorFlow brings absl-py), or pip install "
        "absl-py", file=sys.stderr)
  sys.exit(2)

from porting.commands import define_flags
from porting.commands import main
from porting.commands import MAX_REPLICAS  # pylint: disable=unused-import  # a test reads it
from porting.commands import quiet_python_logs
from porting.errors import PortError

HELP = {"-h", "-?", "--help", "--helpshort", "--helpfull"}


def usage(width=80):
  """The commands (this module's docstring) and each flag with its default, wrapped to
  `width` columns."""
  import textwrap  # pylint: disable=g-import-not-at-top
  doc = __doc__.strip()
  script = os.path.basename(sys.argv[0] or "")
  if script.startswith("cifar10-"):  # the console script: the command the user typed
    doc = doc.replace("python -m porting", script)
  lines = [doc, "", "Flags:"]
  names = flags.FlagValues()
  define_flags(names)  # this command's own flags, in the order they are declared
  for flag in (flags.FLAGS[name] for name in names):
    default = "" if flag.default is None else f" (default: {flag.default})"
    lines += textwrap.wrap(f"--{flag.name}: {flag.help}{default}", width,
                           initial_indent="  ", subsequent_indent="      ")
  return "\n".join(lines)


def command_line():
  """`python -m porting`: absl's parsing (--help, --flagfile) and exit statuses of its own
  (the kit imports nothing of the project): 0 EQUAL, 1 NOT EQUAL, and every failure one line
  on stderr, exit 2 (130 on Ctrl-C)."""
  define_flags(flags.FLAGS)
  if HELP & set(sys.argv[1:]):  # absl's own --help ends with status 1 and knows no -h
    from tfbits import process_end  # pylint: disable=g-import-not-at-top
    process_end.write_out(usage() + "\n")
    sys.exit(0)

  def say_error(message, status=2):
    print(f"error: {message}", file=sys.stderr, flush=True)
    return status

  def fail(message, status=2):
    sys.exit(say_error(message, status))

  def parse(argv):
    try:
      return flags.FLAGS(argv)
    except flags.Error as e:
      message = str(e)  # no str.removeprefix: Python 3.7 (TensorFlow 1.15's) runs this too
      fail(message[len("ERROR:: "):] if message.startswith("ERROR:: ") else message)
    except UnicodeDecodeError:
      fail("a --flagfile is not UTF-8 text: save it as UTF-8, one --flag=value per line")

  def run(argv):
    from tfbits import process_end  # pylint: disable=g-import-not-at-top
    from tfbits import quiet  # pylint: disable=g-import-not-at-top
    verbose = flags.FLAGS["verbosity"].present and flags.FLAGS.verbosity >= 1
    quiet.install(verbose=verbose)  # TensorFlow's first screen is not the kit's either
    if not verbose:
      quiet.filter_native_stderr()
    try:
      status = main(flags.FLAGS, argv[1:]) or 0
    except PortError as e:
      # Quiet to the end, so that the error line stays the last line: a failed restore
      # leaves tf.train.Checkpoint objects whose clean-up at exit logs ~20 "unrestored
      # values" warnings.
      quiet_python_logs()
      status = say_error(str(e))
    except KeyboardInterrupt:
      quiet_python_logs()
      status = say_error("interrupted", status=130)
    process_end.end_process(status)  # at the last line: no interpreter finalization

  app.run(run, flags_parser=parse)


if __name__ == "__main__":
  command_line()
