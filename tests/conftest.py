"""Test-wide TensorFlow set-up: quiet logs and 4 logical CPU devices, fixed before TF starts.

Every in-process test shares one TF runtime with /cpu:0../cpu:3, so the multi-replica tests
need no GPU; single-device tests just use /cpu:0.
"""

import collections
import contextlib
import gc
import os
import re
import sys
import threading

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Bytecode caches for the project's and the tests' modules, where the environment turned them
# off (PYTHONDONTWRITEBYTECODE=1, as the machines the suite is timed on set it): the suite starts
# ~180 Python processes, each of which otherwise compiled every module of ours it imports again
# (0.2-0.4 s of CPU for a trainer's), and each xdist worker rewrote and compiled every test file
# again (collection 6.1-6.7 s of CPU against 4.5-4.8 s). Measured on a 2-core EPYC: the
# child-heavy files (lost_screen, process_end, bad_input, help, flag_ranges, first_screen,
# cross_binaries) 68-70 s of CPU against 66-68 s. Set here, before xdist starts its workers,
# so they and every process they start inherit it; the caches are __pycache__ folders, which
# git ignores. Bytecode moves no bits of a run.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False
# glibc's malloc, for the workers and every process they start (read at malloc's start, so set
# here, as above, before xdist starts the workers): 64 MiB kept free at the top of each arena
# instead of handed back to the kernel at every free, and a fixed 32 MiB mmap threshold (glibc's
# most) instead of its moving one. TensorFlow's tensors are malloc's (64-byte aligned, wherever
# they land); Eigen's kernels, the oneDNN-off family's, allocate and free a step's tensors of
# 3-5 MB from several threads, and each freed top was given back and faulted in again at the
# next step. Measured on a 2-core EPYC with oneDNN off, page faults (system CPU) without / with
# the pad alone / with both: test_accuracy (60 steps) 1.81 M (4.0 s) / 0.29 M / 0.14 M (0.8 s);
# test_keras 2.04 M (5.2 s) / 0.70 M / 0.61 M (2.4 s); test_losses 0.18 M / 0.98 M (the pad
# alone, with the moving threshold, made it worse) / 0.11 M. The whole suite with oneDNN off
# faulted 45.8 M times without either (147 s of its 927 s of CPU were the kernel's). It moves
# no bits: a trainer's checkpoint after 20 steps is the same bytes with it and without, oneDNN
# on and off (BUILD.md, "Tests"; test_suite_scheduling holds a run against one without).
MALLOC = {"MALLOC_TOP_PAD_": str(64 << 20), "MALLOC_MMAP_THRESHOLD_": str(32 << 20)}
for _name, _value in MALLOC.items():
  os.environ.setdefault(_name, _value)

from tfbits import quiet  # pylint: disable=g-import-not-at-top

NUM_LOGICAL_CPUS = 4


def pytest_configure(config):
  """TensorFlow with NUM_LOGICAL_CPUS logical CPU devices, in each process that runs tests:
  not in xdist's controller, which only hands tests out (TensorFlow there cost ~3 s of CPU
  and a gigabyte while the workers start)."""
  if _is_xdist_controller(config):
    return
  # TensorFlow's import-time lines (CUDA probing on a machine without a GPU) would otherwise
  # end up in the suite's output, once per xdist worker, as the binaries' first screens would.
  with quiet.native_stderr_filtered():
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    tf.config.list_physical_devices()
  tf.config.set_logical_device_configuration(
      tf.config.list_physical_devices("CPU")[0],
      [tf.config.LogicalDeviceConfiguration()] * NUM_LOGICAL_CPUS)
  # The pools as every binary sets them (TensorFlow's defaults, explicit): an in-process run
  # with the default counts then finds them as it wants them; one with other counts is
  # refused, as in any process (tfbits.threads).
  from tfbits import threads  # pylint: disable=g-import-not-at-top
  threads.apply(0, 0)
  tf.config.list_logical_devices()  # the runtime started: its pools fixed, as a run's are


def pytest_collection_modifyitems(config, items):
  """Tests marked float16 or bfloat16 compute in that dtype on the CPU: skipped, with the
  trainers' own one-line reason, where this machine's kernels are refused it
  (harness.devices.cpu_kernels: fp16 on oneDNN's float16 kernels, bf16 under an ONEDNN_MAX_CPU_ISA
  cap below AVX-512). The kernel-family test runs fp16 there with oneDNN off."""
  if _is_xdist_controller(config):
    return
  from harness.devices import cpu_kernels  # pylint: disable=g-import-not-at-top
  from tfbits import machine  # pylint: disable=g-import-not-at-top
  here = machine.describe()
  for item in items:
    for mark, precision in (("float16", "fp16"), ("bfloat16", "bf16")):
      reason = item.get_closest_marker(mark) and cpu_kernels.refusal(precision, here)
      if reason:
        item.add_marker(pytest.mark.skip(reason=f"refused on this machine: {reason}"))


def _is_xdist_controller(config):
  return (config.pluginmanager.hasplugin("xdist") and bool(config.option.numprocesses)
          and not os.environ.get("PYTEST_XDIST_WORKER"))


# Two workers when pytest-xdist is there, one per core of the 2-core machines the suite is
# timed on. The suite is CPU-bound: measured on a 2-core AVX-512 EPYC at 1,161 tests, 490-508 s
# with two workers (903 s of CPU) against 514-534 s with three (1,030 s: a third worker's
# TensorFlow threads and child processes contend for the same two cores, and the waits on
# child processes it used to fill are 74 s of the two workers' ~1,000 s). Earlier, with more
# of the suite waiting on cluster jobs, three won (286-295 s against 313-316 s). Without
# xdist, one process, where `-n 2` in addopts made pytest refuse to start. `-n 0` (or any -n)
# still decides.
WORKERS = 2

# The tiers. `-m "not slow"`, the inner loop's, ends in about 90 s on 2 cores: `slow` marks
# the binaries' end-to-end runs, and every other test over 1.5 s of CPU (its own and its child
# processes', measured per test on a 2-core EPYC; 75 of them held 236 of the fast tier's 336 s
# of CPU). CI runs both tiers.


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
  if config.pluginmanager.hasplugin("xdist") and config.option.numprocesses is None \
      and not os.environ.get("PYTEST_XDIST_WORKER"):
    config.option.numprocesses = WORKERS
    if config.option.dist == "no":
      config.option.dist = "loadgroup"  # see pytest_xdist_make_scheduler


# Test files with a module-scoped fixture (a reference run their tests share): each goes to one
# worker whole, or every worker that runs one of its tests trains the reference again. The
# other tests go out one by one.
_MODULE_FIXTURE = re.compile(r"""scope\s*=\s*["']module["']""")
# A file without the `slow` mark holds fast-tier tests only (under 1.5 s of CPU each): its tests
# go out last, to fill the end of the run (see _assign_work_unit).
_SLOW_MARK = re.compile(r"mark\.slow\b")


def file_kinds(folder):
  """(grouped, fillers): the test files of `folder` with a module-scoped fixture, and those
  with neither that nor a `slow` test."""
  grouped, fillers = set(), set()
  for name in os.listdir(folder):
    if name.startswith("test_") and name.endswith(".py"):
      with open(os.path.join(folder, name), encoding="utf-8") as f:
        text = f.read()
      if _MODULE_FIXTURE.search(text):
        grouped.add(name)
      elif not _SLOW_MARK.search(text):
        fillers.add(name)
  return grouped, fillers


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
  """xdist's own loadgroup names each group by appending it to the test's id in the worker,
  which pytest 9.2's structured ids no longer take (pytest-xdist#1386: every group silently
  spread over all workers), and the worker never learnt of a --dist set here. The groups are
  decided here, in the controller, from the files."""
  if config.option.dist != "loadgroup":
    return None
  from xdist.scheduler import LoadScopeScheduling  # pylint: disable=g-import-not-at-top
  grouped, fillers = file_kinds(os.path.dirname(os.path.abspath(__file__)))

  class ModuleFixtureScheduling(LoadScopeScheduling):
    def _split_scope(self, nodeid):
      path = nodeid.split("::", 1)[0]
      return path if os.path.basename(path) in grouped else nodeid

    def _assign_work_unit(self, node):
      # The files' order, except that a group goes out at half its place in it: handed out
      # last, a group (test_train_e2e's 32 s) kept one worker busy 16 s after the others had
      # ended. Not every group first, nor the `slow` tests first (measured: 454 s instead of
      # 391 s, when the suite was slower): the workers then run their cluster jobs and
      # reference runs at once, and TensorFlow's thread pools spin while they wait for a core.
      # The filler files' tests last (355 tests, 27 s of the workers' 1,030 on a 2-core EPYC,
      # none over 2 s): a worker whose last long test ends early takes them while the other
      # ends its own. Before, the last tests out were the alphabet's last files' 9-10 s ones,
      # and one worker stood idle 8-17 s at the end.
      if not getattr(self, "ordered", False):  # the queue is whole before the first unit goes
        place = {nodeid: i for i, nodeid in enumerate(self.collection)}

        def when(unit):
          scope, ids = unit
          first = place[next(iter(ids))]
          filler = os.path.basename(scope.split("::", 1)[0]) in fillers
          return (filler, first / 2 if "::" not in scope else first)
        self.workqueue = collections.OrderedDict(sorted(self.workqueue.items(), key=when))
        self.ordered = True
      super()._assign_work_unit(node)

    def remove_node(self, node):
      # A worker that crashed: xdist's LoadScopeScheduling puts its whole unit back, the test
      # that crashed it included, so a test that crashes every time crashed each replacement
      # worker in turn (measured: a suite with one segfaulting test still running at 120 s,
      # where xdist's default scheduler ends in 22 s with that test failed). Here the crashed
      # test is reported failed once, as the default scheduler does, and never handed out
      # again; the rest of its unit goes back to the queue. Written out rather than wrapped:
      # the parent hands the unit to the other workers before it returns.
      workload = self.assigned_work.pop(node)
      pending = [(scope, nodeid) for scope, unit in workload.items()
                 for nodeid, completed in unit.items() if not completed]
      if not pending:
        return None
      scope, crashitem = pending[0]
      workload[scope][crashitem] = True
      self.workqueue.update((s, unit) for s, unit in workload.items() if not all(unit.values()))
      for other in self.assigned_work:
        self._reschedule(other)
      return crashitem

  config.option.loadscopereorder = False
  return ModuleFixtureScheduling(config, log)


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


@contextlib.contextmanager
def environment_kept():
  """This process's environment as it was, whatever the block set or removed."""
  before = dict(os.environ)
  try:
    yield
  finally:
    if dict(os.environ) != before:
      os.environ.clear()
      os.environ.update(before)


def _process_state():
  """This worker's process-wide TensorFlow state that moves bits: its pools' counts and op
  determinism as TensorFlow holds it (latched at its first read, whatever the environment
  says after)."""
  from tensorflow.python.framework import config as tf_config  # pylint: disable=g-direct-tensorflow-import,g-import-not-at-top
  from tfbits import threads  # pylint: disable=g-import-not-at-top
  return threads.current(), tf_config.is_op_determinism_enabled()


@pytest.fixture(autouse=True)
def process_state_as_before():
  """No test changes the worker's pools or op determinism: a run that needs others runs in a
  child process (every later test of the worker would train on them)."""
  before = _process_state()
  yield
  assert _process_state() == before, f"the worker's TensorFlow state moved: {before} -> " \
      f"{_process_state()}"


@pytest.fixture(autouse=True)
def environment_as_before():
  """Each test leaves this process's environment as it found it: the binaries run here
  (helpers.call) change it as their own processes would (a stray TF_CONFIG popped), and a
  value left behind reached every child process this worker started afterwards. Measured: a
  TF_DETERMINISTIC_OPS=1 left by a test (pytest's delenv of an absent variable records
  nothing to restore) gave the trainers' children other bits than this process's runs (after
  one step, conv1's weights 7e-9 apart), and the resume tests and the recorder's replay,
  which compare the two, failed where that test had run first in the worker."""
  with environment_kept():
    yield
