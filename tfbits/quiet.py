"""The first screen of every binary: what TensorFlow prints that tells its user nothing.

The trainers (through harness.command_line.cli) and the porting kit (its command line) both install
it; it imports only the standard library and absl, so TensorFlow 1.15's Python runs it too.

On a machine without a GPU, `import tensorflow` writes seven lines to stderr before a run says
anything (CUDA drivers not found, a failed cuInit, oneDNN and CPU-instruction notes, absl's
"before InitializeLog" banner, twice), and MirroredStrategy logs one line per variable
("Reduce to /cpu:0 then broadcast to ..."). `install(verbose)`, which harness.command_line.cli calls
before a binary's main, keeps them off the screen unless `--verbosity` asks for more (1 or
higher brings everything back):

- TensorFlow's native lines are written by C++ straight to file descriptor 2, before any
  setting of Python's can reach them (TF_CPP_MIN_LOG_LEVEL does not silence absl's early
  lines). While `tensorflow` is first imported and its physical devices first listed,
  descriptor 2 goes through a pipe; afterwards every line that is not in NATIVE_NOISE is
  written to the real stderr, in order.
- Later native lines that report TensorFlow doing what it should: a MultiDeviceIterator's
  per-device datasets "will not be optimized" (Keras `fit` and MultiWorkerMirrored, once a
  run), a step's clean-up or a job's end cancelling pending steps ("Local rendezvous is
  aborting with status: ABORTED/CANCELLED", on every cluster task). `filter_native_stderr()`,
  which a binary's own process calls once, sends descriptor 2 through a filter process for
  the rest of its life: a process, so that a crash's last lines still come out (a thread
  would die with them), and the binary waits for it at exit, so that its last line is out
  before the shell's prompt.
- Its later native INFO lines (the first Session.run's "MLIR V1 optimization pass is not
  enabled", per-device notes): TF_CPP_MIN_LOG_LEVEL=1 unless the environment sets it.
- TensorFlow's Python INFO lines (the per-variable all-reduce plan, "Using
  MirroredStrategy...") go to the `tensorflow` logger, set to WARNING; those its newer
  modules log through absl directly (the saver's "Sharding callback duration") are dropped
  by a filter on absl's handler that knows them by the file they come from; so are
  tensorflow-datasets' INFO lines ("Constructing tf.data.Dataset cifar10 ...": the trainers
  say what they read).
- Its deprecation notices ("From .../compat_v1/step.py:134: SyncReplicasOptimizer.__init__
  ... is deprecated and will be removed", three lines each, per process): the TF1 trainer
  uses those APIs on purpose, it is what it ports; they are WARNING records of TensorFlow's
  `deprecation` module, dropped by the same filter. So is the Python warning of TensorFlow's
  legacy layers that `layer.apply` is deprecated (tf.layers, tf_slim: the TF1 code the
  porting kit holds; two lines before its report), of its TF1 RNN cells that they are, and
  of tf.compat.v1.layers that each is (`tf.layers.conv2d` is deprecated).

Warnings and errors of TensorFlow's own, and every line of this project's, still show.
"""

import atexit
import contextlib
import importlib.abc
import importlib.util
import logging
import os
import re
import subprocess
import sys
import threading
import warnings

# Native lines of `import tensorflow` that describe the build or the absence of a GPU. A line
# matching none of them is shown.
NATIVE_NOISE = re.compile(
    r"All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|\] oneDNN custom operations are on"
    r"|cudart_stub\.cc:\d+\] Could not find cuda drivers"
    r"|\] failed call to cuInit"
    r"|cpu_feature_guard\.cc:\d+\] This TensorFlow binary is optimized"
    r"|^To enable the following instructions: .* rebuild TensorFlow"
    r"|Unable to register cu(DNN|FFT|BLAS) factory"
    r"|computation_placer\.cc:\d+\] computation placer already registered"
    r"|TF-TRT Warning: Could not find TensorRT")


# Native lines of a run that say TensorFlow did what it should (module docstring). A
# tab-indented line after one is its continuation (the node of a cancelled step).
RUN_NOISE = re.compile(
    r"dataset\.cc:\d+\] Input of GeneratorDatasetOp::Dataset will not be optimized because"
    r"|local_rendezvous\.cc:\d+\] Local rendezvous is aborting with status: "
    r"((ABORTED|CANCELLED): |INVALID_ARGUMENT: loss is not finite)"  # the trainer says that
    # A multi-worker task's collectives aborted as its peers' heartbeats stop: the end of a
    # finished job (a peer lost mid-run is the trainer's own one line, to retry).
    r"|base_collective_executor\.cc:\d+\] BaseCollectiveExecutor::StartAbort UNAVAILABLE: "
    r".*(tasks are unhealthy|stopped sending heartbeats)")
_EXIT_WAIT_SECS = 2.0  # the filter's last writes; a child still holding the pipe is not waited


def filter_native_stderr(noise=(NATIVE_NOISE, RUN_NOISE)):
  """For the rest of this process's life, every line written to descriptor 2 passes through
  a filter process that drops the lines `noise` matches (and their continuation lines).

  The filter is a Python of its own (`python -S -c`, stdlib only, no descriptor of this
  process but the pipe and stderr), so `ps` shows it as what it is and not as a second
  trainer, and it holds no file this process opened (a lock, a socket)."""
  sys.stderr.flush()
  read_end, write_end = os.pipe()
  saved = os.dup(2)
  filter_process = subprocess.Popen(  # pylint: disable=consider-using-with  # lives on
      [sys.executable, "-S", "-c", _FILTER] + [n.pattern for n in noise], stdin=read_end,
      stdout=subprocess.DEVNULL, stderr=saved)
  os.close(read_end)
  os.dup2(write_end, 2)
  os.close(write_end)

  def finish():
    try:
      sys.stderr.flush()
    except (OSError, ValueError):
      pass
    os.dup2(saved, 2)  # later writes go straight out; the pipe's write end closes
    try:
      filter_process.wait(_EXIT_WAIT_SECS)
    except subprocess.TimeoutExpired:  # a child of ours still holds the pipe
      pass

  atexit.register(finish)


# The filter process: copies its stdin to its stderr line by line until the end, dropping
# the lines the patterns in argv match and the tab-indented lines after one. A piece without
# its newline yet goes out when nothing more is waiting (a prompt, a bar redrawn with \r).
# Ctrl-C reaches the whole process group and a stop is a SIGTERM to it: the binary's
# "stopped: ..." line comes after them, so the filter ignores both and ends at its input's end.
# Once its stderr refuses a write (no reader left: a `| tee` ended by that Ctrl-C), it reads on
# and drops everything: dead, it would leave the binary's descriptor 2 a pipe without a reader.
_FILTER = r"""
import os, re, select, signal, sys
for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
  signal.signal(sig, signal.SIG_IGN)
noise = [re.compile(p) for p in sys.argv[1:]]
gone = False

def write_all(data):
  global gone
  while data and not gone:
    try:
      data = data[os.write(2, data):]
    except OSError:
      gone = True

pending, dropping = b"", False
while True:
  chunk = os.read(0, 65536)
  if not chunk:
    break
  pending += chunk
  *lines, pending = pending.split(b"\n")
  out = []
  for line in lines:
    text = line.decode(errors="replace")
    dropping = any(n.search(text) for n in noise) or (dropping and text.startswith("\t"))
    if not dropping:
      out.append(line + b"\n")
  if pending and not select.select([0], [], [], 0.05)[0]:
    out.append(pending)
    pending, dropping = b"", False
  if out:
    write_all(b"".join(out))
write_all(pending)
"""


@contextlib.contextmanager
def native_stderr_filtered(noise=NATIVE_NOISE):
  """Inside the block, what anything writes to descriptor 2 is held; after it, each line
  that `noise` does not match is written to the real stderr."""
  sys.stderr.flush()
  saved = os.dup(2)
  read_end, write_end = os.pipe()
  os.dup2(write_end, 2)
  os.close(write_end)
  held = []
  # A thread drains the pipe, so a chatty import cannot fill it and block.
  reader = threading.Thread(target=lambda: held.append(_read_all(read_end)), daemon=True)
  reader.start()
  try:
    yield
  finally:
    sys.stderr.flush()
    os.dup2(saved, 2)  # the pipe's last write end closes: the reader sees its end
    os.close(saved)
    reader.join()
    os.close(read_end)
    kept = [line for line in b"".join(held).decode(errors="replace").splitlines(True)
            if not noise.search(line)]
    if kept:
      os.write(2, "".join(kept).encode())


def _read_all(fd):
  chunks = []
  while True:
    chunk = os.read(fd, 65536)
    if not chunk:
      return b"".join(chunks)
    chunks.append(chunk)


class _Loader(importlib.abc.Loader):
  """TensorFlow's own loader, run with native stderr filtered."""

  def __init__(self, loader):
    self.loader = loader

  def create_module(self, spec):
    return self.loader.create_module(spec)

  def exec_module(self, module):
    with native_stderr_filtered():
      self.loader.exec_module(module)
      # The GPU platform starts (and on a machine without one, fails its cuInit) when the
      # devices are first listed; listing them does not yet fix the runtime's device
      # settings, which the binaries make afterwards.
      config = module.config
      # TensorFlow 1.15 has only the experimental listing.
      (getattr(config, "list_physical_devices", None) or
       config.experimental.list_physical_devices)()


class _FirstImport(importlib.abc.MetaPathFinder):
  """Finds `tensorflow` once, the usual way, and wraps its loader."""

  def find_spec(self, name, path=None, target=None):  # pylint: disable=unused-argument
    if name != "tensorflow":
      return None
    sys.meta_path.remove(self)
    spec = importlib.util.find_spec(name)
    if spec is not None and spec.loader is not None:
      spec.loader = _Loader(spec.loader)
    return spec


class _TensorFlowInfo(logging.Filter):
  """Drops INFO records logged from TensorFlow's (and tensorflow-datasets') own Python files,
  and TensorFlow's deprecation notices."""

  PACKAGES = tuple(os.sep + p + os.sep for p in ("tensorflow", "tensorflow_datasets"))
  DEPRECATION = os.path.join("python", "util", "deprecation.py")

  def filter(self, record):
    if record.pathname.endswith(self.DEPRECATION) and record.levelno <= logging.WARNING:
      return False
    return record.levelno >= logging.WARNING or not any(p in record.pathname
                                                         for p in self.PACKAGES)


def install(verbose):
  """Quiets TensorFlow's first screen unless `verbose` (absl --verbosity >= 1)."""
  from absl import logging as absl_logging  # pylint: disable=g-import-not-at-top
  handler = absl_logging.get_absl_handler()
  tf_logger = logging.getLogger("tensorflow")
  for holder in (handler, tf_logger):
    for old in [f for f in holder.filters if isinstance(f, _TensorFlowInfo)]:
      holder.removeFilter(old)
  if verbose:
    return
  handler.addFilter(_TensorFlowInfo())
  tf_logger.setLevel(logging.WARNING)
  # matplotlib's first import builds its font cache and says so at INFO ("generated new
  # fontManager"), which absl's handler printed as one of the benchmark's own lines.
  logging.getLogger("matplotlib").setLevel(logging.WARNING)
  tf_logger.addFilter(_TensorFlowInfo())  # its deprecation notices go through this logger
  warnings.filterwarnings("ignore", message="`layer.apply` is deprecated", category=UserWarning)
  # tf_keras's TF1 RNN cells, each at its construction ("`tf.nn.rnn_cell.BasicLSTMCell` is
  # deprecated and will be removed ... replaced by that in Tensorflow 2.0"): the same kind.
  warnings.filterwarnings("ignore", message="`tf.nn.rnn_cell.", category=UserWarning)
  # And tf_keras's tf.compat.v1.layers, one per call ("`tf.layers.conv2d` is deprecated and
  # will be removed ... Please use `tf.keras.layers.Conv2D`"): 12 lines before the kit's report
  # of a tf.layers port, MIGRATION's own example's included.
  warnings.filterwarnings("ignore", message="`tf.layers.", category=UserWarning)
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # read when TensorFlow starts
  if "tensorflow" not in sys.modules and not any(isinstance(f, _FirstImport)
                                                 for f in sys.meta_path):
    sys.meta_path.insert(0, _FirstImport())
