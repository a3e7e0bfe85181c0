"""The run's GPUs in TensorFlow's eager runtime: which are visible, memory growth, memory cap.

Both trainers call `configure(DeviceConfig)` before TensorFlow creates a device. The TF2
trainer runs in that runtime. The tower trainer runs in a Session whose ConfigProto carries
the same settings, yet its process has the eager runtime too: TensorFlow 2 registers every
tf.data function (the input stream's `map`, tfds's readers) with it, even while a v1 graph is
built, and so starts it then. Unconfigured, that runtime takes every GPU of the machine and
maps its memory (allow_growth and the memory cap are the Session's alone), and where
`--visible_gpus` does not start at 0 it maps its GPU:0 to another card than the Session's
GPU:0 and fails. Configured alike here, the two agree whichever starts first.
"""

from cifar10 import devices
from harness.devices import cpu_kernels
from harness.devices import gpu_memory


def configure(config):
  """Applies the GPU part of DeviceConfig `config` with tf.config and returns the shared
  plan's (kind, replica device names, physical GPU indices used). RuntimeError where the
  runtime has already started with other settings; UsageError where the run computes on a
  CPU whose kernels cannot run its precision (harness.devices.cpu_kernels)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top  # binaries parse flags first
  physical = tf.config.list_physical_devices("GPU")
  kind, names, used = devices.gpu_plan(config, len(physical))
  if kind == "CPU":  # its steps meet the CPU's kernels
    cpu_kernels.check(config.precision)
  gpus = [physical[i] for i in used]  # --num_gpus of them; the others stay hidden
  if gpus != tf.config.get_visible_devices("GPU"):
    tf.config.set_visible_devices(gpus, "GPU")
  limit = None
  if gpus and (config.memory_fraction or config.memory_limit_mb):
    total = gpu_memory.total_gpu_memory_mb() if config.memory_fraction is not None else None
    limit = devices.memory_limit_mb(config, total)
  for gpu in gpus:
    if config.allow_growth:
      tf.config.experimental.set_memory_growth(gpu, True)
    if limit is not None:
      tf.config.set_logical_device_configuration(
          gpu, [tf.config.LogicalDeviceConfiguration(memory_limit=limit)])
  return kind, names, used
