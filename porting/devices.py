"""The N devices both sides run on: the first N GPUs, or N logical CPU devices without GPUs.

Logical CPU devices must be made before TensorFlow starts its runtime: `replica_devices`
makes them when it still can and otherwise says how (a test suite's conftest, or a command
line's first lines, sets them up front). On GPUs it turns on op determinism and turns
TensorFloat-32 off, for the whole process: without them cuDNN's and BiasAddGrad's kernels
add in the order their threads finish and float32 matmuls and convolutions round to 10-bit
mantissas on Ampere and newer, and a comparison to the bit would see that noise.
"""

import os

import tensorflow as tf
from tensorflow.core.protobuf import rewriter_config_pb2

from porting.errors import PortError
from tfbits import threads
from tfbits.machine import physical_devices  # pylint: disable=unused-import  # patched by tests

v1 = tf.compat.v1
# TensorFlow 1.x (1.15: where a team's TF1 code records its side): its device calls live
# under tf.config.experimental, and its Sessions need no logical devices.
TF1 = tf.__version__.startswith("1.")


MAX_REPLICAS = 64  # as the trainers' logical CPU replicas: more takes minutes to build


def replica_devices(n):
  """['/gpu:0', ...] or ['/cpu:0', ...]: n devices, one per tower and replica."""
  if not 1 <= n <= MAX_REPLICAS:
    raise PortError(f"replicas must be an integer from 1 to {MAX_REPLICAS}, got {n}")
  threads.hold()  # the pools' counts explicit before a device is made (tfbits.threads)
  gpus = physical_devices("GPU")
  if gpus:
    if len(gpus) < n:
      raise PortError(f"{n} replicas but only {len(gpus)} GPU(s) are visible")
    if TF1:  # 1.15 reads it when its kernels are built; it has no TensorFloat-32
      os.environ["TF_DETERMINISTIC_OPS"] = "1"
    else:
      tf.config.experimental.enable_op_determinism()
      tf.config.experimental.enable_tensor_float_32_execution(False)
    return [f"/gpu:{i}" for i in range(n)]
  if TF1:  # only the TF1 side runs here (record): a Session's device_count makes the CPUs
    return [f"/cpu:{i}" for i in range(n)]
  cpu = tf.config.list_physical_devices("CPU")[0]
  configured = tf.config.get_logical_device_configuration(cpu) or []
  # Unconfigured, the CPU is one logical device: enough for one replica (asking to configure
  # it once TensorFlow had started refused N = 1 with "need 1, started with 1").
  if max(len(configured), 1) < n:
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
  """MirroredStrategy over `devices` that sums the replicas' gradients on the first device,
  replica by replica (ReductionToOneDevice), on GPUs too: the order `average_gradients` adds
  the towers in. A production run's NCCL all-reduce sums in its ring's order, which differs
  from it at N >= 3; the comparison is of the port, not of the all-reduce."""
  return tf.distribute.MirroredStrategy(
      devices, cross_device_ops=tf.distribute.ReductionToOneDevice(devices[0]))


def session_config(devices):
  """The TF1 Session's ConfigProto: N CPU devices for N CPU towers, else the GPUs; the graph
  optimizer's options the process set (`graph_rewrites`)."""
  if all(d.startswith("/cpu") for d in devices):
    config = v1.ConfigProto(device_count={"CPU": len(devices), "GPU": 0})
  else:
    config = v1.ConfigProto(allow_soft_placement=True)
  pools = threads.hold()  # the Session's pools the process's (whichever makes a device first)
  if pools:
    config.intra_op_parallelism_threads, config.inter_op_parallelism_threads = pools
  config.graph_options.rewrite_options.CopyFrom(graph_rewrites())
  return config


def graph_rewrites():
  """The RewriterConfig of `tf.config.optimizer.set_experimental_options` (grappler's passes
  switched on or off): TF2 functions, the port's step among them, run under the process's
  options, and a Session under its own ConfigProto only, so a pass a team switches off (to
  see whether its rewrite is a difference's cause) is switched off on both sides."""
  rewrites = rewriter_config_pb2.RewriterConfig()
  for name, value in tf.config.optimizer.get_experimental_options().items():
    field = rewrites.DESCRIPTOR.fields_by_name.get(name)
    if field is None:
      continue
    if field.enum_type is not None:  # a Toggle: DEFAULT (unset), ON, OFF
      value = rewriter_config_pb2.RewriterConfig.ON if value else (
          rewriter_config_pb2.RewriterConfig.OFF)
    setattr(rewrites, name, value)
  return rewrites
