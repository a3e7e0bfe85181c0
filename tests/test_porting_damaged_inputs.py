"""The kit's own inputs damaged, its screen, its arguments (issue 48, items 6-8): a damaged
--start_from checkpoint or record.json is one line naming the file and what is wrong, never
"the port raised" (before: IndexError, OpError, AttributeError, KeyError, each blamed on the
team's code); TensorFlow's Python log stays off the kit's screen (before: "Error reported to
Coordinator" and a traceback before the kit's line, the per-variable "Reduce to /cpu:0" INFO
lines after the report); a stray path after `compare` is refused (before: ignored)."""

import json
import os
import sys
import uuid

import pytest
import tensorflow as tf

from porting import record
from tests import bn_momentum_port as m
from tests import dropout_adam_port as drop
from tests import forked
from tests import helpers

pytestmark = pytest.mark.filterwarnings("ignore:`tf.layers.")
PORT = ("--port=tests.bn_momentum_port:port", "--batches=tests.bn_momentum_port:batches")


def _data_file(prefix):
  (name,) = [n for n in os.listdir(os.path.dirname(prefix))
             if n.startswith(os.path.basename(prefix) + ".data-")]
  return os.path.join(os.path.dirname(prefix), name)


def test_a_damaged_start_from_checkpoint_is_one_line_naming_it(tmp_path):
  prefix = str(tmp_path / "team" / "model.ckpt-2")
  m.train_tf1(prefix, m.batches(1, steps=2))
  data = _data_file(prefix)
  whole = open(data, "rb").read()
  damages = {
      "cut": lambda: open(data, "wb").write(whole[:len(whole) // 2]),
      "flipped": lambda: open(data, "wb").write(bytes([whole[0] ^ 0xFF]) + whole[1:]),
      "missing": lambda: os.remove(data),
  }
  for how, damage in damages.items():
    damage()
    result = helpers.call("porting.__main__", *PORT, "--replicas=1", "--steps=1",
                          f"--start_from={prefix}", "compare")
    line = helpers.check_one_line(result, f"the TF1 checkpoint {prefix} ")
    assert "the port raised" not in line and "the kit failed" not in line, (how, line)
    assert "does not read back whole" in line or "cannot read" in line, (how, line)
    open(data, "wb").write(whole)


def test_a_damaged_record_json_is_one_line_naming_it():
  path = f"ram://record-{uuid.uuid4().hex}"
  record.write(drop.port(), drop.batches(1), path, replicas=1, steps=1)
  with tf.io.gfile.GFile(f"{path}/record.json") as f:
    header = json.loads(f.read())
  damages = {
      "a list": ([1, 2], "a JSON list, not an object"),
      "no variables": ({k: v for k, v in header.items() if k != "variables"},
                       "variables is missing"),
      "one rate for three steps": (dict(header, steps=3, learning_rates=[0.1]),
                                   "1 learning rate(s) for 3 step(s)"),
      "a shape that is a number": (dict(header, variables=[["w", 3]]),
                                   "variables are not [name, shape] pairs"),
  }
  for how, (damaged, why) in damages.items():
    tf.io.gfile.remove(f"{path}/record.json")  # ram:// writes over a file without cutting it
    with tf.io.gfile.GFile(f"{path}/record.json", "w") as f:
      f.write(json.dumps(damaged))
    result = helpers.call("porting.__main__", "--port=tests.dropout_adam_port:port",
                          f"--record={path}", "--steps=1", "compare")
    line = helpers.check_one_line(result, f"the record's {path}/record.json is damaged: {why}")
    assert "the port raised" not in line, how
  tf.io.gfile.remove(f"{path}/record.json")
  tf.io.gfile.makedirs(f"{path}/record.json")  # a folder where the file should be
  result = helpers.call("porting.__main__", "--port=tests.dropout_adam_port:port",
                        f"--record={path}", "--steps=1", "compare")
  helpers.check_one_line(result, f"the record's {path}/record.json is damaged (")


def _raising_loss(model, images, labels, global_batch_size):
  del model, images, labels, global_batch_size
  raise ValueError("the team's loss is wrong")


def raising_port():
  return drop.port(replica_loss=_raising_loss)


def _run(*args):
  return forked.run([sys.executable, "-m", "porting", *args], capture_output=True,
                    text=True, timeout=240, env=helpers.env(), cwd=helpers.REPO)


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_tensorflows_python_log_stays_off_the_kits_screen():
  result = _run("--port=tests.test_porting_damaged_inputs:raising_port",
                "--batches=tests.dropout_adam_port:batches", "--steps=1", "compare")
  assert result.returncode == 2
  python_lines = [l for l in result.stderr.splitlines()
                  if "Coordinator" in l or "Traceback" in l or ".py:" in l and "] " in l]
  assert python_lines == [], python_lines
  assert result.stderr.strip().splitlines()[-1].startswith(
      "error: the port raised ValueError at "), result.stderr[-1000:]
  # A run that ends (in this process, TensorFlow's log at INFO as absl's command line sets
  # it): its per-variable "Reduce to /cpu:0" lines came after the report.
  import logging  # pylint: disable=g-import-not-at-top
  tf_logger = logging.getLogger("tensorflow")
  level = tf_logger.level
  tf_logger.setLevel(logging.INFO)
  try:
    done = helpers.call("porting.__main__", "--port=tests.dropout_adam_port:port",
                        "--batches=tests.dropout_adam_port:batches", "--steps=1", "compare")
  finally:
    tf_logger.setLevel(level)
  assert done.returncode == 0 and done.stdout.rstrip().endswith("EQUAL")
  assert "Reduce to /cpu:0" not in done.stderr and "cross_device_ops" not in done.stderr


def test_a_stray_path_after_compare_is_one_line():
  result = helpers.call("porting.__main__", *PORT, "compare", "/tmp/typo")
  helpers.check_one_line(result, "compare takes no path (got /tmp/typo)")


# A tf.compat.v1.layers port's comparison without TensorFlow's deprecation lines (12 of
# "`tf.layers.conv2d` is deprecated ..." before the report): checked in the process of
# tests/test_process_end.py::test_a_report_into_a_closed_pipe_still_ends_with_its_verdict.
