"""The EMA shadows of the TF2 trainer: one copy under MirroredStrategy, the same bits as TF's
ExponentialMovingAverage on mirrored shadows (strategies/shadows.py)."""

import numpy as np
import pytest
import tensorflow as tf

from cifar10 import data_sources as sources
from cifar10 import input_pipeline as ip
from cifar10 import model
from strategies import devices as tf2_devices
from strategies import shadows
from cifar10.step_settings import StepSettings
from strategies.step import Trainer

BATCH = 12  # 3 replicas x 4


def _devices(n):
  return [f"/cpu:{i}" for i in range(n)]


def _trained(n, ema_reads, steps=3, strategy="mirrored"):
  """(trainer, {name: EMA shadow}) after `steps` steps on replicas /cpu:0..n-1."""
  trainer = Trainer(tf2_devices.get_strategy(strategy, _devices(n)),
                    StepSettings(seed=7, decay_steps=2, ema_reads=ema_reads))
  stream = ip.train_dataset(sources.synthetic_source(7), seed=7, global_batch_size=BATCH)
  iterator = iter(trainer.strategy.experimental_distribute_dataset(stream))
  for _ in range(steps):
    trainer.train_step(iterator, record=False)
  return trainer, {n: v.numpy() for n, v in trainer.averages.items()}


def test_under_mirrored_each_shadow_is_one_variable_beside_the_first_replica():
  trainer, _ = _trained(2, "updated", steps=1)
  for name, shadow in trainer.averages.items():
    assert not isinstance(shadow, tf.distribute.DistributedValues), name
    assert shadow.device.endswith("device:CPU:0"), (name, shadow.device)
  # Nothing else has one copy per strategy: the weights stay mirrored.
  assert isinstance(trainer.params["conv1/weights"], tf.distribute.DistributedValues)
  assert shadows.one_copy(trainer.strategy)
  assert not shadows.one_copy(tf2_devices.get_strategy("central_storage", _devices(2)))
  assert not shadows.one_copy(tf2_devices.get_strategy("one_device", _devices(1)))


@pytest.mark.parametrize("ema_reads", ["updated", "previous"])
@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_one_copy_is_tfs_mirrored_ema_to_the_bit(ema_reads, monkeypatch):
  # Three replicas, two decays, both orders of the EMA against the update: the one copy moves
  # exactly as TF's ExponentialMovingAverage moves each replica's mirrored shadow.
  _, one = _trained(3, ema_reads)
  monkeypatch.setattr(shadows, "one_copy", lambda strategy: False)
  reference, mirrored = _trained(3, ema_reads)
  assert isinstance(reference.averages["conv1/weights"], tf.distribute.DistributedValues)
  initial = model.initial_values(7)
  for name in model.VARIABLE_NAMES:
    np.testing.assert_array_equal(one[name], mirrored[name], err_msg=name)
    assert not np.array_equal(one[name], initial[name]), name  # they moved


def test_the_one_copy_lives_on_the_first_replicas_device_whatever_it_is():
  # On GPUs the first replica's device is /gpu:0 (beside that GPU's weights, which the update
  # reads); driven here with replicas that do not start at /cpu:0, so the copy follows the
  # strategy's first device rather than the host's.
  strategy = tf2_devices.get_strategy("mirrored", ["/cpu:2", "/cpu:3"])
  trainer = Trainer(strategy, StepSettings(seed=7, decay_steps=2))
  for name, shadow in trainer.averages.items():
    assert shadow.device.endswith("device:CPU:2"), (name, shadow.device)
