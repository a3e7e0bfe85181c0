"""The bit contract's runtime settings are applied wherever the contract is claimed.

On GPUs the contract needs op determinism and TensorFloat-32 off (harness.determinism); on
CPUs TensorFlow's flags are the same ones, so these tests watch them here: each binary that
claims the contract sets them, `--nodeterministic` gives TensorFloat-32 back, and both
trainers update the weights and their moving averages on the same device type.
"""

import pytest
import tensorflow as tf
from tensorflow.python.framework import config as tf_config  # pylint: disable=g-direct-tensorflow-import

from cifar10 import config
from harness import determinism
from tests import helpers


@pytest.fixture(name="contract_off")
def fixture_contract_off():
  """The process without the contract's settings (TensorFlow's defaults) for the test;
  the suite's own settings (tests/conftest.py) back afterwards."""
  tf_config.disable_op_determinism()
  tf.config.experimental.enable_tensor_float_32_execution(True)
  assert not determinism.applied()
  yield
  determinism.apply()


@pytest.mark.parametrize("trainer", ["strategies", "compat_v1"])
def test_both_trainers_device_setups_apply_the_contract_and_nodeterministic_lifts_it(
    trainer, contract_off):  # pylint: disable=unused-argument
  import importlib  # pylint: disable=g-import-not-at-top
  setup = importlib.import_module(f"{trainer}.devices").setup
  setup(config.DeviceConfig(num_gpus=2, deterministic=False))
  assert tf.config.experimental.tensor_float_32_execution_enabled()
  assert not tf_config.is_op_determinism_enabled()
  setup(config.DeviceConfig(num_gpus=2))  # the default: --deterministic
  assert determinism.applied()


@pytest.mark.parametrize("evaluator", ["strategies.eval", "compat_v1.eval"])
def test_the_evaluators_apply_the_contract(evaluator, tmp_path, contract_off):  # pylint: disable=unused-argument
  helpers.call(evaluator, "--dataset=synthetic", f"--checkpoint_dir={tmp_path}", "--run_once")
  assert determinism.applied()


def test_the_flag_reaches_the_device_config():
  from absl import flags  # pylint: disable=g-import-not-at-top
  from harness import options  # pylint: disable=g-import-not-at-top
  fv = flags.FlagValues()
  options.define_device_flags(fv)
  fv(["binary"])
  assert options.device_config(fv).deterministic is True
  fv(["binary", "--nodeterministic"])
  assert options.device_config(fv).deterministic is False
