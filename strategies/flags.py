"""Flags shared by `strategies.train` and `strategies.eval`, and their mapping to configs.

Only entry points import this module; libraries receive the plain config objects.
"""

import sys

from absl import flags
from absl import logging

from cifar10 import config
from cifar10.errors import UsageError


def define_data_flags():
  flags.DEFINE_string("dataset", "cifar10", f"Input source: {' | '.join(config.DATASETS)}.")
  flags.DEFINE_string("data_dir", None, "cifar10_bin: folder with cifar-10-batches-bin/*.bin; "
                      "cifar10: tensorflow-datasets data_dir (default ~/tensorflow_datasets).")
  flags.DEFINE_bool("download", False, "cifar10: let tensorflow-datasets download the data.")
  flags.DEFINE_integer("seed", 0, "Seed of initial weights, data order and augmentation.")


def define_device_flags():
  """The TF1 ConfigProto/GPUOptions settings, as flags (see cifar10.devices)."""
  flags.DEFINE_integer("num_gpus", 1, "How many GPUs (replicas) to use; without GPUs, that "
                       "many logical CPU devices.")
  flags.DEFINE_bool("cpu_only", False, "Hide all GPUs (ConfigProto device_count={'GPU': 0}).")
  flags.DEFINE_string("visible_gpus", None, "Comma-separated GPU indices to use "
                      "(GPUOptions.visible_device_list); CUDA_VISIBLE_DEVICES also works.")
  flags.DEFINE_bool("allow_growth", False, "Allocate GPU memory as needed "
                    "(GPUOptions.allow_growth).")
  flags.DEFINE_float("per_process_gpu_memory_fraction", None, "Cap each GPU at this fraction "
                     "of its memory, in (0, 1].")
  flags.DEFINE_integer("gpu_memory_limit_mb", None, "Cap each GPU at this many MiB.")
  flags.DEFINE_bool("log_device_placement", False, "Whether to log device placement.")
  flags.DEFINE_bool("allow_soft_placement", True, "Fall back to another device when an op "
                    "has no kernel on the requested one.")
  flags.DEFINE_integer("intra_op_threads", 0, "Threads inside one op (0: TF decides).")
  flags.DEFINE_integer("inter_op_threads", 0, "Ops run in parallel (0: TF decides).")


def device_config(values):
  return config.DeviceConfig(
      num_gpus=values.num_gpus, cpu_only=values.cpu_only, visible_gpus=values.visible_gpus,
      allow_growth=values.allow_growth, memory_fraction=values.per_process_gpu_memory_fraction,
      memory_limit_mb=values.gpu_memory_limit_mb,
      log_device_placement=values.log_device_placement,
      soft_placement=values.allow_soft_placement, intra_op_threads=values.intra_op_threads,
      inter_op_threads=values.inter_op_threads)


def run_main(main):
  """Wraps an absl main: UsageError becomes 'error: ...' on one line and exit status 2."""

  def wrapped(argv):
    if len(argv) > 1:
      _fail(f"unexpected arguments: {' '.join(argv[1:])}")
    logging.set_verbosity(logging.INFO)
    try:
      return main()
    except UsageError as e:
      _fail(str(e))
    except KeyboardInterrupt:
      _fail("interrupted", status=130)

  return wrapped


def _fail(message, status=2):
  print(f"error: {message}", file=sys.stderr, flush=True)
  sys.exit(status)
