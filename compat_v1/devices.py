"""Devices and the ConfigProto of the tower trainer, from the same DeviceConfig as TF2.

`setup(DeviceConfig)` returns (tower device names, ConfigProto); the entry point hands both
to the loop, which opens its Session with that config. Where the TF2 trainer calls tf.config
(strategies.devices), a TF1 program put every setting in one ConfigProto. Without GPUs,
`device_count={'CPU': N}` gives the Session N CPU devices for N towers. Which devices to use
is the shared plan (cifar10.devices); the process's eager runtime, which TensorFlow 2 starts
for tf.data's functions even here, gets the same GPUs and memory settings
(harness.devices.gpu_runtime).
"""

from absl import logging
import tensorflow as tf

from cifar10.errors import UsageError
from harness.devices import determinism
from harness.devices import gpu_runtime
from harness.control import progress
from tfbits import threads


def setup(config):
  """(tower device names, ConfigProto) for `config`; logs one line when towers go to CPUs."""
  determinism.apply(config.deterministic)  # process-wide: a Session's kernels follow it too
  try:  # the same GPUs for the eager runtime that tf.data's functions start (see gpu_runtime)
    kind, names, gpus = gpu_runtime.configure(config)
  except RuntimeError as e:
    raise UsageError(f"devices must be configured before TensorFlow starts: {e}") from None
  # The process's pools and the Session's alike, resolved and set before any device is made:
  # whichever of the eager runtime (tf.data's functions) and the Session makes the first
  # device fixes the intra-op pool for the process (tfbits.threads).
  intra, inter = threads.apply(config.intra_op_threads, config.inter_op_threads)
  proto = tf.compat.v1.ConfigProto(
      allow_soft_placement=config.soft_placement,
      log_device_placement=config.log_device_placement,
      intra_op_parallelism_threads=intra, inter_op_parallelism_threads=inter)
  if kind == "CPU":
    proto.device_count["GPU"] = 0
    proto.device_count["CPU"] = config.num_gpus
    if config.num_gpus > 1:
      logging.info("No GPU in use: running %d towers on %d CPU devices (%s)", config.num_gpus,
                   config.num_gpus, progress.device_list(names))
    return names, proto
  options = proto.gpu_options
  options.allow_growth = config.allow_growth
  options.visible_device_list = ",".join(str(i) for i in gpus)
  if config.memory_fraction is not None:
    options.per_process_gpu_memory_fraction = config.memory_fraction
  if config.memory_limit_mb is not None:
    for _ in gpus:
      options.experimental.virtual_devices.add(memory_limit_mb=[config.memory_limit_mb])
  return names, proto
