"""The porting kit against hostile and careless input (issue 36's kit items): a comparison of
values that are not finite is never EQUAL, a tolerance that is no number is refused, the
replica and step counts are bounded as the trainers' are, and a port that exits is a failure
with no verdict. Before: NaN on both sides was EQUAL, exit 0, with no word; --tolerance=nan
was taken; --replicas=1000 never ended; sys.exit(0) in the team's module exited 0, which a CI
job reads as "equal"."""

import math
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import porting
from porting import devices
from porting import diffs
from tests import bn_momentum_port as m
from tests import forked
from tests import helpers

pytestmark = pytest.mark.filterwarnings("ignore:`tf.layers.")
PORT = ("--port=tests.bn_momentum_port:port", "--batches=tests.bn_momentum_port:batches")


def test_values_that_are_not_finite_are_never_equal():
  nan = np.array([np.nan, 1.0], np.float32)
  found = diffs.diff(nan, nan.copy())
  assert (found.max_abs, found.ulps, found.nonfinite) == (0.0, 0, True)
  assert not found.within(0) and not found.within(1.0)
  inf = np.array([np.inf, 1.0], np.float32)
  assert diffs.diff(inf, inf.copy()).nonfinite
  assert not diffs.diff(np.ones(3, np.float32), np.ones(3, np.float32)).nonfinite
  assert not diffs.diff(np.arange(3), np.arange(3)).nonfinite  # integers: always finite


def _nan_loss(images, labels):
  loss, logits = m.tower_loss(images, labels)
  return loss * np.float32(np.nan), logits


def _nan_replica_loss(model, images, labels, global_batch_size):
  loss, logits = m.replica_loss(model, images, labels, global_batch_size)
  return loss * np.float32(np.nan), logits


def test_a_port_whose_both_sides_go_nan_is_not_equal_and_says_so():
  report = porting.compare(m.port(tower_loss=_nan_loss, replica_loss=_nan_replica_loss),
                           m.batches(2), replicas=2, steps=1)
  assert not report.equal
  assert report.hints[0].startswith("not finite: ") and "the first at step 0, loss of tower_0" \
      in report.hints[0], report.hints
  assert "NON-FINITE" in report.text() and report.text().endswith("NOT EQUAL")


@pytest.mark.parametrize("tolerance", [math.nan, math.inf, -1e-6])
def test_a_tolerance_that_is_no_bound_is_refused(tolerance):
  with pytest.raises(porting.PortError) as raised:
    porting.compare(m.port(), m.batches(2), replicas=2, steps=1, tolerance=tolerance)
  assert str(raised.value) == f"tolerance must be a finite number >= 0, got {tolerance!r}"


@pytest.mark.parametrize("args, expected", [
    (("--tolerance=nan",), "flag --tolerance=nan: must be a number from 0 to 1"),
    (("--tolerance=inf",), "flag --tolerance=inf: inf is not a number in the range [0.0, 1.0]"),
    (("--replicas=65",), "65 is not an integer in the range [1, 64]"),
    (("--replicas=1000",), "1000 is not an integer in the range [1, 64]"),
    (("--steps=100001",), "100001 is not an integer in the range [1, 100000]"),
    (("--steps=0",), "0 is not an integer in the range [1, 100000]"),
])
def test_out_of_range_numbers_are_one_line_before_tensorflow_runs(args, expected):
  result = helpers.call("porting.__main__", *PORT, *args, "compare")
  helpers.check_one_line(result, expected)


def test_the_command_lines_replica_bound_is_the_kits():
  from porting import __main__ as command_line  # pylint: disable=g-import-not-at-top
  assert command_line.MAX_REPLICAS == devices.MAX_REPLICAS
  with pytest.raises(porting.PortError):
    devices.replica_devices(devices.MAX_REPLICAS + 1)


def _exits(images, labels):
  del images, labels
  raise SystemExit(0)


def exiting_port():
  return m.port(tower_loss=_exits)


def test_a_port_that_exits_is_a_failure_with_no_verdict():
  result = helpers.call("porting.__main__", "--port=tests.test_porting_hostile:exiting_port",
                        "--batches=tests.bn_momentum_port:batches", "compare")
  line = helpers.check_one_line(result, "the port exited (sys.exit(0)) at ")
  assert "tests/test_porting_hostile.py:" in line and line.endswith(
      "; no comparison ran to its end"), line
  assert tf.executing_eagerly()


@pytest.mark.slow  # a process of its own: the warnings came at its exit
def test_the_error_is_the_last_line_after_a_failed_restore(tmp_path):
  net, optimizer = m.Net(), m.tf2_optimizer()
  optimizer.build(net.trainable_variables)
  other = tf.train.Checkpoint(model=net, optimizer=optimizer).write(str(tmp_path / "bn" / "ckpt"))
  result = forked.run(
      [sys.executable, "-m", "porting", "tf2_to_tf1", "--port=tests.dropout_adam_port:port",
       "--batches=tests.dropout_adam_port:batches", other, str(tmp_path / "out" / "model.ckpt")],
      capture_output=True, text=True, timeout=240, env=helpers.env(), cwd=helpers.REPO)
  # Before: ~20 "Value in checkpoint could not be found" warnings followed the error.
  line = helpers.check_one_line(result, f"error: cannot restore the TF2 model from {other}: ")
  assert "unrestored" not in result.stderr and line == result.stderr.rstrip().splitlines()[-1]


def test_the_kit_imports_nothing_of_the_project():
  """README: the kit (its command line included) stands alone, for teams that take it
  without the trainers. Before: porting/__main__.py imported cifar10.errors and harness.command_line.cli."""
  import glob  # pylint: disable=g-import-not-at-top
  ours = ("cifar10", "harness", "strategies", "compat_v1", "equivalence", "examples",
          "benchmarks")
  found = []
  for path in glob.glob(os.path.join(helpers.REPO, "porting", "*.py")):
    with open(path, encoding="utf-8") as f:
      for number, line in enumerate(f, 1):
        words = line.split()
        if words[:1] in (["import"], ["from"]) and words[1].split(".")[0] in ours:
          found.append(f"{os.path.basename(path)}:{number}: {line.strip()}")
  assert not found, found


@pytest.mark.slow  # processes of their own: the kit's runner, not harness.command_line.cli's
@pytest.mark.parametrize("args, status, last", [
    (("--replicas=0", "compare"), 2, "error: flag --replicas=0: 0 is not an integer in the "
     "range [1, 64]"),
    (("--bogus",), 2, "error: Unknown command line flag 'bogus'"),
    (("compare", "--port=no_such_module:port"), 2, "error: --port: cannot import "
     "no_such_module (No module named 'no_such_module')"),
    (("--port=tests.bn_momentum_port:port", "--batches=tests.bn_momentum_port:batches",
      "--steps=1", "compare"), 1, "NOT EQUAL"),
])
def test_the_kits_own_command_line_exit_statuses(args, status, last):
  result = forked.run([sys.executable, "-m", "porting", *args], capture_output=True,
                      text=True, timeout=120, env=helpers.env(), cwd=helpers.REPO)
  out = (result.stdout if status == 1 else result.stderr).strip().splitlines()
  assert result.returncode == status and out[-1] == last, result.stderr[-1500:]


def test_a_module_that_is_not_there_is_refused_before_tensorflow_starts():
  """--port or --batches naming no module: the line came after TensorFlow's import (2 s of
  CPU); the module is looked for first now, not imported."""
  code = ("import os, sys\n"
          "sys.argv = ['porting', 'compare', '--port=tests.bn_momentum_port:port', "
          "'--batches=no_such_batches:batches']\n"
          "from porting import __main__ as kit\n"
          "from tfbits import process_end\n"
          "def end(status):  # the kit's end, after saying what the process imported\n"
          "  print(status, sorted(m for m in sys.modules if m.startswith('tensorflow'))[:1],"
          " flush=True)\n"
          "  os._exit(status)\n"
          "process_end.end_process = end\n"
          "kit.command_line()\n")
  result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env=helpers.env(), cwd=helpers.REPO)
  assert result.stdout == "2 []\n", result.stdout + result.stderr[-1500:]
  assert result.stderr.strip().splitlines()[-1] == (
      "error: --batches: cannot import no_such_batches (No module named 'no_such_batches')")


@pytest.mark.parametrize("flag", ["--help", "-h", "--helpfull"])
def test_help_exits_0_with_the_commands_and_every_flag_within_80_columns(flag):
  result = subprocess.run([sys.executable, "-m", "porting", flag], env=helpers.env(),
                          cwd=helpers.REPO, capture_output=True, text=True, timeout=60)
  # Before: absl's --help ended with status 1, and -h was "Unknown command line flag 'h'".
  assert result.returncode == 0, result.stderr
  lines = result.stdout.rstrip("\n").split("\n")
  assert lines[0] == "The porting kit's command line: compare a port, or convert its checkpoints."
  assert max(len(line) for line in lines) <= 80
  for name in ("port", "batches", "replicas", "steps", "start_from", "record", "overwrite",
               "tf1_checkpoint", "tolerance"):
    assert any(line.startswith(f"  --{name}: ") for line in lines), name


def test_the_kit_where_absl_is_missing_is_one_line():
  """The recorder installed into an environment without TensorFlow (and so without absl-py,
  which TensorFlow brings): `python -m porting` was a ModuleNotFoundError traceback."""
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  from tests import helpers  # pylint: disable=g-import-not-at-top
  code = ("import importlib.abc, runpy, sys\n"
          "class NoAbsl(importlib.abc.MetaPathFinder):\n"
          "  def find_spec(self, name, path, target=None):\n"
          "    if name == 'absl' or name.startswith('absl.'):\n"
          "      raise ImportError('No module named ' + repr(name))\n"
          "sys.meta_path.insert(0, NoAbsl())\n"
          "sys.argv = ['porting', '--help']\n"
          "runpy.run_module('porting', run_name='__main__')\n")
  result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env=helpers.env(), cwd=helpers.REPO)
  assert result.returncode == 2, result.stderr
  assert result.stderr.splitlines() == [
      "error: absl-py is missing here: run the kit with the Python of the environment whose "
      "TensorFlow it compares or records (TensorFlow brings absl-py), or pip install absl-py"]


def test_a_port_missing_a_function_is_the_ports_error_not_the_kits():
  """Port(tf2_optimizer=None) was 'the kit failed: TypeError at porting/tf2_replicas.py ...
  (a fault of porting ..., not of the port)': the port's own fault blamed on the kit."""
  from tests import bn_momentum_port  # pylint: disable=g-import-not-at-top
  with pytest.raises(porting.PortError) as raised:
    bn_momentum_port.port(tf2_optimizer=None)
  assert str(raised.value) == "Port's tf2_optimizer must be a function, got NoneType"


def test_a_message_of_several_lines_is_said_by_its_first():
  """Keras 3's errors put what is wrong first and a bullet list after it; the kit's one line
  kept the last line ('• training=True') and lost the message."""
  def replica_loss():
    raise ValueError("Only input tensors may be passed as positional arguments.\n"
                     "Received arguments:\n  • training=True")
  try:
    replica_loss()
  except ValueError as e:
    line = porting.errors.one_line(e)
  assert line.startswith("the port raised ValueError at ")
  assert line.endswith(": Only input tensors may be passed as positional arguments.")


def test_a_keras_deserialization_error_is_said_by_its_reason():
  """A Bidirectional cloning an unregistered cell: the line was Keras's wrapper ('could not
  be deserialized properly...') and dropped the reason it gives after 'Exception
  encountered:'."""
  def build_model():
    raise TypeError("<class 'keras.src.layers.rnn.rnn.RNN'> could not be deserialized "
                    "properly. Please ensure ...\n\nconfig={'module': 'keras.layers'}.\n\n"
                    "Exception encountered: Could not locate class 'TF1GRUCell'. Make sure "
                    "custom classes are decorated. Full object config: {'module': 'gru'}")
  try:
    build_model()
  except TypeError as e:
    line = porting.errors.one_line(e)
  assert line.endswith(": Could not locate class 'TF1GRUCell'. Make sure custom classes are "
                       "decorated."), line


def test_a_tf1_optimizer_without_a_readable_rate_is_told_where_to_keep_it():
  from tests import bn_momentum_port  # pylint: disable=g-import-not-at-top

  class NoRate(tf.compat.v1.train.GradientDescentOptimizer):
    def __init__(self):
      super().__init__(0.1)
      del self._learning_rate

  with pytest.raises(porting.PortError) as raised:
    porting.compare(bn_momentum_port.port(tf1_optimizer=lambda step: NoRate()),
                    bn_momentum_port.batches(1), replicas=1, steps=1)
  assert str(raised.value).endswith(
      "set self._learning_rate to its rate (a float or a tensor) in its __init__")


def test_a_wrapped_message_is_said_by_the_wrapped_words():
  """TensorFlow's graph errors ('Graph execution error:', the node's frames, then the op's
  words) and Keras 3's layer errors ('Exception encountered when calling X.call().', then
  the words in bold) were said by their wrapper's first line."""
  def tower():
    raise tf.errors.FailedPreconditionError(
        None, None, "Graph execution error:\n\nDetected at node tower_0/lookup defined at "
        "(most recent call last):\n  File \"model.py\", line 62, in tower_loss\n\nTable not "
        "initialized.\n\t [[{{node tower_0/lookup}}]]")

  def call():
    raise ValueError("Exception encountered when calling DeepTower.call().\n\n\x1b[1mConcatV2 "
                     "expected float, got int64\x1b[0m\n\nArguments received by "
                     "DeepTower.call():\n  \u2022 x=tf.Tensor(shape=(4, 7))")
  for raises, words in ((tower, ": Table not initialized."),
                        (call, ": ConcatV2 expected float, got int64")):
    try:
      raises()
    except Exception as e:  # pylint: disable=broad-except
      line = porting.errors.one_line(e)
    assert line.endswith(words), line


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_outputs_of_several_shapes_are_compared_as_one():
  """A segmentation head beside a classifier's scores, returned as a list on both sides: the
  kit failed with a ValueError from numpy ("the kit failed ..., not of the port")."""
  from tests import dropout_adam_port as drop  # pylint: disable=g-import-not-at-top

  def two(result):
    loss, logits = result
    return loss, [logits, tf.reduce_sum(logits, 1, keepdims=True), {"p": tf.nn.softmax(logits)}]

  port = drop.port(tower_loss=lambda images, labels: two(drop.tower_loss(images, labels)),
                   replica_loss=lambda *args: two(drop.replica_loss(*args)))
  report = porting.compare(port, drop.batches(1, steps=1), replicas=1, steps=1)
  assert report.equal, report.text()
  (outputs,) = [r for r in report.rows if r.kind == "outputs"]
  assert outputs.diff.ulps == 0
  # A list on one side, a dict on the other: flattened by sorted keys, the rows compare the
  # scores with the logits; the kit said "the bits part ... in the forward pass".
  def as_dict(result):
    loss, logits = result
    return loss, {"b": logits, "a": tf.reduce_sum(logits, 1, keepdims=True)}

  def as_list(result):
    loss, logits = result
    return loss, [logits, tf.reduce_sum(logits, 1, keepdims=True)]

  other = drop.port(tower_loss=lambda images, labels: as_list(drop.tower_loss(images, labels)),
                    replica_loss=lambda *args: as_dict(drop.replica_loss(*args)))
  report = porting.compare(other, drop.batches(1, steps=1), replicas=1, steps=1)
  assert report.hints[0].startswith(
      f"the two sides return other outputs: TF1 2 tensor(s) ([0] [4, {drop.CLASSES}], [1] "
      f"[4, 1]), TF2 2 (['a'] [4, 1], ['b'] [4, {drop.CLASSES}])"), report.hints
  assert len(report.hints) == 1, report.hints  # no "the bits part ... in the forward pass"
  with pytest.raises(porting.PortError, match=r"outputs of several dtypes \(float32, int32\); "
                     "cast them to one"):
    from porting import spec  # pylint: disable=g-import-not-at-top
    spec.loss_and_outputs((tf.constant(1.0), [tf.constant([1.0]), tf.constant([1])]))


def test_the_kits_keras_modules_where_there_is_no_keras_are_one_line(monkeypatch):
  """A VAE port's Port() imported porting.optimizers; recording on TF 1.15 said 'the kit
  failed: ModuleNotFoundError at porting/optimizers.py: No module named keras (a fault of
  porting ...)': the port's import was the fault, and the line now says where it belongs."""
  monkeypatch.setitem(sys.modules, "keras", None)  # import keras: ImportError, as on 1.15
  with pytest.raises(porting.PortError) as raised:
    porting.errors.keras_for("porting.optimizers")
  assert str(raised.value) == (
      f"porting.optimizers holds Keras 3 code for the TF2 side, and this Python (TensorFlow "
      f"{tf.__version__}) has no Keras 3: import it inside build_model or tf2_optimizer (the "
      "recorder never calls them), not where the port's module or Port is made")
