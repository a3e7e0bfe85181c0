"""--precision=fp32|bf16|fp16 (and --loss_scale): the two trainers stay bit-identical.

The compute dtype changes the forward and backward pass only: weights, moving averages and
the update stay float32. fp16 scales each tower's and replica's loss alike and unscales
exactly, so the towers and MirroredStrategy agree to the bit at N = 1 to 4. Before,
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


# fp16 at N = 3 and 4: where grappler regrouped a loss-scale division `/` with the sum over
# replicas (cifar10.precision.unscaled); N = 1 has no sum.
@pytest.mark.parametrize("precision,n,overrides", [
    pytest.param("fp16", 2, {}, marks=pytest.mark.float16),
    pytest.param("fp16", 3, {}, marks=[pytest.mark.slow, pytest.mark.float16]),
    pytest.param("fp16", 4, {"loss_scale": 1024.0}, marks=[pytest.mark.slow,
                                                          pytest.mark.float16]),
    pytest.param("bf16", 2, {}, marks=[pytest.mark.slow, pytest.mark.bfloat16]),
])
@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_both_trainers_write_the_same_bits_in_each_precision(precision, n, overrides):
  run = _equal(precision, n, **overrides)
  if not overrides:  # not the float32 run: the compute dtype did change the numbers
    fp32 = runs.tf2_train(n, 5, STEPS, BATCH, DECAY)
    assert any(not np.array_equal(run.variables[k], fp32.variables[k]) for k in run.variables)


@pytest.mark.parametrize("kwargs,message", [
    (dict(precision="fp8"), "--precision must be one of fp32, bf16, fp16, got 'fp8'"),
    (dict(precision="bf16", loss_scale=1024.0), "--loss_scale applies to --precision=fp16"),
    (dict(precision="fp16", loss_scale=1000.0), "--loss_scale must be 'dynamic' or a power"),
    (dict(precision="fp16", loss_scale=0.0), "--loss_scale must be 'dynamic' or a power"),
    (dict(precision="fp16", loss_scale=float("inf")), "--loss_scale must be 'dynamic' or a"),
    (dict(precision="fp16", loss_scale="adaptive"), "--loss_scale must be 'dynamic' or a"),
    # Powers of two float32 cannot hold: before, accepted, and a failure at step 0 that
    # advised lowering the learning rate.
    (dict(precision="fp16", loss_scale=2.0 ** 200), "is not a float32 scale: give a power of "
                                                    "two from 2\\*\\*-126 to 2\\*\\*100"),
    (dict(precision="fp16", loss_scale=2.0 ** -200), "is not a float32 scale"),
])
def test_precision_settings_are_checked(kwargs, message):
  with pytest.raises(UsageError, match=message):
    config.TrainConfig(train_dir="x", **kwargs)


def test_the_scale_is_a_towers_and_fp16_only():
  assert config.TrainConfig(train_dir="x").scale is None
  assert config.TrainConfig(train_dir="x", precision="bf16").scale is None
  assert config.TrainConfig(train_dir="x", precision="fp16").scale == 2.0 ** 15
  assert config.TrainConfig(train_dir="x", precision="fp16", loss_scale=8.0).scale == 8.0
  assert config.TrainConfig(train_dir="x", precision="fp16", loss_scale="1024").scale == 1024.0
  assert config.TrainConfig(train_dir="x", precision="fp16", loss_scale="dynamic"
                            ).scale == "dynamic"


@pytest.mark.parametrize("flags,expected", [
    (("--use_fp16",), "fp16"),
    (("--use_fp16", "--precision=fp16"), "fp16"),
    (("--precision=bf16",), "bf16"),
])
def test_use_fp16_is_the_originals_name_for_fp16(flags, expected):
  from absl import flags as absl_flags  # pylint: disable=g-import-not-at-top
  from harness.command_line import options  # pylint: disable=g-import-not-at-top
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


def _scale_state(train_dir):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(train_dir))
  keys = reader.get_variable_to_shape_map()
  pick = lambda name: next(k for k in (name, f"{name}/.ATTRIBUTES/VARIABLE_VALUE") if k in keys)
  return (float(reader.get_tensor(pick("loss_scale"))),
          int(reader.get_tensor(pick("loss_scale_good_steps"))))


@pytest.mark.slow
@pytest.mark.float16
@pytest.mark.parametrize("n", [2])
def test_dynamic_scaling_skips_and_halves_alike_in_both_trainers(n, tmp_path, monkeypatch):
  from cifar10 import checkpoints  # pylint: disable=g-import-not-at-top
  from cifar10 import model  # pylint: disable=g-import-not-at-top
  from cifar10 import precision  # pylint: disable=g-import-not-at-top
  # A scale that overflows float16 at once (the loss gradient 2^20 / 4 > 65504): the first
  # steps are skipped, each halving it, until it fits.
  monkeypatch.setattr(precision, "DYNAMIC_INITIAL_SCALE", 2.0 ** 20)
  devices = [f"/cpu:{i}" for i in range(n)]
  states = {}
  # One step on one side (what step 0 does is the same on both: the six compare them), six
  # on both.
  for side, steps in (("tf2", 1), ("tf2", 6), ("v1", 6)):
    run = config.TrainConfig(train_dir=str(tmp_path / f"{side}{steps}"), dataset="synthetic",
                             batch_size=4, max_steps=steps, seed=5, precision="fp16",
                             loss_scale="dynamic")
    if side == "tf2":
      helpers.train_tf2(run, devices=devices, strategy="mirrored")
    else:
      helpers.train_v1(run, num_gpus=n)
    states[side, steps] = (checkpoints.read(run.train_dir), _scale_state(run.train_dir))
  # Step 0 overflowed: no weight moved, the scale halved.
  first, (scale, good) = states["tf2", 1]
  for name, value in model.initial_values(5).items():
    np.testing.assert_array_equal(first.weights[name], value, err_msg=name)
  assert (scale, good) == (2.0 ** 19, 0) and first.global_step == 1
  # Six steps: the same weights, averages and scale state in both, some steps applied.
  (a, a_scale), (b, b_scale) = states["tf2", 6], states["v1", 6]
  assert a_scale == b_scale and a_scale[0] < 2.0 ** 19
  for name in a.weights:
    np.testing.assert_array_equal(a.weights[name], b.weights[name], err_msg=name)
    np.testing.assert_array_equal(a.averages[name], b.averages[name], err_msg=name)
  assert any(not np.array_equal(a.weights[k], first.weights[k]) for k in a.weights)


def test_the_dynamic_scale_grows_after_enough_good_steps():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from cifar10 import precision  # pylint: disable=g-import-not-at-top
  good = tf.constant(precision.DYNAMIC_GROWTH_STEPS - 1, tf.int64)
  scale, steps = precision.next_scale(tf.constant(8.0), good, tf.constant(True))
  assert (float(scale), int(steps)) == (16.0, 0)
  scale, steps = precision.next_scale(tf.constant(8.0), good, tf.constant(False))
  assert (float(scale), int(steps)) == (4.0, 0)
  scale, _ = precision.next_scale(tf.constant(1.0), good, tf.constant(False))
  assert float(scale) == 1.0


@pytest.mark.parametrize("args,message", [
    (("strategies.train", "--strategy=parameter_server"), "--loss_scale=dynamic applies to"),
    (("compat_v1.train", "--job_name=worker", "--ps_hosts=127.0.0.1:2",
      "--worker_hosts=127.0.0.1:3"), "--loss_scale=dynamic applies to single-machine runs"),
])
def test_dynamic_scaling_in_asynchronous_jobs_is_one_line(args, message, tmp_path):
  result = helpers.call(*args, "--precision=fp16", "--loss_scale=dynamic",
                        "--dataset=synthetic", f"--train_dir={tmp_path}")
  assert result.returncode == 2 and message in helpers.error_line(result)
