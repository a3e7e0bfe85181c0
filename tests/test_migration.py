"""MIGRATION.md's map stays true: every file:function and every test it names exists.

The table must also cover every TF1 idiom the migration kit promises, one row each.
"""

import ast
import importlib
import os
import re

import pytest

from tests import helpers

DOC = os.path.join(helpers.REPO, "MIGRATION.md")
CODE = re.compile(r"`((?:[\w]+/)*[\w]+\.py):([\w.]+)`")
TEST = re.compile(r"`(tests/\w+\.py)::(\w+)`")
IDIOMS = ("ConfigProto", "CUDA_VISIBLE_DEVICES", "log_device_placement", "allow_soft_placement",
          "tf.device('/gpu:%d' % i)", "reuse_variables", "average_gradients",
          "compute_gradients", "tf.app.flags", "exponential_decay",
          "ExponentialMovingAverage", "FileWriter", "tf.train.Saver", "shuffle_batch",
          "prefetch_queue", "ClusterSpec", "tf.train.Server", "replica_device_setter",
          "MonitoredTrainingSession", "sess.run(train_op)", "SyncReplicasOptimizer", "asynchronous ps/worker",
          "multi_gpu_model", "model parallelism", "is_gpu_available")


def _text():
  with open(DOC, encoding="utf-8") as f:
    return f.read()


def _rows():
  table = [line for line in _text().splitlines() if line.startswith("|")]
  return table[2:]  # after the header and the |---| line


def test_every_code_reference_imports():
  refs = sorted(set(CODE.findall(_text())))
  assert len(refs) >= 30, refs
  for path, attribute in refs:
    module = importlib.import_module(path[:-3].replace("/", "."))
    target = module
    for part in attribute.split("."):
      assert hasattr(target, part), f"{path}:{attribute} does not exist"
      target = getattr(target, part)
    assert callable(target), f"{path}:{attribute} is not a function or class"


def test_every_test_reference_exists():
  refs = sorted(set(TEST.findall(_text())))
  assert len(refs) >= 25, refs
  for path, name in refs:
    with open(os.path.join(helpers.REPO, path), encoding="utf-8") as f:
      tree = ast.parse(f.read())
    names = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert name in names, f"{path}::{name} does not exist"


@pytest.mark.parametrize("idiom", IDIOMS)
def test_each_tf1_idiom_has_a_row_with_both_sides_located(idiom):
  rows = [row for row in _rows() if idiom in row.split(" | ")[0]]
  assert rows, f"no row for {idiom}"
  for row in rows:
    cells = [c.strip() for c in row.strip("|").split(" | ")]
    assert len(cells) == 6, cells
    assert CODE.search(cells[3]), f"{idiom}: no TF2 location"
    assert TEST.search(cells[4]), f"{idiom}: no test"


def _source(ref):
  """The source of `file.py:name` (a function, a class, or a method of one)."""
  import inspect  # pylint: disable=g-import-not-at-top
  path, attribute = ref
  target = importlib.import_module(path[:-3].replace("/", "."))
  for part in attribute.split("."):
    target = getattr(target, part)
  return inspect.getsource(target)


def _apis(cell):
  """The last names of the APIs a cell names in backticks (`tf.distribute.Foo(...)` -> Foo)."""
  names = set()
  for code in re.findall(r"`([^`]+)`", cell):
    for dotted in re.findall(r"[A-Za-z_][\w.]*", code):
      last = dotted.split(".")[-1]
      if len(last) > 3 and last not in ("True", "False", "None", "self"):
        names.add(last)
  return names


# Rows whose TF2 form names where the code can be used, not what it calls.
NAMES_A_CONTEXT = {"cifar10/schedule.py:learning_rate": "usable in `tf.function`"}


def test_each_row_names_code_that_uses_what_it_says():
  """The TF2 place a row names uses at least one API of the TF2 form it gives, so a row
  cannot point at a function that has moved on (the TF1 column may show the TF1 idiom
  replaced, as compat_v1's tf.data input replaces queue runners)."""
  checked = 0
  for row in _rows():
    cells = [c.strip() for c in row.strip("|").split(" | ")]
    if len(cells) != 6:
      continue  # a row of another table
    refs, apis = CODE.findall(cells[3]), _apis(cells[1])
    if not refs or not apis or all(f"{p}:{a}" in NAMES_A_CONTEXT for p, a in refs):
      continue
    source = "\n".join(_source(ref) for ref in refs)
    assert any(re.search(rf"\b{re.escape(a)}\b", source) for a in apis), (
        f"{cells[3]} uses none of {sorted(apis)} ({cells[0][:60]})")
    checked += 1
  assert checked >= 20, checked
