"""--jit_compile: XLA compiles each replica's forward and backward pass; close, not equal."""

import numpy as np
import pytest

from cifar10 import checkpoints
from tests import helpers

FLAGS = ("--dataset=synthetic", "--batch_size=4", "--max_steps=3")


@pytest.mark.slow
def test_xla_steps_follow_the_plain_steps_closely(tmp_path):
  from strategies import loop  # pylint: disable=g-import-not-at-top
  for name, extra in (("plain", ()), ("xla", ("--jit_compile",))):
    result = helpers.call("strategies.train", *FLAGS, *extra, f"--train_dir={tmp_path / name}")
    assert result.returncode == 0, result.stderr[-2000:]
  plain, xla = (checkpoints.read(str(tmp_path / n)) for n in ("plain", "xla"))
  assert plain.global_step == xla.global_step == 3
  for name in plain.weights:
    np.testing.assert_allclose(xla.weights[name], plain.weights[name], rtol=1e-4, atol=1e-6,
                               err_msg=name)
  # The per-replica pass really is an XLA function (and without the flag, no function).
  from cifar10 import config  # pylint: disable=g-import-not-at-top
  from strategies import devices  # pylint: disable=g-import-not-at-top
  run = config.TrainConfig(train_dir=str(tmp_path / "t"), dataset="synthetic", batch_size=4)
  strategy = devices.get_strategy("mirrored", ["/cpu:0", "/cpu:1"])
  assert loop.build_trainer(run, strategy, jit_compile=True).forward_backward._jit_compile  # pylint: disable=protected-access
  assert not hasattr(loop.build_trainer(run, strategy).forward_backward, "_jit_compile")


@pytest.mark.parametrize("flag", ["--jit_compile", "--steps_per_loop=2", "--profile_steps=0,1"])
def test_parameter_server_refuses_the_single_loop_flags(flag, tmp_path):
  result = helpers.call("strategies.train", "--strategy=parameter_server", flag,
                        "--dataset=synthetic", f"--train_dir={tmp_path}")
  assert result.returncode == 2
  assert "applies to mirrored, one_device and multi_worker_mirrored" in helpers.error_line(result)
