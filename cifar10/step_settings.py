"""What one synchronous step reads, declared once for both trainers.

A run's flags are cifar10.config's TrainConfig; the step of each trainer (compat_v1.step's
tower graph, strategies.step's Trainer) reads the part of them that decides its arithmetic,
resolved for the run's number of replicas (towers), as one value: `StepSettings.of(config,
replicas)`. Before, each of these went by keyword from the config through the loop builders
to the step (12 parameters of the v1 graph, 9 of the Trainer, fed in 3 places), and a setting
added to one hop and not another was a silent default. flax's `create_train_state(config)`
is the model.
"""

import dataclasses
from typing import Optional, Union

import tensorflow as tf

from cifar10 import precision
from cifar10.config import EMA_READS
from cifar10.hparams import DEFAULT
from cifar10.hparams import HParams


@dataclasses.dataclass(frozen=True)
class StepSettings:
  """The settings of the step.

  seed: the initial weights' (cifar10.model.initial_values).
  decay_steps: steps between learning-rate decays, resolved for the run's replicas.
  hparams: the original's hyper-parameters with the run's learning rate and batch.
  compute_dtype: the forward and backward pass's dtype (cifar10.precision).
  loss_scale: of a tower's loss: None, a power of two, or precision.DYNAMIC.
  ema_reads: "updated" (the EMA after the update) or "previous" (before it).
  jit_compile: XLA compiles each replica's forward and backward pass (strategies only:
    the v1 graph has no per-replica function to compile, and refuses it).
  """
  seed: int
  decay_steps: int
  hparams: HParams = DEFAULT
  compute_dtype: tf.DType = tf.float32
  loss_scale: Optional[Union[float, str]] = None
  ema_reads: str = "updated"
  jit_compile: bool = False

  def __post_init__(self):
    if self.ema_reads not in EMA_READS:
      raise ValueError(f"ema_reads must be one of {EMA_READS}, got {self.ema_reads!r}")

  @property
  def dynamic(self):
    """Whether the loss scale is dynamic (kept in variables the step updates)."""
    return self.loss_scale == precision.DYNAMIC

  @classmethod
  def of(cls, config, replicas, jit_compile=False):
    """The settings of `config`'s step over `replicas` replicas (towers, in all workers)."""
    return cls(seed=config.seed, decay_steps=config.steps_between_decays(replicas),
               hparams=config.hparams, compute_dtype=precision.compute_dtype(config.precision),
               loss_scale=config.scale, ema_reads=config.ema_reads, jit_compile=jit_compile)
