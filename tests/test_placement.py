"""Where ops run, read from TensorFlow's placement log, and what the device flags do.

(--log_device_placement of both trainers is checked in test_cross_binaries, on its runs.) The
two-branch model (device parallelism) really runs each branch on its device and the head on
the host; soft placement moves an op with nowhere to go (an int32 variable on an absent GPU)
to the CPU, and without it the binaries say so in one line. What the device flags ask of
GPUs (faked): tests/test_gpu_devices.py.
"""

import re
import sys

import numpy as np
import pytest
import tensorflow as tf

from cifar10 import config
from cifar10 import model
from compat_v1 import devices as v1_devices
from examples import two_branch
from harness.command_line import cli
from tests import forked
from tests import helpers

PLACED = re.compile(r"^(\S+): \((\w+)\): /job:localhost/replica:0/task:0/device:(\w+:\d+)$",
                    re.MULTILINE)


@pytest.mark.slow
def test_two_branches_run_on_their_devices_and_learn(tmp_path):
  result = helpers.run("examples.model_parallel", "--num_gpus=2", "--dataset=synthetic",
                       "--steps=40", "--learning_rate=0.1", "--log_device_placement",
                       "--log_frequency=39", fork=True)
  assert result.returncode == 0, result.stderr[-3000:]
  placed = [(name.split("/")[0], kind, device)
            for name, kind, device in PLACED.findall(result.stdout)
            if kind in ("Conv2D", "MatMul", "Relu")]
  branch_0 = {d for scope, _, d in placed if scope == "branch_0"}
  branch_1 = {d for scope, _, d in placed if scope == "branch_1"}
  head = {d for scope, kind, d in placed if scope == "head" and kind == "MatMul"}
  assert (branch_0, branch_1, head) == ({"CPU:0"}, {"CPU:1"}, {"CPU:0"}), placed
  assert {k for s, k, _ in placed if s == "branch_1"} == {"Conv2D", "MatMul", "Relu"}
  losses = [float(x) for x in re.findall(r"step \d+, loss = (\d+\.\d+)", result.stderr)]
  # Measured: 2.303 -> 1.859 (seed 0); chance level is ln(10) = 2.303.
  assert len(losses) == 2 and losses[0] == pytest.approx(2.303, abs=0.01), losses
  assert losses[1] < 2.1, losses


def test_two_branch_logits_are_the_one_device_computation():
  images = tf.random.stateless_uniform([4, 24, 24, 3], seed=[1, 2])
  split = two_branch.TwoBranchModel(["/cpu:0", "/cpu:1"], "/cpu:0", seed=3)
  logits = split.logits(images).numpy()
  params = {n: tf.constant(v) for n, v in model.initial_values(3).items()}
  with tf.device("/cpu:0"):
    both = tf.concat([model.inference(params, images),
                      model.inference(params, tf.image.flip_left_right(images))], axis=1)
    expected = tf.matmul(both, split.head).numpy()
  np.testing.assert_array_equal(logits, expected)


_TF2_INT32_ON_GPU = """
import sys
from cifar10 import config
from harness.command_line import cli
from strategies import devices
import tensorflow as tf
devices.setup(config.DeviceConfig(soft_placement=sys.argv[1] == "on"))
try:
  with tf.device("/gpu:0"):
    counter = tf.Variable(0, dtype=tf.int32)
    counter.assign_add(1)
  print(counter.device, int(counter.numpy()))
except tf.errors.InvalidArgumentError as e:
  print(cli.placement(str(e)))
"""


@pytest.mark.slow
@pytest.mark.parametrize("soft", ["on", "off"])
def test_tf2_soft_placement_moves_an_int32_variable_off_an_absent_gpu(soft):
  out = forked.run([sys.executable, "-c", _TF2_INT32_ON_GPU, soft], capture_output=True,
                   text=True, timeout=120, env=helpers.env(), cwd=helpers.REPO,
                   check=True).stdout.strip()
  if soft == "on":
    assert out == "/job:localhost/replica:0/task:0/device:CPU:0 1"
  else:
    assert out == ("an op cannot run on /job:localhost/replica:0/task:0/device:GPU:0: no such "
                   "device here, or no kernel for it there, and --allow_soft_placement is off; "
                   "turn it on to let TensorFlow fall back to another device (the CPU)")


@pytest.mark.parametrize("soft", [True, False])
def test_v1_soft_placement_moves_an_int32_variable_off_an_absent_gpu(soft):
  _, proto = v1_devices.setup(config.DeviceConfig(soft_placement=soft))
  v1 = tf.compat.v1
  with tf.Graph().as_default():
    with v1.device("/gpu:0"):
      counter = v1.get_variable("counter", [], tf.int32, initializer=v1.zeros_initializer())
      step = counter.assign_add(1)
    with v1.Session(config=proto) as sess:
      if soft:
        sess.run(v1.global_variables_initializer())
        assert sess.run(step) == 1
        assert sess.run(counter.read_value()) == 1
      else:
        with pytest.raises(tf.errors.InvalidArgumentError) as raised:
          sess.run(v1.global_variables_initializer())
        assert str(cli.placement(str(raised.value))).startswith(
            "op counter/")
