"""Hyper-parameters of the original `cifar10.py` tutorial, as one frozen dataclass."""

import dataclasses


@dataclasses.dataclass(frozen=True)
class HParams:
  """Constants of the classic multi-GPU CIFAR-10 trainer (names as in the original)."""
  batch_size: int = 128  # per replica / per tower
  image_size: int = 24  # train crops and eval centre crops; the stored images are 32x32
  num_classes: int = 10
  num_examples_per_epoch_for_train: int = 50000
  num_examples_per_epoch_for_eval: int = 10000
  initial_learning_rate: float = 0.1
  num_epochs_per_decay: float = 350.0
  learning_rate_decay_factor: float = 0.1
  moving_average_decay: float = 0.9999


DEFAULT = HParams()
