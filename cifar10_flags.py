"""Flags shared by the entry points of both trainers, and their mapping to cifar10.config.

`strategies.train` and `compat_v1.train` take the same flags with the same defaults (and the
two evals the same eval flags), defined once here. Only entry points import this module:
libraries, the shared core included, receive the plain config objects and never see flags.
"""

import sys

from absl import app
from absl import flags
from absl import logging

from cifar10 import config
from cifar10 import errors
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


def define_train_flags():
  """The training flags both trainers share (original names and defaults where they exist)."""
  flags.DEFINE_string("train_dir", "/tmp/cifar10_train", "Where checkpoints and summaries go.")
  flags.DEFINE_integer("max_steps", 1000000, "Train until the global step reaches this.")
  flags.DEFINE_integer("batch_size", 128, "Images per replica per step (global batch = "
                       "batch_size * num_gpus).")
  flags.DEFINE_bool("use_fp16", False, "Compute in float16 (variables and updates stay "
                    "float32).")
  flags.DEFINE_float("learning_rate", 0.1, "Initial learning rate.")
  flags.DEFINE_bool("decay_steps_per_global_batch", False, "Count decay epochs in global "
                    "batches (the original counts per-GPU batches, so N GPUs decay N times "
                    "later).")
  flags.DEFINE_integer("log_frequency", 10, "Log the loss line every this many steps.")
  flags.DEFINE_integer("save_summaries_steps", 100, "Write summaries every this many steps.")
  flags.DEFINE_integer("save_checkpoint_steps", 1000, "Checkpoint every this many steps.")
  flags.DEFINE_integer("max_checkpoints_to_keep", 5, "Older checkpoints are deleted.")
  flags.DEFINE_string("init_from", None, "Start a new run from this checkpoint (a prefix or a "
                      "folder) of either trainer: weights, moving averages and global step. "
                      "Ignored when --train_dir already has a checkpoint to resume.")
  flags.DEFINE_string("ema_reads", "updated", "The moving averages read the weights and "
                      "step of this step's update ('updated') or those it replaces "
                      "('previous', the order the original usually took).")


def train_config(values):
  return config.TrainConfig(
      train_dir=values.train_dir, max_steps=values.max_steps, batch_size=values.batch_size,
      seed=values.seed, dataset=values.dataset, data_dir=values.data_dir,
      download=values.download, learning_rate=values.learning_rate,
      decay_steps_per_global_batch=values.decay_steps_per_global_batch,
      use_fp16=values.use_fp16, log_frequency=values.log_frequency,
      save_summaries_steps=values.save_summaries_steps,
      save_checkpoint_steps=values.save_checkpoint_steps,
      max_checkpoints_to_keep=values.max_checkpoints_to_keep, init_from=values.init_from,
      ema_reads=values.ema_reads)


def define_example_flags(steps, batch_help):
  """Data and device flags plus --steps and --batch_size, for the short example binaries."""
  define_data_flags()
  define_device_flags()
  flags.DEFINE_integer("steps", steps, "Training steps.")
  flags.DEFINE_integer("batch_size", 32, batch_help)


def example_configs(values):
  """(DeviceConfig, validated) for define_example_flags; UsageError on a bad value."""
  if values.steps < 1 or values.batch_size < 1:
    raise UsageError("--steps and --batch_size must be positive integers")
  config.check_dataset(values.dataset, values.data_dir)
  return device_config(values)


def define_eval_flags():
  """The flags of the original cifar10_eval.py."""
  flags.DEFINE_string("eval_dir", "/tmp/cifar10_eval", "Where the eval summaries go.")
  flags.DEFINE_string("eval_data", "test", "'test' or 'train_eval'.")
  flags.DEFINE_string("checkpoint_dir", "/tmp/cifar10_train", "Where training checkpoints are.")
  flags.DEFINE_integer("eval_interval_secs", 60 * 5, "How often to look for a new checkpoint.")
  flags.DEFINE_integer("num_examples", 10000, "Number of examples to run.")
  flags.DEFINE_integer("batch_size", 128, "Eval batch size.")
  flags.DEFINE_bool("run_once", False, "Whether to run eval only once.")


def eval_config(values):
  return config.EvalConfig(
      checkpoint_dir=values.checkpoint_dir, eval_dir=values.eval_dir,
      eval_data=values.eval_data, num_examples=values.num_examples,
      batch_size=values.batch_size, run_once=values.run_once,
      eval_interval_secs=values.eval_interval_secs, dataset=values.dataset,
      data_dir=values.data_dir, download=values.download, seed=values.seed)


def device_config(values):
  return config.DeviceConfig(
      num_gpus=values.num_gpus, cpu_only=values.cpu_only, visible_gpus=values.visible_gpus,
      allow_growth=values.allow_growth, memory_fraction=values.per_process_gpu_memory_fraction,
      memory_limit_mb=values.gpu_memory_limit_mb,
      log_device_placement=values.log_device_placement,
      soft_placement=values.allow_soft_placement, intra_op_threads=values.intra_op_threads,
      inter_op_threads=values.inter_op_threads)


def run_main(main, takes_args=False):
  """Wraps an absl main: UsageError becomes 'error: ...' on one line and exit status 2,
  errors.Stopped 'stopped: ...' and exit status 42.

  With takes_args, main receives the arguments after the flags (those after `--`).
  """

  def wrapped(argv):
    if len(argv) > 1 and not takes_args:
      _fail(f"unexpected arguments: {' '.join(argv[1:])}")
    logging.set_verbosity(logging.INFO)
    try:
      return main(argv[1:]) if takes_args else main()
    except UsageError as e:
      _fail(str(e))
    except errors.Stopped as e:
      print(f"stopped: {e}", file=sys.stderr, flush=True)
      sys.exit(errors.STOPPED_EXIT_STATUS)
    except KeyboardInterrupt:
      _fail("interrupted", status=130)
    except Exception as e:  # pylint: disable=broad-except
      # Only TensorFlow's placement failures (soft placement off) become one line; the class
      # is matched by name so that bad flags never wait for TensorFlow to import.
      error = errors.placement(str(e)) if type(e).__name__ == "InvalidArgumentError" else None
      if error is None:
        raise
      _fail(str(error))

  return wrapped


def _parse(argv):
  """absl's parser, but a bad or unknown flag is one line too, not absl's two."""
  try:
    return flags.FLAGS(argv)
  except flags.Error as e:
    _fail(str(e))


def app_run(main, takes_args=False):
  """app.run for every entry point: one-line errors for bad flags and for UsageError."""
  app.run(run_main(main, takes_args), flags_parser=_parse)


def _fail(message, status=2):
  print(f"error: {message}", file=sys.stderr, flush=True)
  sys.exit(status)
