"""Plain, validated run settings shared by both trainers (pure Python: no TensorFlow import).

Entry points turn their flags into these objects and nothing below them reads flags. Each
object checks itself on construction and raises UsageError with a one-line message, so both
binaries reject the same bad input with the same words, before TensorFlow is even imported.
"""

import dataclasses
import math
from typing import Optional

from cifar10.devices import MAX_CPU_REPLICAS
from cifar10.errors import UsageError
from cifar10.hparams import DEFAULT
from cifar10.settings import CHECKPOINTS
from cifar10.settings import DATA
from cifar10.settings import DEVICES
from cifar10.settings import required
from cifar10.settings import SCHEDULE
from cifar10.settings import setting

# Both trainers hold the learning rate as a float32: a larger one would silently become Inf.
FLOAT32_MAX = 3.4028234663852886e38
# 2**40 steps is 35 years at a millisecond a step; the global step is an int64 in both trainers.
MAX_STEPS = 2 ** 40
MAX_BATCH = 65536  # images per batch: 4.5 GB of float32 24x24x3 crops
MAX_THREADS = 1024  # a thread pool's size: past any machine's cores

# The exit status after a SIGTERM made the run save and stop (--preemption_exit_code's
# default): what a process killed by SIGTERM reports, which restart policies retry
# (harness.control.run_errors).
PREEMPTED_EXIT_STATUS = 143
DATASETS = ("synthetic", "cifar10_bin", "cifar10")
# Which weights and step the moving averages read in a training step: those the update
# produces, or those it replaces (the original's usual, but unenforced, order).
EMA_READS = ("updated", "previous")
# The compute dtypes of the forward and backward pass (cifar10.precision); fp16 scales the loss.
PRECISIONS = ("fp32", "bf16", "fp16")
DEFAULT_LOSS_SCALE = 2.0 ** 15
# A fixed loss scale is a float32 power of two: a normal one, with room for the loss itself.
MIN_LOSS_SCALE, MAX_LOSS_SCALE = 2.0 ** -126, 2.0 ** 100
DYNAMIC_LOSS_SCALE = "dynamic"


def positive(name, value):
  if value is None or value < 1:
    raise UsageError(f"--{name} must be a positive integer, got {value}")


def non_negative(name, value):
  if value is None or value < 0:
    raise UsageError(f"--{name} must be >= 0, got {value}")


def check_seed(value):
  # Seeds become int64 tensors (stateless random ops): larger ones overflow inside TF.
  if value is None or not 0 <= value < 2 ** 63:
    raise UsageError(f"--seed must be in [0, 2**63), got {value}")


def check_dataset(dataset, data_dir):
  """UsageError unless `dataset` is known and has the data_dir it needs."""
  if dataset not in DATASETS:
    raise UsageError(f"unknown --dataset {dataset!r}; choose from {', '.join(DATASETS)}")
  if dataset == "cifar10_bin" and not data_dir:
    raise UsageError("--dataset=cifar10_bin needs --data_dir, the folder holding "
                     "cifar-10-batches-bin/*.bin")


@dataclasses.dataclass(frozen=True)
class DeviceConfig:
  """Every device setting of the TF1 seeds, in one place (see cifar10.devices for the TF2 form).

  num_gpus: replicas/towers; on a machine without GPUs, that many logical CPU devices.
  visible_gpus: "0,2" style, like CUDA_VISIBLE_DEVICES or GPUOptions.visible_device_list.
  memory_fraction: per_process_gpu_memory_fraction, in (0, 1].
  memory_limit_mb: a hard per-GPU limit in MiB (the TF2-native form); exclusive with fraction.
  deterministic: op determinism and no TensorFloat-32 (harness.devices.determinism): the bit
    contract on GPUs.
  precision: the compute dtype this process's steps run in (PRECISIONS; "fp32" for a task
    that runs none, a ps task or a parameter-server chief): on a CPU its kernels must have
    it (harness.devices.cpu_kernels).
  """
  num_gpus: int = setting(
      1, "How many GPUs (replicas) to use; without GPUs, that many logical CPU devices.",
      subject=DEVICES, bounds=(1, MAX_CPU_REPLICAS),
      applies="replicas; on GPUs also at most the visible ones")
  cpu_only: bool = setting(False, "Hide all GPUs (ConfigProto device_count={'GPU': 0}).",
                           subject=DEVICES)
  visible_gpus: Optional[str] = setting(
      None, "Comma-separated GPU indices to use (GPUOptions.visible_device_list); "
      "CUDA_VISIBLE_DEVICES also works.", subject=DEVICES)
  allow_growth: bool = setting(False, "Allocate GPU memory as needed "
                               "(GPUOptions.allow_growth).", subject=DEVICES)
  memory_fraction: Optional[float] = setting(
      None, "Cap each GPU at this fraction of its memory, in (0, 1].", subject=DEVICES,
      flag="per_process_gpu_memory_fraction", bounds=(0.0, 1.0, True), applies="GPUs")
  memory_limit_mb: Optional[int] = setting(
      None, "Cap each GPU at this many MiB.", subject=DEVICES, flag="gpu_memory_limit_mb",
      bounds=(1, 2 ** 20), applies="GPUs")  # 1 TiB
  log_device_placement: bool = setting(False, "Whether to log device placement.",
                                       subject=DEVICES)
  soft_placement: bool = setting(
      True, "Fall back to another device when an op has no kernel on the requested one.",
      subject=DEVICES, flag="allow_soft_placement")
  intra_op_threads: int = setting(0, "Threads inside one op (0: TF decides).",
                                  subject=DEVICES, bounds=(0, MAX_THREADS))
  inter_op_threads: int = setting(0, "Ops run in parallel (0: TF decides).", subject=DEVICES,
                                  bounds=(0, MAX_THREADS))
  deterministic: bool = setting(
      True, "Op determinism and no TensorFloat-32: the bit contract on GPUs "
      "(--nodeterministic: faster GPU kernels, repeatable only up to their rounding).",
      subject=DEVICES)
  # Not a flag of its own: TrainConfig.precision (fp32 for a task that runs no step).
  precision: str = "fp32"

  def __post_init__(self):
    positive("num_gpus", self.num_gpus)
    if self.memory_fraction is not None and not 0.0 < self.memory_fraction <= 1.0:
      raise UsageError("--per_process_gpu_memory_fraction must be in (0, 1], got "
                       f"{self.memory_fraction}")
    if self.memory_limit_mb is not None and self.memory_limit_mb <= 0:
      raise UsageError(f"--gpu_memory_limit_mb must be positive, got {self.memory_limit_mb}")
    if self.memory_fraction is not None and self.memory_limit_mb is not None:
      raise UsageError("give --per_process_gpu_memory_fraction or --gpu_memory_limit_mb, "
                       "not both")
    if self.visible_gpus:
      ids = self.visible_gpus.split(",")
      if not all(i.strip().isdigit() for i in ids) or len(set(ids)) != len(ids):
        raise UsageError("--visible_gpus must be distinct GPU indices like '0,2', got "
                         f"{self.visible_gpus!r}")
    non_negative("intra_op_threads", self.intra_op_threads)
    non_negative("inter_op_threads", self.inter_op_threads)


@dataclasses.dataclass(frozen=True)
class TrainConfig:
  """One training run. batch_size is per replica, as `--batch_size` was per tower in TF1."""
  train_dir: str = required("Where checkpoints and summaries go.", subject=CHECKPOINTS,
                            kind="path", flag_default="/tmp/cifar10_train")
  max_steps: int = setting(1000000, "Train until the global step reaches this.",
                           subject=SCHEDULE, bounds=(1, MAX_STEPS))
  batch_size: int = setting(DEFAULT.batch_size, "Images per replica per step (global batch = "
                            "batch_size * num_gpus).", subject=DATA, bounds=(1, MAX_BATCH),
                            guarded=True)
  seed: int = setting(0, "Seed of initial weights, data order and augmentation.",
                      subject=DATA, bounds=(0, 2 ** 63 - 1),  # stateless ops take int64 seeds
                      guarded=True)
  dataset: str = setting("cifar10", f"Input source: {' | '.join(DATASETS)}.", subject=DATA,
                         guarded=True)  # the default of every binary's --dataset too
  data_dir: Optional[str] = setting(
      None, "cifar10_bin: folder with cifar-10-batches-bin/*.bin; cifar10: "
      "tensorflow-datasets data_dir (default ~/tensorflow_datasets).", subject=DATA,
      kind="path", guarded=True)
  download: bool = setting(
      True, "cifar10: let tensorflow-datasets download the data when it is not in --data_dir "
      "and the data host answers (--nodownload: never).", subject=DATA)
  learning_rate: float = setting(DEFAULT.initial_learning_rate, "Initial learning rate.",
                                 subject=SCHEDULE, bounds=(0.0, FLOAT32_MAX, True),
                                 guarded=True)
  decay_steps_per_global_batch: bool = setting(
      False, "Count decay epochs in global batches (the original counts per-GPU batches, so "
      "N GPUs decay N times later).", subject=SCHEDULE, guarded=True)
  # Steps between decays; 0: the original's formula (cifar10.schedule).
  decay_steps: int = setting(0, "Steps between learning-rate decays (0: the original's "
                             "int(50000 / batch_size * 350)).", subject=SCHEDULE,
                             bounds=(0, MAX_STEPS), applies="0: the original's formula",
                             guarded=True)
  precision: str = setting(
      "fp32", f"Compute dtype of the forward and backward pass: {' | '.join(PRECISIONS)} "
      "(weights, moving averages and updates stay float32).", subject=DEVICES, guarded=True)
  # fp16 only: a power of two, or "dynamic"; None: DEFAULT_LOSS_SCALE
  loss_scale: Optional[object] = setting(
      None, "fp16: the loss scale of a tower's loss, a power of two (default "
      f"{DEFAULT_LOSS_SCALE:g}), or 'dynamic' (halved on overflow, the step skipped; doubled "
      "after 2000 good steps).", subject=DEVICES, kind="string", guarded=True)
  log_frequency: int = setting(10, "Log the loss line every this many steps.",
                               subject=CHECKPOINTS, bounds=(1, MAX_STEPS))
  save_summaries_steps: int = setting(100, "Write summaries every this many steps.",
                                      subject=CHECKPOINTS, bounds=(1, MAX_STEPS))
  save_checkpoint_steps: int = setting(1000, "Checkpoint every this many steps.",
                                       subject=CHECKPOINTS, bounds=(1, MAX_STEPS))
  max_checkpoints_to_keep: int = setting(5, "Older checkpoints are deleted.",
                                         subject=CHECKPOINTS, bounds=(1, 10000))
  init_from: Optional[str] = setting(
      None, "Start a new run from this checkpoint (a prefix or a folder) of either trainer: "
      "weights, moving averages and global step. Ignored when --train_dir already has a "
      "checkpoint to resume.", subject=CHECKPOINTS, kind="path")
  ema_reads: str = setting(
      "updated", "The moving averages read the weights and step of this step's update "
      "('updated') or those it replaces ('previous', the order the original usually took).",
      subject=SCHEDULE, guarded=True)  # one of EMA_READS
  # (A, B): profile 0-based steps A..B; the flag is the text "A,B".
  profile_steps: Optional[tuple] = setting(
      None, "A,B: write a TensorBoard profile of the 0-based steps A..B into "
      "train_dir/plugins/profile.", subject=CHECKPOINTS, kind="string")
  preemption_exit_code: int = setting(
      PREEMPTED_EXIT_STATUS, "Exit status after a SIGTERM (preemption) made the run save and "
      "stop: 128-255 is what restart policies retry (TFJob restartPolicy ExitCode; 143 = "
      "killed by SIGTERM); 42 is TensorFlow's PreemptionCheckpointHandler code.",
      subject=CHECKPOINTS, bounds=(3, 255))  # 0 success, 1 a crash, 2 a usage error
  override_run_config: bool = setting(
      False, "Continue the run in --train_dir although its recorded settings "
      "(run_config.json: data, seed, batch, replicas, precision, schedule) differ from these "
      "flags.", subject=CHECKPOINTS)
  # The command's flags as a --flagfile (harness.command_line.options), kept in train_dir; not a
  # setting.
  flagfile: Optional[str] = dataclasses.field(default=None, compare=False, repr=False)

  def __post_init__(self):
    if not self.train_dir:
      raise UsageError("--train_dir must name a directory for checkpoints and summaries")
    for name in ("max_steps", "batch_size", "log_frequency", "save_summaries_steps",
                 "save_checkpoint_steps", "max_checkpoints_to_keep"):
      positive(name, getattr(self, name))
    check_seed(self.seed)
    non_negative("decay_steps", self.decay_steps)
    if not 0 < self.learning_rate <= FLOAT32_MAX:
      raise UsageError("--learning_rate must be positive and finite as a float32 (at most "
                       f"{FLOAT32_MAX:.7g}), got {self.learning_rate}")
    check_dataset(self.dataset, self.data_dir)
    if self.precision not in PRECISIONS:
      raise UsageError(f"--precision must be one of {', '.join(PRECISIONS)}, got "
                       f"{self.precision!r}")
    if self.loss_scale is not None:
      if self.precision != "fp16":
        raise UsageError(f"--loss_scale applies to --precision=fp16 only (float16's range); "
                         f"--precision={self.precision} needs none")
      if self.loss_scale != DYNAMIC_LOSS_SCALE:
        try:
          value = float(self.loss_scale)
        except ValueError:
          value = float("nan")
        if not (0 < value < float("inf") and math.frexp(value)[0] == 0.5):
          raise UsageError(f"--loss_scale must be 'dynamic' or a power of two (e.g. 32768), "
                           f"got {self.loss_scale}: only then is unscaling exact and the two "
                           "trainers equal")
        if not MIN_LOSS_SCALE <= value <= MAX_LOSS_SCALE:
          # Both trainers hold it as a float32: 2**200 became Inf
          # and 2**-200 zero, and the run failed at step 0 with the wrong advice.
          raise UsageError(f"--loss_scale={self.loss_scale} is not a float32 scale: give a "
                           "power of two from 2**-126 to 2**100 (32768 is the default)")
        object.__setattr__(self, "loss_scale", value)
    if self.profile_steps is not None and not (
        len(self.profile_steps) == 2 and 0 <= self.profile_steps[0] <= self.profile_steps[1]):
      raise UsageError(f"--profile_steps must be A,B with 0 <= A <= B, got "
                       f"{self.profile_steps}")
    if self.profile_steps is not None and self.profile_steps[0] >= self.max_steps:
      raise UsageError(f"--profile_steps={self.profile_steps[0]},{self.profile_steps[1]} "
                       f"starts after the last step (0-based {self.max_steps - 1} of "
                       f"--max_steps={self.max_steps}): nothing would be profiled")
    if not 3 <= self.preemption_exit_code <= 255:
      raise UsageError("--preemption_exit_code must be in 3..255 (0 is success, 1 a crash, 2 "
                       f"a usage error), got {self.preemption_exit_code}")
    if self.ema_reads not in EMA_READS:
      raise UsageError(f"--ema_reads must be one of {', '.join(EMA_READS)}, got "
                       f"{self.ema_reads!r}")

  @property
  def hparams(self):
    """The original's hyper-parameters with this run's learning rate and batch: the one place
    where the flags meet cifar10.hparams."""
    return dataclasses.replace(DEFAULT, initial_learning_rate=self.learning_rate,
                               batch_size=self.batch_size)

  @property
  def scale(self):
    """The loss scale of a tower's loss: None unless precision is fp16; a float, or
    DYNAMIC_LOSS_SCALE ("dynamic")."""
    if self.precision != "fp16":
      return None
    return self.loss_scale if self.loss_scale is not None else DEFAULT_LOSS_SCALE

  def global_batch_size(self, replicas):
    """Examples per step over `replicas` replicas (towers) of batch_size each."""
    return self.batch_size * replicas

  def steps_between_decays(self, replicas):
    """decay_steps, or the original's count for `replicas` replicas (towers)."""
    if self.decay_steps:
      return self.decay_steps
    from cifar10 import schedule  # pylint: disable=g-import-not-at-top  # imports TensorFlow
    return schedule.decay_steps(self.batch_size, replicas, self.decay_steps_per_global_batch)
