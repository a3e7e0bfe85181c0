"""Test-wide TensorFlow set-up: quiet logs and 4 logical CPU devices, fixed before TF starts.

Every in-process test shares one TF runtime with /cpu:0../cpu:3, so the multi-replica tests
need no GPU; single-device tests just use /cpu:0.
"""

import gc
import os
import threading

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from harness import quiet  # pylint: disable=g-import-not-at-top

# TensorFlow's import-time lines (CUDA probing on a machine without a GPU) would otherwise
# end up in the suite's output, once per xdist worker, as the binaries' first screens would.
with quiet.native_stderr_filtered():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.config.list_physical_devices()

NUM_LOGICAL_CPUS = 4
tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0],
    [tf.config.LogicalDeviceConfiguration()] * NUM_LOGICAL_CPUS)


# Three workers when pytest-xdist is there, on 2 cores: much of the suite waits on child
# processes (a cluster job's start, a peer's timeout, a signal's delivery), and a third
# worker fills those waits. Measured on 2 cores, the whole suite: 313-316 s with two workers,
# 286-295 s with three, 334 s with four (contention: ~100 s more CPU); the fast tier
# (in-process, CPU-bound) 89 s with two or three. Without xdist, one process, where `-n 2` in
# addopts made pytest refuse to start. `-n 0` (or any -n) still decides.
WORKERS = 3


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
  if config.pluginmanager.hasplugin("xdist") and config.option.numprocesses is None \
      and not os.environ.get("PYTEST_XDIST_WORKER"):
    config.option.numprocesses = WORKERS
    if config.option.dist == "no":
      config.option.dist = "loadgroup"  # see pytest_collection_modifyitems


def pytest_collection_modifyitems(config, items):  # pylint: disable=unused-argument
  """The tests of a module whose fixture is module-scoped (a reference run) go to one xdist
  worker together: spread over both, each worker trained the reference again (measured: 14-26
  s of duplicated setup in one run of the suite). The order stays the files' order: with the
  `slow` tests first, both workers ran cluster jobs at once and the suite took 454 s instead of
  391 s (TensorFlow's thread pools spin while they wait for a core)."""
  for item in items:
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    if any(d.scope == "module" for fixture in defs.values() for d in fixture):
      item.add_marker(pytest.mark.xdist_group(item.module.__name__))


def pytest_runtest_teardown(item):  # pylint: disable=unused-argument
  """After each test, moves every object alive into the collector's permanent generation.

  Measured here: in the long-lived test processes, Python's full collections stopped single
  tests for seconds (33 s of pauses over 0.5 s in one serial fast-tier run, the longest
  14.5 s; a file-parsing test once took 72 s). Frozen after each test, the collector only
  looks at the next test's objects: 1.4 s of collection in the same run, 3.5 GB peak. The
  garbage of earlier tests is then kept, not collected: a test must close what it opens,
  which the writer check below enforces for summary writers."""
  gc.freeze()


# The thread of a tf.compat.v1 FileWriter: one left running means a writer never closed,
# whose events since its last flush are lost when the process ends.
_WRITER_THREAD = "EventLoggerThread"


def _writer_threads():
  return {t for t in threading.enumerate() if t.name == _WRITER_THREAD and t.is_alive()}


@pytest.fixture(autouse=True)
def no_summary_writer_left_open():
  """Every run in this process closes its summary writers, on success and on failure."""
  before = _writer_threads()
  yield
  left = _writer_threads() - before
  assert not left, f"{len(left)} summary writer(s) left open"
