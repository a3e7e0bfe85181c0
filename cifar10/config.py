"""Plain, validated run settings shared by both trainers (pure Python: no TensorFlow import).

Entry points turn their flags into these objects and nothing below them reads flags. Each
object checks itself on construction and raises UsageError with a one-line message, so both
binaries reject the same bad input with the same words, before TensorFlow is even imported.
"""

import dataclasses
import math
from typing import Optional

from cifar10.errors import UsageError
from cifar10.hparams import DEFAULT

# Both trainers hold the learning rate as a float32: a larger one would silently become Inf.
FLOAT32_MAX = 3.4028234663852886e38

# The exit status after a SIGTERM made the run save and stop (--preemption_exit_code's
# default): what a process killed by SIGTERM reports, which restart policies retry
# (harness.run_errors).
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
# The examples an evaluator can score: the test split, or the training split unaugmented.
SPLIT_SIZES = {"test": DEFAULT.num_examples_per_epoch_for_eval,
               "train_eval": DEFAULT.num_examples_per_epoch_for_train}


def _positive(name, value):
  if value is None or value < 1:
    raise UsageError(f"--{name} must be a positive integer, got {value}")


def _non_negative(name, value):
  if value is None or value < 0:
    raise UsageError(f"--{name} must be >= 0, got {value}")


def _seed(value):
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
  deterministic: op determinism and no TensorFloat-32 (harness.determinism): the bit
    contract on GPUs.
  precision: the compute dtype this process's steps run in (PRECISIONS; "fp32" for a task
    that runs none, a ps task or a parameter-server chief): on a CPU its kernels must have
    it (harness.cpu_kernels).
  """
  num_gpus: int = 1
  cpu_only: bool = False
  visible_gpus: Optional[str] = None
  allow_growth: bool = False
  memory_fraction: Optional[float] = None
  memory_limit_mb: Optional[int] = None
  log_device_placement: bool = False
  soft_placement: bool = True
  intra_op_threads: int = 0
  inter_op_threads: int = 0
  deterministic: bool = True
  precision: str = "fp32"

  def __post_init__(self):
    _positive("num_gpus", self.num_gpus)
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
    _non_negative("intra_op_threads", self.intra_op_threads)
    _non_negative("inter_op_threads", self.inter_op_threads)


@dataclasses.dataclass(frozen=True)
class TrainConfig:
  """One training run. batch_size is per replica, as `--batch_size` was per tower in TF1."""
  train_dir: str
  max_steps: int = 1000000
  batch_size: int = DEFAULT.batch_size
  seed: int = 0
  dataset: str = "cifar10"  # the default of every binary's --dataset too
  data_dir: Optional[str] = None
  download: bool = True  # cifar10: fetch it when missing and the data host answers
  learning_rate: float = DEFAULT.initial_learning_rate
  decay_steps_per_global_batch: bool = False
  decay_steps: int = 0  # steps between decays; 0: the original's formula (cifar10.schedule)
  precision: str = "fp32"  # one of PRECISIONS
  # fp16 only: a power of two, or "dynamic"; None: DEFAULT_LOSS_SCALE
  loss_scale: Optional[object] = None
  log_frequency: int = 10
  save_summaries_steps: int = 100
  save_checkpoint_steps: int = 1000
  max_checkpoints_to_keep: int = 5
  init_from: Optional[str] = None  # a checkpoint of either trainer to start from
  ema_reads: str = "updated"  # one of EMA_READS
  profile_steps: Optional[tuple] = None  # (A, B): profile 0-based steps A..B
  preemption_exit_code: int = PREEMPTED_EXIT_STATUS  # the exit status after a SIGTERM save
  override_run_config: bool = False  # resume train_dir's run with other settings on purpose
  # The command's flags as a --flagfile (harness.options), kept in train_dir; not a setting.
  flagfile: Optional[str] = dataclasses.field(default=None, compare=False, repr=False)

  def __post_init__(self):
    if not self.train_dir:
      raise UsageError("--train_dir must name a directory for checkpoints and summaries")
    for name in ("max_steps", "batch_size", "log_frequency", "save_summaries_steps",
                 "save_checkpoint_steps", "max_checkpoints_to_keep"):
      _positive(name, getattr(self, name))
    _seed(self.seed)
    _non_negative("decay_steps", self.decay_steps)
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


@dataclasses.dataclass(frozen=True)
class EvalConfig:
  """Precision @ 1 of a checkpoint's moving averages, as the original `cifar10_eval.py`."""
  checkpoint_dir: str
  eval_dir: str
  eval_data: str = "test"
  num_examples: int = DEFAULT.num_examples_per_epoch_for_eval
  batch_size: int = DEFAULT.batch_size
  run_once: bool = False
  eval_interval_secs: int = 60 * 5
  dataset: str = "cifar10"
  data_dir: Optional[str] = None
  download: bool = True
  seed: int = 0
  last_step: Optional[int] = None  # continuous: stop once a checkpoint of this step is scored
  # continuous, a cluster's evaluator task: the chief's host:port, and how long it may not
  # answer before the evaluator gives up (a killed chief writes no more checkpoints)
  chief: Optional[str] = None
  chief_timeout_secs: int = 300
  # the one device it scores on (num_gpus 1): --visible_gpus, --cpu_only, the memory flags,
  # so that evaluating beside a training run (as the original did) takes only its own GPU
  devices: DeviceConfig = dataclasses.field(default_factory=DeviceConfig)
  # The flag num_examples came from, for messages: a cluster's evaluator task has its own.
  examples_flag: str = dataclasses.field(default="num_examples", compare=False, repr=False)

  def __post_init__(self):
    if self.eval_data not in ("test", "train_eval"):
      raise UsageError(f"--eval_data must be 'test' or 'train_eval', got {self.eval_data!r}")
    for name in ("num_examples", "batch_size", "eval_interval_secs"):
      _positive(self.examples_flag if name == "num_examples" else name, getattr(self, name))
    split = SPLIT_SIZES[self.eval_data]
    if self.num_examples > split:  # every source of a split has its size (cifar10.data_sources)
      raise UsageError(f"--{self.examples_flag}={self.num_examples} but the {self.eval_data} "
                       f"split has {split} examples; give {split} or fewer")
    _seed(self.seed)
    check_dataset(self.dataset, self.data_dir)
