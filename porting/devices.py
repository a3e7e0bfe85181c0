"""The N devices both sides run on: the first N GPUs, or N logical CPU devices without GPUs.

Logical CPU devices must be made before TensorFlow starts its runtime: `replica_devices`
makes them when it still can and otherwise says how (a test suite's conftest, or a command
line's first lines, sets them up front).
"""

import tensorflow as tf

from porting.errors import PortError

v1 = tf.compat.v1


def replica_devices(n):
  """['/gpu:0', ...] or ['/cpu:0', ...]: n devices, one per tower and replica."""
  if n < 1:
    raise PortError(f"replicas must be a positive integer, got {n}")
  gpus = tf.config.list_physical_devices("GPU")
  if gpus:
    if len(gpus) < n:
      raise PortError(f"{n} replicas but only {len(gpus)} GPU(s) are visible")
    return [f"/gpu:{i}" for i in range(n)]
  cpu = tf.config.list_physical_devices("CPU")[0]
  configured = tf.config.get_logical_device_configuration(cpu) or []
  if len(configured) < n:
    try:
      tf.config.set_logical_device_configuration(
          cpu, [tf.config.LogicalDeviceConfiguration()] * n)
    except RuntimeError:
      raise PortError(
          f"{n} replicas need {n} logical CPU devices, and TensorFlow has started with "
          f"{max(len(configured), 1)}: call porting.replica_devices({n}) (or "
          "tf.config.set_logical_device_configuration) before TensorFlow runs anything"
      ) from None
  return [f"/cpu:{i}" for i in range(n)]


def strategy(devices):
  """MirroredStrategy over `devices`. Between logical CPUs the sum runs on the first device,
  replica by replica (ReductionToOneDevice): a fixed order, as average_gradients' towers.
  Between GPUs NCCL (see docs/determinism.md for what that order gives up at N >= 3)."""
  if all(d.startswith("/cpu") for d in devices):
    ops = tf.distribute.ReductionToOneDevice(devices[0])
  else:
    ops = tf.distribute.NcclAllReduce()
  return tf.distribute.MirroredStrategy(devices, cross_device_ops=ops)


def session_config(devices):
  """The TF1 Session's ConfigProto: N CPU devices for N CPU towers, else the GPUs."""
  if all(d.startswith("/cpu") for d in devices):
    return v1.ConfigProto(device_count={"CPU": len(devices), "GPU": 0})
  return v1.ConfigProto(allow_soft_placement=True)
