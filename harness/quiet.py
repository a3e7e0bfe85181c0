"""The first screen of every binary: what TensorFlow prints that tells its user nothing.

On a machine without a GPU, `import tensorflow` writes seven lines to stderr before a run says
anything (CUDA drivers not found, a failed cuInit, oneDNN and CPU-instruction notes, absl's
"before InitializeLog" banner, twice), and MirroredStrategy logs one line per variable
("Reduce to /cpu:0 then broadcast to ..."). `install(verbose)`, which harness.cli calls
before a binary's main, keeps them off the screen unless `--verbosity` asks for more (1 or
higher brings everything back):

- TensorFlow's native lines are written by C++ straight to file descriptor 2, before any
  setting of Python's can reach them (TF_CPP_MIN_LOG_LEVEL does not silence absl's early
  lines). While `tensorflow` is first imported and its physical devices first listed,
  descriptor 2 goes through a pipe; afterwards every line that is not in NATIVE_NOISE is
  written to the real stderr, in order.
- Its later native INFO lines (the first Session.run's "MLIR V1 optimization pass is not
  enabled", per-device notes): TF_CPP_MIN_LOG_LEVEL=1 unless the environment sets it.
- TensorFlow's Python INFO lines (the per-variable all-reduce plan, "Using
  MirroredStrategy...") go to the `tensorflow` logger, set to WARNING; those its newer
  modules log through absl directly (the saver's "Sharding callback duration") are dropped
  by a filter on absl's handler that knows them by the file they come from.

Warnings and errors of TensorFlow's own, and every line of this project's, still show.
"""

import contextlib
import importlib.abc
import importlib.util
import logging
import os
import re
import sys
import threading

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
      module.config.list_physical_devices()


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
  """Drops INFO records logged from TensorFlow's own Python files."""

  PACKAGE = os.sep + "tensorflow" + os.sep

  def filter(self, record):
    return record.levelno >= logging.WARNING or self.PACKAGE not in record.pathname


def install(verbose):
  """Quiets TensorFlow's first screen unless `verbose` (absl --verbosity >= 1)."""
  from absl import logging as absl_logging  # pylint: disable=g-import-not-at-top
  handler = absl_logging.get_absl_handler()
  for old in [f for f in handler.filters if isinstance(f, _TensorFlowInfo)]:
    handler.removeFilter(old)
  if verbose:
    return
  handler.addFilter(_TensorFlowInfo())
  logging.getLogger("tensorflow").setLevel(logging.WARNING)
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # read when TensorFlow starts
  if "tensorflow" not in sys.modules and not any(isinstance(f, _FirstImport)
                                                 for f in sys.meta_path):
    sys.meta_path.insert(0, _FirstImport())
