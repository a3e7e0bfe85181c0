"""Maps `--strategy` to a tf.distribute strategy over the devices cifar10.devices set up."""

import tensorflow as tf

from cifar10.errors import UsageError

STRATEGIES = ("mirrored", "one_device")


def get_strategy(name, devices):
  """A strategy with one replica per device name in `devices`.

  MirroredStrategy keeps its default cross-device ops: NCCL all-reduce on GPUs, and on logical
  CPU devices (where NCCL has no kernel) the collective all-reduce TF picks there.
  """
  if name == "mirrored":
    return tf.distribute.MirroredStrategy(devices)
  if name == "one_device":
    if len(devices) != 1:
      raise UsageError(f"--strategy=one_device runs one replica, but --num_gpus={len(devices)}; "
                       "use --strategy=mirrored for more")
    return tf.distribute.OneDeviceStrategy(devices[0])
  raise UsageError(f"unknown --strategy {name!r}; choose from {', '.join(STRATEGIES)}")
