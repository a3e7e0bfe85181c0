"""The tower trainer's Session makes its devices before anything starts TensorFlow 2's eager
runtime: reading tfds and building the input's tf.data functions start it, and where that came
first the ConfigProto's GPU options (memory growth and cap, the visible list) no longer
applied to the devices already made (harness.devices.gpu_runtime). Run in a new process each: this
one's eager runtime started long ago (the fork server's never starts: tests/forked.py)."""

import json
import sys

import pytest

from tests import forked
from tests import helpers

# Records, at each v1 Session's creation, whether the eager context had started; then runs
# the binary in-process with tfds's mock data (offline).
_SCRIPT = """
import json, sys
import tensorflow as tf
import tensorflow_datasets as tfds
from tensorflow.python.eager import context
started = []
init = tf.compat.v1.Session.__init__
def record(self, *args, **kwargs):
  started.append(context.context()._initialized)
  init(self, *args, **kwargs)
tf.compat.v1.Session.__init__ = record
import importlib
from harness.command_line import cli
binary = importlib.import_module(sys.argv[1])
with tfds.testing.mock_data(num_examples=8, policy=tfds.testing.MockPolicy.USE_CODE):
  status = cli.call(binary.define_flags, binary.main, sys.argv[2:])
print(json.dumps({"status": status, "started": started}))
"""


def _sessions(module, *args):
  result = forked.run([sys.executable, "-c", _SCRIPT, module, *args], capture_output=True,
                      text=True, timeout=120, env=helpers.env(), cwd=helpers.REPO)
  assert result.returncode == 0, result.stderr[-3000:]
  return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_the_v1_trainer_and_evaluator_open_their_session_before_the_eager_runtime(tmp_path):
  train_dir, data = str(tmp_path / "run"), str(tmp_path / "tfds")
  out = _sessions("compat_v1.train", "--dataset=cifar10", f"--data_dir={data}",
                  f"--train_dir={train_dir}", "--max_steps=1", "--batch_size=4")
  assert out["status"] == 0
  assert out["started"] == [False]  # before: [True], tfds's read had started it
  out = _sessions("compat_v1.eval", "--dataset=cifar10", f"--data_dir={data}",
                  f"--checkpoint_dir={train_dir}", "--run_once", "--num_examples=8",
                  "--batch_size=4")
  assert out["status"] == 0
  assert out["started"] == [False]  # before: [True] (one Session per checkpoint, after)
