"""The bit contract's runtime settings are applied wherever the contract is claimed.

On GPUs the contract needs op determinism and TensorFloat-32 off (harness.devices.determinism). No
GPU here: the GPU listing is faked at harness.devices.determinism's boundary, and TensorFlow's own
process-wide flags are watched, as a GPU run would get them. Each binary that claims the
contract sets them, `--nodeterministic` gives TensorFloat-32 back, and on CPUs nothing is set.
"""

import pytest
import tensorflow as tf
from tensorflow.python.framework import config as tf_config  # pylint: disable=g-direct-tensorflow-import

from cifar10 import config
from harness.devices import determinism
from tests import helpers


def _off():
  tf_config.disable_op_determinism()
  tf.config.experimental.enable_tensor_float_32_execution(True)


@pytest.fixture(name="gpu_box")
def fixture_gpu_box(monkeypatch):
  """This process as if it had GPUs, for harness.devices.determinism only; TensorFlow's defaults
  before and after (op determinism would refuse the unseeded ops of later tests)."""
  _off()
  monkeypatch.setattr(determinism, "_gpus", lambda: ["/physical_device:GPU:0"])
  yield
  _off()


@pytest.mark.parametrize("trainer", ["strategies", "compat_v1"])
def test_both_trainers_device_setups_apply_the_contract_and_nodeterministic_lifts_it(
    trainer, gpu_box):  # pylint: disable=unused-argument
  import importlib  # pylint: disable=g-import-not-at-top
  setup = importlib.import_module(f"{trainer}.devices").setup
  setup(config.DeviceConfig(num_gpus=2, deterministic=False))
  assert tf.config.experimental.tensor_float_32_execution_enabled()
  assert not tf_config.is_op_determinism_enabled()
  setup(config.DeviceConfig(num_gpus=2))  # the default: --deterministic
  assert determinism.applied()


@pytest.mark.parametrize("evaluator", ["strategies.eval", "compat_v1.eval"])
def test_the_evaluators_apply_the_contract(evaluator, tmp_path, gpu_box):  # pylint: disable=unused-argument
  helpers.call(evaluator, "--dataset=synthetic", f"--checkpoint_dir={tmp_path}", "--run_once")
  assert determinism.applied()


def test_without_gpus_nothing_is_set():
  _off()
  determinism.apply()
  assert not tf_config.is_op_determinism_enabled()
  assert tf.config.experimental.tensor_float_32_execution_enabled()


def test_the_flag_reaches_the_device_config():
  from absl import flags  # pylint: disable=g-import-not-at-top
  from harness.command_line import options  # pylint: disable=g-import-not-at-top
  fv = flags.FlagValues()
  options.define_device_flags(fv)
  fv(["binary"])
  assert options.device_config(fv).deterministic is True
  fv(["binary", "--nodeterministic"])
  assert options.device_config(fv).deterministic is False


def test_jit_compile_under_the_contract_on_gpus_is_one_line(tmp_path, gpu_box):  # pylint: disable=unused-argument
  # Before: XLA's UnimplementedError ("GPU MaxPool gradient ops do not yet have a
  # deterministic XLA implementation") and its traceback at the first step.
  helpers.check_one_line(
      helpers.call("strategies.train", "--dataset=synthetic", "--jit_compile",
                   "--max_steps=1", f"--train_dir={tmp_path}"),
      "--jit_compile under --deterministic: XLA has no deterministic max-pool gradient on "
      "GPUs; add --nodeterministic")
