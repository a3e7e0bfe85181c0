"""Run settings reject bad values with one-line messages; device planning without GPUs."""

import pytest

from cifar10 import config
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
    config.EvalConfig(checkpoint_dir="c", eval_dir="e", eval_data="validation")
  with pytest.raises(UsageError, match="--num_examples must be a positive integer"):
    config.EvalConfig(checkpoint_dir="c", eval_dir="e", num_examples=0)


def test_without_gpus_replicas_go_to_logical_cpus():
  assert devices.plan(config.DeviceConfig(num_gpus=3), 0) == (
      "CPU", ["/cpu:0", "/cpu:1", "/cpu:2"])
  cpu_only = config.DeviceConfig(num_gpus=2, cpu_only=True)
  assert devices.visible_gpu_indices(cpu_only, 4) == []


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
