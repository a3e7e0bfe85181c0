"""Device set-up: the TF2 form of every ConfigProto/GPUOptions setting the TF1 trainer used.

`setup(DeviceConfig)` must run before TensorFlow creates its first op (afterwards TF refuses to
change devices or thread pools). It returns the device names to put replicas/towers on:
`/gpu:0..N-1`, or on a machine without GPUs `/cpu:0..N-1` as N logical CPU devices (announced
in one log line). `visible_gpu_indices`, `plan` and `memory_limit_mb` are the pure decisions,
shared with the tf.compat.v1 trainer's ConfigProto and tested without GPUs.

  TF1 (ConfigProto / GPUOptions)            TF2 (here)
  gpu_options.visible_device_list, CUDA_... tf.config.set_visible_devices
  device_count={'GPU': 0}                   cpu_only -> set_visible_devices([], 'GPU')
  gpu_options.allow_growth                  tf.config.experimental.set_memory_growth
  per_process_gpu_memory_fraction           LogicalDeviceConfiguration(memory_limit=MiB)
  log_device_placement                      tf.debugging.set_log_device_placement
  allow_soft_placement                      tf.config.set_soft_device_placement
  intra/inter_op_parallelism_threads        tf.config.threading.set_*_parallelism_threads
"""

import subprocess

from absl import logging
import tensorflow as tf

from cifar10.errors import UsageError


def visible_gpu_indices(config, num_physical_gpus):
  """Indices of the physical GPUs to use: all, those of --visible_gpus, or none."""
  if config.cpu_only:
    return []
  if not config.visible_gpus:
    return list(range(num_physical_gpus))
  wanted = [int(i) for i in config.visible_gpus.split(",")]
  if max(wanted) >= num_physical_gpus:
    raise UsageError(f"--visible_gpus={config.visible_gpus} but only {num_physical_gpus} "
                     "GPU(s) exist")
  return wanted


def plan(config, num_visible_gpus):
  """("GPU" | "CPU", replica device names) for `config` with this many usable GPUs."""
  if num_visible_gpus == 0:
    if config.memory_fraction is not None or config.memory_limit_mb is not None:
      logging.warning("GPU memory settings ignored: no GPU in use")
    return "CPU", [f"/cpu:{i}" for i in range(config.num_gpus)]
  if config.num_gpus > num_visible_gpus:
    raise UsageError(f"--num_gpus={config.num_gpus} but only {num_visible_gpus} GPU(s) are "
                     "visible; lower --num_gpus or check CUDA_VISIBLE_DEVICES/--visible_gpus")
  return "GPU", [f"/gpu:{i}" for i in range(config.num_gpus)]


def memory_limit_mb(config, total_memory_mb):
  """The per-GPU limit in MiB that TF2 needs, from either form of the setting, or None."""
  if config.memory_fraction is None:
    return config.memory_limit_mb
  if not total_memory_mb:
    raise UsageError("--per_process_gpu_memory_fraction needs the GPU's total memory and "
                     "nvidia-smi did not report it; use --gpu_memory_limit_mb instead")
  return int(config.memory_fraction * total_memory_mb)


def total_gpu_memory_mb():
  # TF2 has no fraction setting, only an absolute limit; the smallest GPU bounds all of them.
  try:
    out = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,"
                          "nounits"], capture_output=True, text=True, timeout=10, check=True)
    return min(int(v) for v in out.stdout.split())
  except (OSError, ValueError, subprocess.SubprocessError):
    return None


def setup(config):
  """Applies `config` to the TF runtime and returns the replica device names."""
  try:
    physical = tf.config.list_physical_devices("GPU")
    gpus = [physical[i] for i in visible_gpu_indices(config, len(physical))]
    tf.config.set_visible_devices(gpus, "GPU")
    kind, names = plan(config, len(gpus))
    limit = None
    if gpus and (config.memory_fraction or config.memory_limit_mb):
      total = total_gpu_memory_mb() if config.memory_fraction is not None else None
      limit = memory_limit_mb(config, total)
    if kind == "CPU" and config.num_gpus > 1:
      cpu = tf.config.list_physical_devices("CPU")[0]
      tf.config.set_logical_device_configuration(
          cpu, [tf.config.LogicalDeviceConfiguration()] * config.num_gpus)
      logging.info("No GPU in use: running %d replicas on %d logical CPU devices (%s)",
                   config.num_gpus, config.num_gpus, ", ".join(names))
    for gpu in gpus:
      if config.allow_growth:
        tf.config.experimental.set_memory_growth(gpu, True)
      if limit is not None:
        tf.config.set_logical_device_configuration(
            gpu, [tf.config.LogicalDeviceConfiguration(memory_limit=limit)])
    tf.config.set_soft_device_placement(config.soft_placement)
    tf.debugging.set_log_device_placement(config.log_device_placement)
    tf.config.threading.set_intra_op_parallelism_threads(config.intra_op_threads)
    tf.config.threading.set_inter_op_parallelism_threads(config.inter_op_threads)
  except RuntimeError as e:
    raise UsageError(f"devices must be configured before TensorFlow starts: {e}") from None
  return names
