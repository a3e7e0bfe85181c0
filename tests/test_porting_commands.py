"""The porting kit as a team uses it outside Python: its command line (compare, tf1_to_tf2,
tf2_to_tf1), checkpoint conversion both ways (slots, the original's float step and fp16
weights included), every failure as one line, and MIGRATION.md's "Port your own model"
section run as written. The model is tests/bn_momentum_port.py, as in tests/test_porting.py."""

import os
import re
import shlex
import sys

import numpy as np
import pytest
import tensorflow as tf

import porting
from porting import diffs
from porting import screen
from tests import bn_momentum_port as m
from tests import forked
from tests import helpers

# pytest resets warning filters per test; the model's own filter does not outlive it.
pytestmark = pytest.mark.filterwarnings(
    "ignore:`tf.layers.batch_normalization` is deprecated")


def test_a_checkpoint_goes_tf1_to_tf2_and_back_slots_included(tmp_path):
  data = m.batches(1, steps=2)
  saved = m.train_tf1(str(tmp_path / "tf1" / "model.ckpt-2"), data)
  path = porting.tf1_to_tf2(m.port(), str(tmp_path / "tf1" / "model.ckpt-2"),
                            str(tmp_path / "tf2" / "ckpt"), data[0])
  # Restored by the TF2 side as a TF2 program would: its model, its optimizer, a Checkpoint.
  net, optimizer = m.Net(), m.tf2_optimizer()
  optimizer.build(net.trainable_variables)
  tf.train.Checkpoint(model=net, optimizer=optimizer).read(path).assert_existing_objects_matched()
  weights = {v.path.split("/", 1)[1]: v.numpy() for v in net.weights}
  for name in ("conv1/kernel", "bn1/gamma", "bn1/beta", "bn1/moving_mean",
               "bn1/moving_variance", "logits/kernel", "logits/bias"):
    np.testing.assert_array_equal(weights[name], saved[name], err_msg=name)
  assert int(optimizer.iterations.numpy()) == saved["global_step"] == 2
  velocity = {v.name: v.numpy() for v in optimizer.variables}
  lr = np.float32(m.LEARNING_RATE)
  np.testing.assert_array_equal(velocity[f"{net.conv.kernel.path.replace('/', '_')}_momentum"],
                                -lr * saved["conv1/kernel/Momentum"])
  # And back, restored by the team's own TF1 graph and Saver.
  back = porting.tf2_to_tf1(m.port(), path, str(tmp_path / "tf1_again" / "model.ckpt"),
                            data[0])
  restored = m.restore_tf1(back, data[0])
  assert restored.keys() == saved.keys()
  for name, value in saved.items():
    if name.endswith("/Momentum"):  # -(-lr x accum) / lr: within an ULP of the accum
      assert diffs.diff(value, restored[name]).ulps <= 1, name
    else:
      np.testing.assert_array_equal(restored[name], value, err_msg=name)


PORT = ("--port=tests.bn_momentum_port:port", "--batches=tests.bn_momentum_port:batches")


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_the_command_line_compares_and_converts(tmp_path, capsys):
  result = helpers.call("porting.__main__", *PORT, "--replicas=2", "--steps=3", "compare")
  printed = capsys.readouterr().out
  assert result.returncode == 1 and printed.rstrip().endswith("NOT EQUAL")
  assert "cause: momentum: MomentumOptimizer keeps accum" in printed
  result = helpers.call("porting.__main__", *PORT, "--replicas=2", "--tolerance=1e-6",
                        "compare")
  assert result.returncode == 0 and capsys.readouterr().out.rstrip().endswith("\nEQUAL")
  data = m.batches(1, steps=2)
  saved = m.train_tf1(str(tmp_path / "model.ckpt-2"), data)
  result = helpers.call("porting.__main__", *PORT, "tf1_to_tf2", str(tmp_path / "model.ckpt-2"),
                        str(tmp_path / "tf2" / "ckpt"))
  assert result.returncode == 0, result.stderr
  assert capsys.readouterr().out.strip() == f"wrote {tmp_path / 'tf2' / 'ckpt'}"
  result = helpers.call("porting.__main__", *PORT, "tf2_to_tf1", str(tmp_path / "tf2" / "ckpt"),
                        str(tmp_path / "back" / "model.ckpt"))
  assert result.returncode == 0, result.stderr
  restored = m.restore_tf1(str(tmp_path / "back" / "model.ckpt"), data[0])
  np.testing.assert_array_equal(restored["conv1/kernel"], saved["conv1/kernel"])


@pytest.mark.parametrize("args, expected", [
    (("compare",), "--port must be module:attribute"),
    (("--port=tests.nothing_here:port", "compare"), "cannot import tests.nothing_here"),
    ((*PORT, "convert"), "unknown command 'convert'; the commands: compare, record, "
                         "tf1_to_tf2, tf2_to_tf1"),
    ((*PORT, "compre"), "unknown command 'compre' (did you mean compare?)"),
    ((*PORT,), "give a command: compare, record, tf1_to_tf2, tf2_to_tf1"),
    ((*PORT, "--replicas=0", "compare"), "flag --replicas=0: 0 is not an integer in the range [1, 64]"),
    ((*PORT, "tf1_to_tf2", "/nonexistent/model.ckpt"), "takes two paths"),
    ((*PORT, "tf1_to_tf2", "/nonexistent/model.ckpt", "/tmp/x"),
     "cannot read the TF1 checkpoint /nonexistent/model.ckpt"),
    ((*PORT, "tf2_to_tf1", "/nonexistent/ckpt-1", "/tmp/x"),
     "cannot restore the TF2 model from /nonexistent/ckpt-1"),
])
def test_every_command_line_failure_is_one_line(args, expected):
  helpers.check_one_line(helpers.call("porting.__main__", *args), expected)


def test_a_checkpoint_of_another_model_is_one_line(tmp_path):
  # The TF2 checkpoint handed to tf1_to_tf2: none of the TF1 names are in it.
  data = m.batches(1, steps=1)
  m.train_tf1(str(tmp_path / "model.ckpt-1"), data, steps=1)
  tf2 = porting.tf1_to_tf2(m.port(), str(tmp_path / "model.ckpt-1"), str(tmp_path / "ckpt"),
                           data[0])
  result = helpers.call("porting.__main__", *PORT, "tf1_to_tf2", tf2, str(tmp_path / "again"))
  line = helpers.check_one_line(result, f"the TF1 checkpoint {tf2} lacks conv1/kernel")
  assert "is it this model's?" in line


def _section():
  with open(os.path.join(helpers.REPO, "MIGRATION.md"), encoding="utf-8") as f:
    text = f.read()
  start = text.index("## Port your own model")
  return text[start:text.index("\n## ", start + 1)]


def _blocks(section, language):
  return re.findall(rf"```{language}\n(.*?)```", section, re.DOTALL)


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_migrations_port_your_own_model_shows_the_real_code_and_output(tmp_path, capsys):
  section = _section()
  with open(os.path.join(helpers.REPO, "tests", "bn_momentum_port.py"), encoding="utf-8") as f:
    source = f.read()
  python = _blocks(section, "python")
  assert len(python) == 4
  for code in python[:2]:  # the TF1 code and its port, verbatim
    assert code in source
  commands = [c for block in _blocks(section, "sh") for c in block.strip().splitlines()]
  assert len(commands) == 4
  # The comparison: what it prints is the report shown, but for what the machine's kernels
  # decide (its machine line, the digits, which rows differ by rounding and from which step).
  args = shlex.split(commands[0])[3:]
  result = helpers.call("porting.__main__", *args)
  assert result.returncode == 1
  assert_same_report(capsys.readouterr().out, _blocks(section, "text")[0])
  # The checkpoint commands, in order (their folder moved under tmp_path).
  demo = str(tmp_path / "port_demo")
  code = shlex.split(commands[1].replace("/tmp/port_demo", demo))[2]
  exec(code, {})  # pylint: disable=exec-used
  for command in commands[2:]:
    result = helpers.call("porting.__main__",
                          *shlex.split(command.replace("/tmp/port_demo", demo))[3:])
    assert result.returncode == 0, result.stderr
  restored = m.restore_tf1(f"{demo}/tf1_again/model.ckpt", None)
  assert restored["global_step"] == 2
  # The CI test, run as a team would: conftest first, then the test function.
  namespace = {}
  for code in python[2:]:
    exec(code, namespace)  # pylint: disable=exec-used
  namespace["test_the_tf2_port_equals_the_tf1_towers"]()


ROW = re.compile(r"  (\w+) +(\S+) +(\S+) +(\S+) +(\S+) +(\S+) +(\S+)  (ok|DIFFERS)$")


def assert_same_report(printed, documented, bound=1e-6):
  """`printed` is the `documented` report as another machine prints it: the same title,
  rows (kind and both names, in order), rates, causes and verdict, a machine line that is
  this machine's, and every row's max rel within `bound` (what the doc's tolerance passes).
  Not the same digits, ULPs or DIFFERS/ok: those are the CPU's kernels' (4 ULPs here, 64 on
  another kind of CPU)."""
  from tfbits import machine  # pylint: disable=g-import-not-at-top
  assert max(map(len, printed.splitlines())) <= 100, printed  # a terminal's, not 120-301
  got, want = _unwrapped(printed), _unwrapped(documented)
  assert len(got) == len(want), printed
  for a, b in zip(got, want):
    if b.startswith("  machine: "):
      assert a == f"  machine: {machine.describe().line()}"
    elif ROW.match(b):
      rows = ROW.match(a), ROW.match(b)
      assert rows[0] and rows[0].group(1, 2, 3) == rows[1].group(1, 2, 3), (a, b)
      assert all(float(r.group(5)) <= bound for r in rows), (a, b)
    elif b.startswith("NOT EQUAL: the first difference"):
      assert re.match(r"NOT EQUAL: the first difference is at step \d+, \w+ of \S+ \(max "
                      r"\|diff\| ", a), a
    elif b.startswith(("  cause: ", "  replicas apart: ")):  # sizes are the machine's
      number = r"\d+(\.\d+)?(e[-+]?\d+)?"
      assert re.sub(number, "#", a) == re.sub(number, "#", b), (a, b)
    else:
      assert a == b


def _unwrapped(text):
  """The report's lines with each wrapped line's continuations (porting.screen: indented by
  4) joined back: where a line breaks is the machine line's length, the machine's."""
  out = []
  for line in text.rstrip("\n").split("\n"):
    if line.startswith(screen.INDENT) and out:
      out[-1] += " " + line.strip()
    else:
      out.append(line)
  return out


def test_a_tf1_checkpoint_with_a_float_step_and_half_weights_converts(tmp_path):
  # The original tutorial's checkpoints: a float32 global step; --use_fp16: float16 weights.
  data = m.batches(1, steps=2)
  saved = m.train_tf1(str(tmp_path / "tf1" / "model.ckpt-2"), data)
  with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
    cast = {name: tf.compat.v1.Variable(
        value.astype(np.float32 if name == "global_step" else
                     np.float16 if "Momentum" not in name and "moving" not in name else
                     value.dtype), name=name) for name, value in saved.items()}
    sess.run(tf.compat.v1.global_variables_initializer())
    tf.compat.v1.train.Saver(cast).save(sess, str(tmp_path / "old" / "model.ckpt-2"),
                                        write_meta_graph=False)
  path = porting.tf1_to_tf2(m.port(), str(tmp_path / "old" / "model.ckpt-2"),
                            str(tmp_path / "tf2" / "ckpt"), data[0])
  net, optimizer = m.Net(), m.tf2_optimizer()
  optimizer.build(net.trainable_variables)
  tf.train.Checkpoint(model=net, optimizer=optimizer).read(path).assert_existing_objects_matched()
  assert int(optimizer.iterations.numpy()) == 2
  np.testing.assert_array_equal(net.conv.kernel.numpy(),
                                saved["conv1/kernel"].astype(np.float16).astype(np.float32))
  assert net.conv.kernel.numpy().dtype == np.float32


def _broken_replica_loss(model, images, labels, global_batch_size):
  del model, images, labels, global_batch_size
  raise ValueError("this port's loss has a bug")


def broken_port():
  return m.port(replica_loss=_broken_replica_loss)


def not_keras_port():
  return m.port(tf2_optimizer=lambda: tf.compat.v1.train.MomentumOptimizer(0.1, 0.9))


def odd_batches(replicas):
  return m.batches(replicas, per_replica=3)[:1] + [(np.zeros((5, 8, 8, 3), np.float32),
                                                     np.zeros(5, np.int32))]


@pytest.mark.parametrize("port, batches, expected", [
    ("tests.test_porting_commands:broken_port", "tests.bn_momentum_port:batches",
     "the port raised ValueError at "),
    ("tests.test_porting_commands:not_keras_port", "tests.bn_momentum_port:batches",
     "tf2_optimizer() returned MomentumOptimizer, not a Keras optimizer"),
    ("tests.bn_momentum_port:port", "tests.test_porting_commands:odd_batches",
     "splits into 2 equal slices"),
])
def test_a_port_that_fails_is_one_line_naming_where(port, batches, expected):
  result = helpers.call("porting.__main__", f"--port={port}", f"--batches={batches}",
                        "--replicas=2", "--steps=2", "compare")
  line = helpers.check_one_line(result, expected)
  if "ValueError" in expected:  # the team's own line, and its message
    assert "test_porting_commands.py:" in line and line.endswith("this port's loss has a bug")


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_one_replica_needs_no_device_configuration_once_tensorflow_has_started():
  # `python -m equivalence --num_gpus=1` failed with "1 replicas need 1 logical CPU devices,
  # and TensorFlow has started with 1": the unconfigured CPU was counted as none.
  code = ("import tensorflow as tf; tf.constant(1.0) + 1.0; import porting; "
          "print(porting.replica_devices(1))")
  result = forked.run([sys.executable, "-c", code], capture_output=True, text=True,
                      env=helpers.env(), timeout=120, cwd=helpers.REPO)
  assert result.returncode == 0 and result.stdout == "['/cpu:0']\n", result.stderr[-2000:]


def test_a_failed_run_in_process_leaves_the_callers_log_levels_as_they_were():
  """The kit quiets TensorFlow's and absl's Python loggers while it runs. A failure left them
  quiet for the rest of the process (meant for the exit), so a caller's later warnings
  vanished: in this suite, a worker's later test lost the absl warning it asserted."""
  import logging  # pylint: disable=g-import-not-at-top
  # The command line's start sets both (TensorFlow's first screen quieted, absl's verbosity)
  # before the kit runs: run once first, so that the levels read are those it leaves (in a
  # process where no test had run a command before, this test failed on that start alone).
  helpers.call("porting.__main__", *PORT, "tf2_to_tf1", "/nonexistent/ckpt-1", "/tmp/x")
  levels = {name: logging.getLogger(name).level for name in ("tensorflow", "absl")}
  result = helpers.call("porting.__main__", *PORT, "tf2_to_tf1", "/nonexistent/ckpt-1", "/tmp/x")
  assert result.returncode == 2
  assert {name: logging.getLogger(name).level for name in levels} == levels
