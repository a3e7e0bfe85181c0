"""--strategy=central_storage: the original's layout in TF2 (one copy of each variable on the
CPU, updated once per step, read by every replica), bit-identical to the towers."""

import pytest
import tensorflow as tf

from cifar10 import devices as device_plan
from equivalence import runs
from strategies import devices
from tests import helpers

FLAGS = ("--dataset=synthetic", "--batch_size=4", "--max_steps=3", "--seed=5",
         "--decay_steps=2", "--save_summaries_steps=1")


def test_its_variables_are_one_copy_on_the_cpu_and_its_replicas_the_devices():
  strategy = devices.get_strategy("central_storage", ["/cpu:0", "/cpu:1"])
  assert strategy.num_replicas_in_sync == 2
  assert [d.lower() for d in strategy.extended.worker_devices] == [
      "/job:localhost/replica:0/task:0/device:cpu:0",
      "/job:localhost/replica:0/task:0/device:cpu:1"]
  with strategy.scope():
    weight = tf.Variable(tf.ones([2]))
  # Not a MirroredVariable: one variable, where the towers' _variable_on_cpu put it.
  assert type(weight).__name__ != "MirroredVariable"
  assert weight.device.endswith("device:CPU:0")
  # With GPUs, where the towers keep theirs: the first GPU (a GPU may fuse the update's
  # multiply-add where the CPU rounds twice; docs/determinism.md).
  assert device_plan.parameter_device(["/gpu:0", "/gpu:1"]) == "/gpu:0"
  assert device_plan.parameter_device(["/cpu:0", "/cpu:1"]) == "/cpu:0"


def test_on_gpus_the_strategy_keeps_the_variables_on_the_first_gpu(monkeypatch):
  # No GPU here: TensorFlow's constructor is faked at the boundary, and the arguments a real
  # 2-GPU run would hand it are checked (TensorFlow's own default for one GPU is that GPU, for
  # several the CPU, where the towers do not keep theirs).
  made = {}
  monkeypatch.setattr(tf.distribute.experimental, "CentralStorageStrategy",
                      lambda replicas, parameter_device: made.update(
                          replicas=replicas, parameter_device=parameter_device) or "strategy")
  assert devices.get_strategy("central_storage", ["/gpu:0", "/gpu:1"]) == "strategy"
  assert made == {"replicas": ["/gpu:0", "/gpu:1"], "parameter_device": "/gpu:0"}


@pytest.mark.parametrize("n", [3])
@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_the_binary_equals_the_towers_and_mirrored_to_the_bit(n, tmp_path):
  # Three replicas: the mean of the gradients divides by 3, where a reciprocal would round.
  common = (*FLAGS, f"--num_gpus={n}")
  for trainer, extra, folder in (
      ("strategies.train", ("--strategy=central_storage",), "central"),
      ("strategies.train", ("--strategy=central_storage", "--steps_per_loop=2"), "central_k2"),
      ("strategies.train", (), "mirrored"), ("compat_v1.train", (), "v1")):
    result = helpers.call(trainer, *common, *extra, f"--train_dir={tmp_path / folder}")
    assert result.returncode == 0, result.stderr[-2000:]
  v1 = runs.summaries(tmp_path / "v1")
  for folder in ("central", "central_k2", "mirrored"):
    compared = helpers.call("equivalence.checkpoints", str(tmp_path / "v1"),
                            str(tmp_path / folder))
    assert compared.returncode == 0 and compared.stdout.endswith("\nEQUIVALENT\n"), folder
  # The summaries too: losses, precision and learning rate of every step, the same floats.
  central = runs.summaries(tmp_path / "central")
  for tag in ("total_loss", "Precision @ 1", "learning_rate"):
    assert central[tag] == v1[tag], tag
