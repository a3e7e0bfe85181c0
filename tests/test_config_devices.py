"""Run settings reject bad values with one-line messages; device planning without GPUs."""

import pytest

from cifar10 import config

from cifar10 import eval_config
from cifar10 import devices
from cifar10.errors import UsageError


@pytest.mark.parametrize("kwargs,message", [
    (dict(max_steps=0), "--max_steps must be a positive integer, got 0"),
    (dict(batch_size=-4), "--batch_size must be a positive integer, got -4"),
    (dict(dataset="imagenet"), "unknown --dataset 'imagenet'"),
    (dict(dataset="cifar10_bin"), "--dataset=cifar10_bin needs --data_dir"),
    (dict(learning_rate=0.0), "--learning_rate must be positive"),
    (dict(train_dir=""), "--train_dir must name a directory"),
])
def test_train_config_errors(kwargs, message):
  with pytest.raises(UsageError, match=message):
    config.TrainConfig(**{"train_dir": "/tmp/x", **kwargs})


@pytest.mark.parametrize("kwargs,message", [
    (dict(num_gpus=0), "--num_gpus must be a positive integer, got 0"),
    (dict(memory_fraction=1.5), r"must be in \(0, 1\], got 1.5"),
    (dict(memory_fraction=0.0), r"must be in \(0, 1\], got 0.0"),
    (dict(memory_limit_mb=-1), "--gpu_memory_limit_mb must be positive"),
    (dict(memory_limit_mb=10, memory_fraction=0.5), "not both"),
    (dict(visible_gpus="0,a"), "--visible_gpus must be distinct GPU indices"),
    (dict(visible_gpus="1,1"), "--visible_gpus must be distinct GPU indices"),
    (dict(intra_op_threads=-1), "--intra_op_threads must be >= 0"),
])
def test_device_config_errors(kwargs, message):
  with pytest.raises(UsageError, match=message):
    config.DeviceConfig(**kwargs)


def test_eval_config_errors():
  with pytest.raises(UsageError, match="--eval_data must be 'test' or 'train_eval'"):
    eval_config.EvalConfig(checkpoint_dir="c", eval_dir="e", eval_data="validation")
  with pytest.raises(UsageError, match="--num_examples must be a positive integer"):
    eval_config.EvalConfig(checkpoint_dir="c", eval_dir="e", num_examples=0)


def test_without_gpus_replicas_go_to_logical_cpus():
  assert devices.plan(config.DeviceConfig(num_gpus=3), 0) == (
      "CPU", ["/cpu:0", "/cpu:1", "/cpu:2"])
  cpu_only = config.DeviceConfig(num_gpus=2, cpu_only=True)
  assert devices.visible_gpu_indices(cpu_only, 4) == []


def test_logical_cpu_replicas_are_bounded():
  assert len(devices.plan(config.DeviceConfig(num_gpus=devices.MAX_CPU_REPLICAS), 0)[1]) == 64
  with pytest.raises(UsageError, match="--num_gpus=65 but no GPU is visible"):
    devices.plan(config.DeviceConfig(num_gpus=65), 0)
  # With GPUs the bound is the GPUs there are.
  with pytest.raises(UsageError, match="--num_gpus=65 but only 8 GPU"):
    devices.plan(config.DeviceConfig(num_gpus=65), 8)


def test_gpus_visible_gpus_and_memory_limits():
  assert devices.plan(config.DeviceConfig(num_gpus=2), 2) == ("GPU", ["/gpu:0", "/gpu:1"])
  assert devices.visible_gpu_indices(config.DeviceConfig(visible_gpus="2,0"), 4) == [2, 0]
  assert devices.visible_gpu_indices(config.DeviceConfig(), 3) == [0, 1, 2]
  assert devices.memory_limit_mb(config.DeviceConfig(memory_limit_mb=4096), None) == 4096
  assert devices.memory_limit_mb(config.DeviceConfig(memory_fraction=0.25), 81559) == 20389
  assert devices.memory_limit_mb(config.DeviceConfig(), 81559) is None


def test_more_gpus_than_visible_is_an_error():
  with pytest.raises(UsageError, match="--num_gpus=4 but only 2 GPU"):
    devices.plan(config.DeviceConfig(num_gpus=4), 2)
  with pytest.raises(UsageError, match="--visible_gpus=0,3 but only 2 GPU"):
    devices.visible_gpu_indices(config.DeviceConfig(visible_gpus="0,3"), 2)
  with pytest.raises(UsageError, match="use --gpu_memory_limit_mb instead"):
    devices.memory_limit_mb(config.DeviceConfig(memory_fraction=0.5), None)


def test_each_run_value_has_one_home():
  run = config.TrainConfig(train_dir="/tmp/x", batch_size=32, learning_rate=0.05)
  # The learning rate and batch of the run reach the original's hyper-parameters here only.
  assert run.hparams.initial_learning_rate == 0.05 and run.hparams.batch_size == 32
  assert run.hparams.moving_average_decay == 0.9999  # the rest is the original's
  assert run.global_batch_size(4) == 128
  # The original's decay count: per-replica batches, unless asked for global ones.
  assert run.steps_between_decays(4) == int(50000 / 32 * 350) == 546875
  assert config.TrainConfig(train_dir="/tmp/x", batch_size=32, decay_steps_per_global_batch=True
                            ).steps_between_decays(4) == int(50000 / 128 * 350)
  assert config.TrainConfig(train_dir="/tmp/x", decay_steps=7).steps_between_decays(4) == 7


def test_every_flag_default_is_the_config_default():
  from absl import flags  # pylint: disable=g-import-not-at-top
  from harness.command_line import options  # pylint: disable=g-import-not-at-top
  fv = flags.FlagValues()
  options.define_train_flags(fv)
  fv(["binary", "--train_dir=/tmp/x"])
  assert options.train_config(fv) == config.TrainConfig(train_dir="/tmp/x")
  assert options.device_config(fv) == config.DeviceConfig()
  fv = flags.FlagValues()
  options.define_eval_flags(fv)
  fv(["binary", "--checkpoint_dir=c", "--eval_dir=e"])
  assert options.eval_config(fv) == eval_config.EvalConfig(checkpoint_dir="c", eval_dir="e")


def test_tf2_device_setup_in_a_running_runtime_takes_devices_it_already_has():
  # The tests' runtime has 4 logical CPU devices (conftest): setting up 1, 2 or 4 replicas
  # changes nothing and names them; more than it has cannot be set up any more.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from strategies import devices as tf2_devices  # pylint: disable=g-import-not-at-top
  assert len(tf.config.list_logical_devices("CPU")) == 4  # the runtime is started now
  assert tf2_devices.setup(config.DeviceConfig()) == ["/cpu:0"]
  assert tf2_devices.setup(config.DeviceConfig(num_gpus=4)) == [f"/cpu:{i}" for i in range(4)]
  with pytest.raises(UsageError, match="devices must be configured before TensorFlow starts"):
    tf2_devices.setup(config.DeviceConfig(num_gpus=5))
