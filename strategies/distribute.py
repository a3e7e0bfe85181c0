"""Maps `--strategy` to a tf.distribute strategy over the devices cifar10.devices set up."""

import tensorflow as tf

from cifar10.errors import UsageError

STRATEGIES = ("mirrored", "one_device")


def get_strategy(name, devices):
  """A strategy with one replica per device name in `devices`.

  On GPUs MirroredStrategy keeps its default, NCCL all-reduce. On logical CPU devices (where
  NCCL has no kernel) it sums on /cpu:0 and broadcasts (ReductionToOneDevice): the sum then
  runs in replica order every time, and unlike the collective all-reduce TF would pick, two
  strategies of different sizes can live in one process (the collective group keys clash).
  """
  if name == "mirrored":
    if all(d.lower().startswith("/cpu") for d in devices):
      return tf.distribute.MirroredStrategy(
          devices, cross_device_ops=tf.distribute.ReductionToOneDevice(devices[0]))
    return tf.distribute.MirroredStrategy(devices)
  if name == "one_device":
    if len(devices) != 1:
      raise UsageError(f"--strategy=one_device runs one replica, but --num_gpus={len(devices)}; "
                       "use --strategy=mirrored for more")
    return tf.distribute.OneDeviceStrategy(devices[0])
  raise UsageError(f"unknown --strategy {name!r}; choose from {', '.join(STRATEGIES)}")
