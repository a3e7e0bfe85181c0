"""--precision=fp32|bf16|fp16 (and --loss_scale): the two trainers stay bit-identical.

The compute dtype changes the forward and backward pass only: weights, moving averages and
the update stay float32. fp16 scales a tower's loss (a replica's by N times as much) and
unscales exactly, so the towers and MirroredStrategy agree to the bit at N = 1, 2, 4. Before,
--use_fp16 ran without a loss scale and the two differed by up to 1e-3 at N > 1.
"""

import numpy as np
import pytest

from cifar10 import config
from cifar10.errors import UsageError
from equivalence import runs
from tests import helpers

STEPS, BATCH, DECAY = 3, 4, 2  # two learning-rate decays within the run


def _equal(precision, n, **overrides):
  tf2 = runs.tf2_train(n, 5, STEPS, BATCH, DECAY, precision=precision, **overrides)
  v1 = runs.v1_train(n, 5, STEPS, BATCH, DECAY, precision=precision, **overrides)
  assert tf2.variables.keys() == v1.variables.keys()
  for name, value in tf2.variables.items():
    assert value.dtype == np.float32, name
    np.testing.assert_array_equal(value, v1.variables[name], err_msg=name)
  assert tf2.losses == v1.losses and tf2.learning_rates == v1.learning_rates
  return tf2


@pytest.mark.parametrize("precision,n", [
    ("fp16", 2),
    pytest.param("fp16", 4, marks=pytest.mark.slow),
    ("bf16", 2),
    pytest.param("bf16", 4, marks=pytest.mark.slow),
])
def test_both_trainers_write_the_same_bits_in_each_precision(precision, n):
  run = _equal(precision, n)
  # Not the float32 run: the compute dtype did change the numbers.
  fp32 = runs.tf2_train(n, 5, STEPS, BATCH, DECAY)
  assert any(not np.array_equal(run.variables[k], fp32.variables[k]) for k in run.variables)


@pytest.mark.slow
def test_an_explicit_power_of_two_scale_keeps_them_equal():
  _equal("fp16", 2, loss_scale=1024.0)


@pytest.mark.parametrize("kwargs,message", [
    (dict(precision="fp8"), "--precision must be one of fp32, bf16, fp16, got 'fp8'"),
    (dict(precision="bf16", loss_scale=1024.0), "--loss_scale applies to --precision=fp16"),
    (dict(precision="fp16", loss_scale=1000.0), "--loss_scale must be a power of two"),
    (dict(precision="fp16", loss_scale=0.0), "--loss_scale must be a power of two"),
    (dict(precision="fp16", loss_scale=float("inf")), "--loss_scale must be a power of two"),
])
def test_precision_settings_are_checked(kwargs, message):
  with pytest.raises(UsageError, match=message):
    config.TrainConfig(train_dir="x", **kwargs)


def test_the_scale_is_a_towers_and_fp16_only():
  assert config.TrainConfig(train_dir="x").scale is None
  assert config.TrainConfig(train_dir="x", precision="bf16").scale is None
  assert config.TrainConfig(train_dir="x", precision="fp16").scale == 2.0 ** 15
  assert config.TrainConfig(train_dir="x", precision="fp16", loss_scale=8.0).scale == 8.0


@pytest.mark.parametrize("flags,expected", [
    (("--use_fp16",), "fp16"),
    (("--use_fp16", "--precision=fp16"), "fp16"),
    (("--precision=bf16",), "bf16"),
])
def test_use_fp16_is_the_originals_name_for_fp16(flags, expected):
  from absl import flags as absl_flags  # pylint: disable=g-import-not-at-top
  from harness import options  # pylint: disable=g-import-not-at-top
  fv = absl_flags.FlagValues()
  options.define_train_flags(fv)
  fv(["binary", "--train_dir=x", *flags])
  assert options.train_config(fv).precision == expected


@pytest.mark.parametrize("trainer", ["strategies.train", "compat_v1.train"])
def test_use_fp16_with_another_precision_is_one_line(trainer, tmp_path):
  result = helpers.call(trainer, "--use_fp16", "--precision=bf16", "--dataset=synthetic",
                        f"--train_dir={tmp_path}")
  assert result.returncode == 2
  assert helpers.error_line(result) == ("error: --use_fp16 means --precision=fp16, but "
                                        "--precision=bf16; give one of them")
