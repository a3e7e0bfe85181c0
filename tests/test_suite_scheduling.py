"""How the suite hands its tests to xdist's workers (tests/conftest.py), driven through
xdist's own scheduler with stand-in workers: a file with a module-scoped fixture goes to one
worker whole, every other test on its own, in the files' order, the files of fast tests only
last. And the environment conftest gives the workers and their children (bytecode caches,
malloc's top pad and mmap threshold), held to move no bits."""

import os
import types

import pytest

from tests import conftest

pytest.importorskip("xdist")  # a test dependency; without it the suite runs in one process
GROUPED = "test_train_e2e.py"  # a file with a module-scoped fixture: one unit


class _Worker:
  """What the scheduler asks of a worker: take test indices, shut down."""

  def __init__(self, name, sent):
    self.name, self.sent, self.shutting_down, self.pending = name, sent, False, []
    self.gateway = types.SimpleNamespace(id=name)

  def send_runtest_some(self, indices):
    self.pending.extend(indices)
    self.sent.append((self.name, list(indices)))

  def shutdown(self):
    self.shutting_down = True


def _run(ids, workers=3):
  """Every test of `ids` run to the end by `workers` stand-ins that finish one test in turn;
  returns {test: worker} and the units in the order they were handed out."""
  config = types.SimpleNamespace(option=types.SimpleNamespace(dist="loadgroup"),
                                 getvalue=lambda name: ["popen"] * workers)
  scheduler = conftest.pytest_xdist_make_scheduler(config, None)
  sent, nodes = [], [_Worker(f"gw{i}", []) for i in range(workers)]
  for node in nodes:
    node.sent = sent
    scheduler.add_node(node)
  for node in nodes:
    scheduler.add_node_collection(node, ids)
  scheduler.schedule()
  ran = {}
  while any(node.pending for node in nodes):
    for node in nodes:
      if node.pending:
        index = node.pending.pop(0)
        ran[ids[index]] = node.name
        scheduler.mark_test_complete(node, index)
  assert scheduler.tests_finished
  return ran, [[ids[i] for i in indices] for _, indices in sent]


def test_a_file_with_a_module_fixture_goes_to_one_worker_whole():
  # test_train_e2e.py shares a reference run (a module-scoped fixture); test_precision.py and
  # the made-up test_zz.py do not. Before, the group was named by a mark that xdist never
  # saw (pytest 9.2's node ids), and each worker that ran a test of it trained the reference.
  ids = [f"tests/{name}::case_{i}" for name, count in (
      ("test_precision.py", 6), ("test_train_e2e.py", 4), ("test_zz.py", 4)) for i in range(count)]
  ran, units = _run(ids)
  assert len(ran) == len(ids)
  assert len({ran[t] for t in ids if "train_e2e" in t}) == 1
  assert len({ran[t] for t in ids if "test_precision" in t}) > 1
  assert len({ran[t] for t in ids if "test_zz" in t}) > 1
  # One unit for the group, one per other test; the group at half its place in the files'
  # order (its first test is at 6: handed out after the test at 3), so that it is not the
  # last thing a worker does while the others have ended.
  assert units == [[t] for t in ids[:4]] + [ids[6:10]] + [[t] for t in ids[4:6] + ids[10:]]


def test_the_files_of_fast_tests_only_go_out_last():
  # test_flag_ranges.py has no `slow` test (each under 1.5 s of CPU): its tests fill the end,
  # after the later files' slow ones. Before, the last tests out were test_thread_pools' and
  # test_v1_session_first's 9-10 s ones, one worker idle while the other ran them.
  ids = [f"tests/{name}::case_{i}" for name, count in (
      ("test_flag_ranges.py", 3), ("test_precision.py", 2), ("test_train_e2e.py", 2),
      ("test_zz.py", 2)) for i in range(count)]
  _, units = _run(ids, workers=2)
  # The group at half its place (5 / 2), before test_precision's tests at 3 and 4.
  assert units == [ids[5:7], [ids[3]], [ids[4]], [ids[7]], [ids[8]]] + [[t] for t in ids[:3]]


def test_the_files_are_told_apart_by_their_text(tmp_path):
  files = {"test_shared.py": "@pytest.fixture(scope='module')\n@pytest.mark.slow\n",
           "test_slow.py": "pytestmark = pytest.mark.slow\n",
           "test_param.py": "pytest.param(3, marks=[pytest.mark.slow, pytest.mark.float16])\n",
           "test_fast.py": "def test_it():\n  pass\n", "helpers.py": "", "test_x.txt": ""}
  for name, text in files.items():
    (tmp_path / name).write_text(text)
  assert conftest.file_kinds(str(tmp_path)) == ({"test_shared.py"}, {"test_fast.py"})
  grouped, fillers = conftest.file_kinds(os.path.dirname(conftest.__file__))
  assert "test_train_e2e.py" in grouped and "test_flag_ranges.py" in fillers
  assert "test_precision.py" not in grouped | fillers


def test_a_dist_asked_for_is_xdist_own():
  config = types.SimpleNamespace(option=types.SimpleNamespace(dist="load"))
  assert conftest.pytest_xdist_make_scheduler(config, None) is None


def test_a_test_that_crashes_its_worker_is_failed_once_and_never_handed_out_again():
  # xdist's own LoadScopeScheduling put the crashed worker's unit back whole, the crashing
  # test at its head, so a test that segfaults every time crashed each replacement worker in
  # turn: a suite with one such test was still running at 120 s (the default scheduler ended
  # in 22 s with it failed).
  ids = [f"tests/{GROUPED}::case_{i}" for i in range(4)]
  config = types.SimpleNamespace(option=types.SimpleNamespace(dist="loadgroup"),
                                 getvalue=lambda name: ["popen"])
  scheduler = conftest.pytest_xdist_make_scheduler(config, None)
  sent = []
  first = _Worker("gw0", sent)
  scheduler.add_node(first)
  scheduler.add_node_collection(first, ids)
  scheduler.schedule()
  scheduler.mark_test_complete(first, first.pending.pop(0))  # case_0 passes; case_1 crashes
  assert scheduler.remove_node(first) == ids[1]
  replacement = _Worker("gw1", sent)
  scheduler.add_node(replacement)
  scheduler.add_node_collection(replacement, ids)
  scheduler.schedule()
  assert [ids[i] for i in replacement.pending] == ids[2:]
  while replacement.pending:
    scheduler.mark_test_complete(replacement, replacement.pending.pop(0))
  assert scheduler.tests_finished


def test_a_worker_crashing_on_the_last_test_of_its_unit_leaves_nothing_queued():
  ids = [f"tests/{GROUPED}::case_{i}" for i in range(2)]
  config = types.SimpleNamespace(option=types.SimpleNamespace(dist="loadgroup"),
                                 getvalue=lambda name: ["popen"])
  scheduler = conftest.pytest_xdist_make_scheduler(config, None)
  worker = _Worker("gw0", [])
  scheduler.add_node(worker)
  scheduler.add_node_collection(worker, ids)
  scheduler.schedule()
  scheduler.mark_test_complete(worker, worker.pending.pop(0))
  assert scheduler.remove_node(worker) == ids[1]
  assert not scheduler.workqueue


def test_the_suites_processes_keep_bytecode_caches():
  # Where the environment turns them off (PYTHONDONTWRITEBYTECODE=1), every process the suite
  # starts compiled the project's modules again, and every worker its test files: conftest
  # turns the caches back on for the workers and what they start.
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  from tests import helpers  # pylint: disable=g-import-not-at-top
  assert "PYTHONDONTWRITEBYTECODE" not in os.environ and not sys.dont_write_bytecode
  child = subprocess.run([sys.executable, "-c", "import sys; print(sys.dont_write_bytecode)"],
                         capture_output=True, text=True, timeout=60, env=helpers.env(),
                         check=True)
  assert child.stdout == "False\n"


@pytest.mark.slow
def test_the_suites_processes_keep_mallocs_freed_memory_and_it_moves_no_bits(tmp_path):
  # conftest gives the workers and their children a 64 MiB top pad and a fixed mmap threshold
  # (glibc reads them at the process's start): the oneDNN-off kernels' freed tensors are no
  # longer given back and faulted in again each step. Held here: a run in this worker (with
  # them) and in a fresh child without them write the same bits, at the suite's usual batch.
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  from equivalence import runs  # pylint: disable=g-import-not-at-top
  from tests import helpers  # pylint: disable=g-import-not-at-top
  for name, value in conftest.MALLOC.items():
    assert os.environ.get(name) == value and helpers.env()[name] == value
  run = dict(n=2, seed=5, steps=2, per_replica_batch=16, decay_steps=350)
  here = runs.tf2_train(**run).variables
  env = {k: v for k, v in helpers.env().items() if k not in conftest.MALLOC}
  out = tmp_path / "unpadded.npz"
  child = subprocess.run(
      [sys.executable, "-c", "import sys, numpy as np; from equivalence import runs; "
       f"np.savez(sys.argv[1], **runs.tf2_train(**{run!r}).variables)", str(out)],
      env=env, cwd=helpers.REPO, capture_output=True, text=True, timeout=240)
  assert child.returncode == 0, child.stderr[-3000:]
  there = dict(np.load(out))
  assert sorted(there) == sorted(here) and len(here) == 20
  for name, value in here.items():
    assert np.array_equal(there[name], value), name
