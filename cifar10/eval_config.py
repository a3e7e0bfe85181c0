"""What an evaluator scores, validated as cifar10.config's run settings are (pure Python)."""

import dataclasses
from typing import Optional

from cifar10 import config
from cifar10.errors import UsageError
from cifar10.hparams import DEFAULT

# The examples an evaluator can score: the test split, or the training split unaugmented.
SPLIT_SIZES = {"test": DEFAULT.num_examples_per_epoch_for_eval,
               "train_eval": DEFAULT.num_examples_per_epoch_for_train}


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
  devices: config.DeviceConfig = dataclasses.field(default_factory=config.DeviceConfig)
  # The flag num_examples came from, for messages: a cluster's evaluator task has its own.
  examples_flag: str = dataclasses.field(default="num_examples", compare=False, repr=False)

  def __post_init__(self):
    if self.eval_data not in ("test", "train_eval"):
      raise UsageError(f"--eval_data must be 'test' or 'train_eval', got {self.eval_data!r}")
    for name in ("num_examples", "batch_size", "eval_interval_secs"):
      config.positive(self.examples_flag if name == "num_examples" else name,
                      getattr(self, name))
    split = SPLIT_SIZES[self.eval_data]
    if self.num_examples > split:  # every source of a split has its size (cifar10.data_sources)
      raise UsageError(f"--{self.examples_flag}={self.num_examples} but the {self.eval_data} "
                       f"split has {split} examples; give {split} or fewer")
    config.check_seed(self.seed)
    config.check_dataset(self.dataset, self.data_dir)
