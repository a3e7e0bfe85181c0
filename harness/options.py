"""The flags of every binary, defined once, and their mapping to `cifar10.config` objects.

Each binary defines its flags into the FlagValues it is handed (`define_train_flags(fv)`), so
two binaries can be defined in one process (the tests call them in-process). Defaults are
read from the config dataclasses: a default has one home. Libraries, the shared core
included, never see flags: they receive the config objects built here.
"""

import dataclasses
import os

from absl import flags

from cifar10 import config
from cifar10.errors import UsageError
from harness import flag_ranges
from harness import profiling
from tfbits import filesystems


def default(cls, name):
  return {f.name: f.default for f in dataclasses.fields(cls)}[name]


def define_data_flags(fv):
  train = lambda name: default(config.TrainConfig, name)
  flags.DEFINE_string("dataset", train("dataset"), f"Input source: {' | '.join(config.DATASETS)}.",
                      flag_values=fv)
  flag_ranges.path("data_dir", None, "cifar10_bin: folder with cifar-10-batches-bin/*.bin; "
                   "cifar10: tensorflow-datasets data_dir (default ~/tensorflow_datasets).",
                   flag_values=fv)
  flags.DEFINE_bool("download", default(config.TrainConfig, "download"), "cifar10: let "
                    "tensorflow-datasets download the data when it is not in --data_dir and "
                    "the data host answers (--nodownload: never).", flag_values=fv)
  flag_ranges.integer("seed", train("seed"), "Seed of initial weights, data order and "
                      "augmentation.", flag_values=fv)


def define_device_flags(fv, replicas=True):
  """The TF1 ConfigProto/GPUOptions settings, as flags (see cifar10.devices); without
  `replicas` (the evaluators, on one device) no --num_gpus."""
  d = lambda name: default(config.DeviceConfig, name)
  if replicas:
    flag_ranges.integer("num_gpus", d("num_gpus"), "How many GPUs (replicas) to use; "
                        "without GPUs, that many logical CPU devices.", flag_values=fv)
  flags.DEFINE_bool("cpu_only", d("cpu_only"), "Hide all GPUs (ConfigProto "
                    "device_count={'GPU': 0}).", flag_values=fv)
  flags.DEFINE_string("visible_gpus", d("visible_gpus"), "Comma-separated GPU indices to use "
                      "(GPUOptions.visible_device_list); CUDA_VISIBLE_DEVICES also works.",
                      flag_values=fv)
  flags.DEFINE_bool("allow_growth", d("allow_growth"), "Allocate GPU memory as needed "
                    "(GPUOptions.allow_growth).", flag_values=fv)
  flag_ranges.number("per_process_gpu_memory_fraction", d("memory_fraction"), "Cap each GPU "
                     "at this fraction of its memory, in (0, 1].", flag_values=fv)
  flag_ranges.integer("gpu_memory_limit_mb", d("memory_limit_mb"), "Cap each GPU at this "
                      "many MiB.", flag_values=fv)
  flags.DEFINE_bool("log_device_placement", d("log_device_placement"), "Whether to log device "
                    "placement.", flag_values=fv)
  flags.DEFINE_bool("allow_soft_placement", d("soft_placement"), "Fall back to another device "
                    "when an op has no kernel on the requested one.", flag_values=fv)
  flag_ranges.integer("intra_op_threads", d("intra_op_threads"), "Threads inside one op "
                      "(0: TF decides).", flag_values=fv)
  flag_ranges.integer("inter_op_threads", d("inter_op_threads"), "Ops run in parallel "
                      "(0: TF decides).", flag_values=fv)
  flags.DEFINE_bool("deterministic", d("deterministic"), "Op determinism and no "
                    "TensorFloat-32: the bit contract on GPUs (--nodeterministic: faster "
                    "GPU kernels, repeatable only up to their rounding).", flag_values=fv)


def define_train_flags(fv):
  """The training flags both trainers share (original names and defaults where they exist)."""
  t = lambda name: default(config.TrainConfig, name)
  define_data_flags(fv)
  define_device_flags(fv)
  flag_ranges.path("train_dir", "/tmp/cifar10_train", "Where checkpoints and summaries go.",
                   flag_values=fv)
  flag_ranges.integer("max_steps", t("max_steps"), "Train until the global step reaches "
                      "this.", flag_values=fv)
  flag_ranges.integer("batch_size", t("batch_size"), "Images per replica per step (global "
                      "batch = batch_size * num_gpus).", flag_values=fv)
  flags.DEFINE_string("precision", t("precision"), "Compute dtype of the forward and "
                      f"backward pass: {' | '.join(config.PRECISIONS)} (weights, moving "
                      "averages and updates stay float32).", flag_values=fv)
  flags.DEFINE_bool("use_fp16", False, "The original's name for --precision=fp16.",
                    flag_values=fv)
  flags.DEFINE_string("loss_scale", t("loss_scale"), "fp16: the loss scale of a tower's "
                      f"loss, a power of two (default {config.DEFAULT_LOSS_SCALE:g}), or "
                      "'dynamic' (halved on overflow, the step skipped; doubled after 2000 "
                      "good steps).", flag_values=fv)
  flag_ranges.number("learning_rate", t("learning_rate"), "Initial learning rate.",
                     flag_values=fv)
  flags.DEFINE_bool("decay_steps_per_global_batch", t("decay_steps_per_global_batch"),
                    "Count decay epochs in global batches (the original counts per-GPU "
                    "batches, so N GPUs decay N times later).", flag_values=fv)
  flag_ranges.integer("decay_steps", t("decay_steps"), "Steps between learning-rate decays "
                      "(0: the original's int(50000 / batch_size * 350)).", flag_values=fv)
  flag_ranges.integer("log_frequency", t("log_frequency"), "Log the loss line every this "
                      "many steps.", flag_values=fv)
  flag_ranges.integer("save_summaries_steps", t("save_summaries_steps"), "Write summaries "
                      "every this many steps.", flag_values=fv)
  flag_ranges.integer("save_checkpoint_steps", t("save_checkpoint_steps"), "Checkpoint every "
                      "this many steps.", flag_values=fv)
  flag_ranges.integer("max_checkpoints_to_keep", t("max_checkpoints_to_keep"), "Older "
                      "checkpoints are deleted.", flag_values=fv)
  flag_ranges.path("init_from", t("init_from"), "Start a new run from this checkpoint (a "
                   "prefix or a folder) of either trainer: weights, moving averages and "
                   "global step. Ignored when --train_dir already has a checkpoint to "
                   "resume.", flag_values=fv)
  flags.DEFINE_string("profile_steps", None, "A,B: write a TensorBoard profile of the 0-based "
                      "steps A..B into train_dir/plugins/profile.", flag_values=fv)
  flag_ranges.integer("preemption_exit_code", t("preemption_exit_code"), "Exit status after "
                      "a SIGTERM (preemption) made the run save and stop: 128-255 is what "
                      "restart policies retry (TFJob restartPolicy ExitCode; 143 = killed "
                      "by SIGTERM); 42 is TensorFlow's PreemptionCheckpointHandler code.",
                      flag_values=fv)
  flags.DEFINE_bool("override_run_config", t("override_run_config"), "Continue the run in "
                    "--train_dir although its recorded settings (run_config.json: data, "
                    "seed, batch, replicas, precision, schedule) differ from these flags.",
                    flag_values=fv)
  flags.DEFINE_string("ema_reads", t("ema_reads"), "The moving averages read the weights and "
                      "step of this step's update ('updated') or those it replaces "
                      "('previous', the order the original usually took).", flag_values=fv)


def _precision(values):
  if values.use_fp16 and values.precision not in ("fp32", "fp16"):
    raise config.UsageError(f"--use_fp16 means --precision=fp16, but --precision="
                            f"{values.precision}; give one of them")
  return "fp16" if values.use_fp16 else values.precision


def train_config(values):
  return config.TrainConfig(
      train_dir=values.train_dir, max_steps=values.max_steps, batch_size=values.batch_size,
      seed=values.seed, dataset=values.dataset, data_dir=values.data_dir,
      download=values.download, learning_rate=values.learning_rate,
      decay_steps_per_global_batch=values.decay_steps_per_global_batch,
      decay_steps=values.decay_steps, precision=_precision(values),
      loss_scale=values.loss_scale, log_frequency=values.log_frequency,
      save_summaries_steps=values.save_summaries_steps,
      save_checkpoint_steps=values.save_checkpoint_steps,
      max_checkpoints_to_keep=values.max_checkpoints_to_keep, init_from=values.init_from,
      ema_reads=values.ema_reads, profile_steps=profiling.parse(values.profile_steps),
      preemption_exit_code=values.preemption_exit_code,
      override_run_config=values.override_run_config, flagfile=flagfile(values))


def flagfile(values):
  """The binary's own flags (absl's left out), every one with its value, one per line: what
  `--flagfile` reads back to run the same thing again (harness.ownership keeps it in
  train_dir/flags.txt)."""
  ours = sorted((f for module, defined in values.flags_by_module_dict().items()
                 if not module.startswith("absl") for f in defined), key=lambda f: f.name)
  names, lines = set(), []
  for flag in ours:
    if flag.name not in names and flag.value is not None:
      names.add(flag.name)
      lines.append(flag.serialize())
  return "\n".join(lines) + "\n"


def define_eval_flags(fv):
  """The flags of the original cifar10_eval.py, plus the data flags."""
  e = lambda name: default(config.EvalConfig, name)
  define_data_flags(fv)
  define_device_flags(fv, replicas=False)
  flag_ranges.path("eval_dir", "", "Where the eval summaries go; default: "
                   "<checkpoint_dir>/eval, beside the training run's, so `tensorboard "
                   "--logdir=<train_dir>` shows precision next to the loss.", flag_values=fv)
  flags.DEFINE_string("eval_data", e("eval_data"), "'test' or 'train_eval'.", flag_values=fv)
  flag_ranges.path("checkpoint_dir", "/tmp/cifar10_train", "Where training checkpoints "
                   "are.", flag_values=fv)
  flag_ranges.integer("eval_interval_secs", e("eval_interval_secs"), "How often to look for "
                      "a new checkpoint.", flag_values=fv)
  flag_ranges.integer("num_examples", e("num_examples"), "Number of examples to run.",
                      flag_values=fv)
  flag_ranges.integer("batch_size", e("batch_size"), "Eval batch size.", flag_values=fv)
  flags.DEFINE_bool("run_once", e("run_once"), "Whether to run eval only once.",
                    flag_values=fv)


def eval_config(values):
  if values.run_once and filesystems.absent_locally(values.checkpoint_dir):
    # Before TensorFlow is imported (continuous evaluation may start before the trainer).
    raise UsageError(f"no checkpoint at {values.checkpoint_dir!r} (expected a folder or a "
                     "prefix with a .index file)")
  return config.EvalConfig(
      checkpoint_dir=values.checkpoint_dir,
      eval_dir=values.eval_dir or os.path.join(values.checkpoint_dir, "eval"),
      eval_data=values.eval_data, num_examples=values.num_examples,
      batch_size=values.batch_size, run_once=values.run_once,
      eval_interval_secs=values.eval_interval_secs, dataset=values.dataset,
      data_dir=values.data_dir, download=values.download, seed=values.seed,
      devices=device_config(values, num_gpus=1))


def device_config(values, num_gpus=None):
  """The DeviceConfig of define_device_flags' values (num_gpus: instead of --num_gpus)."""
  return config.DeviceConfig(
      num_gpus=num_gpus or values.num_gpus, cpu_only=values.cpu_only,
      visible_gpus=values.visible_gpus,
      allow_growth=values.allow_growth, memory_fraction=values.per_process_gpu_memory_fraction,
      memory_limit_mb=values.gpu_memory_limit_mb,
      log_device_placement=values.log_device_placement,
      soft_placement=values.allow_soft_placement, intra_op_threads=values.intra_op_threads,
      inter_op_threads=values.inter_op_threads, deterministic=values.deterministic,
      precision=_precision(values) if "precision" in values else "fp32")


def define_example_flags(fv, steps, batch_help):
  """Data and device flags plus --steps and --batch_size, for the short example binaries."""
  define_data_flags(fv)
  define_device_flags(fv)
  flag_ranges.integer("steps", steps, "Training steps.", flag_values=fv)
  flag_ranges.integer("batch_size", 32, batch_help, flag_values=fv)


def example_configs(values):
  """DeviceConfig of define_example_flags, after checking the rest; UsageError on a bad value."""
  config.check_dataset(values.dataset, values.data_dir)
  return device_config(values)
