"""The device plan both trainers follow: which devices a DeviceConfig asks for.

Pure decisions, tested without GPUs: `visible_gpu_indices` (--visible_gpus, --cpu_only),
`plan` (`/gpu:0..N-1`, or on a machine without GPUs `/cpu:0..N-1`, N logical CPU devices),
`gpu_plan` (which GPUs the run uses: the first N visible, the rest hidden) and
`memory_limit_mb` (either form of the memory cap; harness.devices.gpu_memory asks nvidia-smi for the
total a fraction needs). strategies.devices applies the plan with
tf.config, compat_v1.devices writes it into a ConfigProto.
"""

from absl import logging

from cifar10.errors import UsageError

# Logical CPU devices stand in for GPUs on a machine without them (tests, laptops). More
# than this is a typo, not a plan: each one is a replica with its own copy of the model, and
# --num_gpus=4096 would build towers until memory ran out.
MAX_CPU_REPLICAS = 64


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
    if config.num_gpus > MAX_CPU_REPLICAS:
      raise UsageError(f"--num_gpus={config.num_gpus} but no GPU is visible, and on CPUs at "
                       f"most {MAX_CPU_REPLICAS} replicas (logical CPU devices) are run")
    if config.memory_fraction is not None or config.memory_limit_mb is not None:
      logging.warning("GPU memory settings ignored: no GPU in use")
    return "CPU", [f"/cpu:{i}" for i in range(config.num_gpus)]
  if config.num_gpus > num_visible_gpus:
    raise UsageError(f"--num_gpus={config.num_gpus} but only {num_visible_gpus} GPU(s) are "
                     "visible; lower --num_gpus or check CUDA_VISIBLE_DEVICES/--visible_gpus")
  return "GPU", [f"/gpu:{i}" for i in range(config.num_gpus)]


def gpu_plan(config, num_physical_gpus):
  """(kind, replica device names, the physical GPU indices the run uses): the first
  --num_gpus of the visible GPUs. The others are hidden from the run, so that it maps memory
  only on its own GPUs and a multi-worker resolver counts only them as replicas (it takes
  every visible GPU)."""
  visible = visible_gpu_indices(config, num_physical_gpus)
  kind, names = plan(config, len(visible))
  return kind, names, (visible[:config.num_gpus] if kind == "GPU" else [])


def memory_limit_mb(config, total_memory_mb):
  """The per-GPU limit in MiB that TF2 needs, from either form of the setting, or None."""
  if config.memory_fraction is None:
    return config.memory_limit_mb
  if not total_memory_mb:
    raise UsageError("--per_process_gpu_memory_fraction needs the GPU's total memory and "
                     "nvidia-smi did not report it; use --gpu_memory_limit_mb instead")
  return int(config.memory_fraction * total_memory_mb)


def parameter_device(names):
  """Where one copy of the weights is kept and updated (with their EMA) for replicas on
  `names`: the tower trainer's place, and strategies' --strategy=central_storage's: /cpu:0
  with towers on CPUs (the original's `_variable_on_cpu`), the first GPU with towers on GPUs.

  On GPUs TF2 updates each replica's copy on its GPU, and a GPU kernel may fuse
  `w - lr * g` into one rounding (a fused multiply-add) where the CPU's rounds twice: kept on
  the CPU, the towers' weights could move apart from the replicas' in the last bit. The first
  GPU is where TF1's multi-GPU benchmarks put them too (`--local_parameter_device=gpu`).
  """
  return names[0] if names and names[0].lower().startswith("/gpu") else "/cpu:0"
