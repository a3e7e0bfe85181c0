"""The variables of a TF2 training run under any tf.distribute strategy, and their checkpoint.

`TrainingState` creates, under the strategy's scope, the model weights (initial values from
the shared core), the global step, the EMA shadows, the original's loss averages and a
dynamic loss scale's state, all of them checkpointed; strategies.step.Trainer adds the
compiled steps that update them.

Under ParameterServerStrategy with a variable partitioner a weight may be a ShardedVariable
(row blocks on different ps tasks). The step then differentiates, updates and averages each
shard (a ShardedVariable has no single handle to differentiate or update), and the checkpoint
saves the shards as slices of one tensor under the weight's usual key, so checkpoints of
partitioned and plain runs are interchangeable.
"""

import tensorflow as tf
# ShardedVariable has no public constructor; it is the type PSS partitions weights into.
from tensorflow.python.distribute import sharded_variable  # pylint: disable=g-direct-tensorflow-import

from cifar10 import losses
from cifar10 import model
from cifar10 import precision
from strategies import shadows


class TrainingState:
  """Weights, step, EMA shadows and loss-scale state of one strategy; built once, eagerly."""

  def __init__(self, strategy, *, seed, moving_average_decay, dynamic_loss_scale):
    self.strategy = strategy
    self.dynamic = dynamic_loss_scale
    values = model.initial_values(seed)
    with strategy.scope():
      self.params = {n: tf.Variable(values[n], name=n) for n in model.VARIABLE_NAMES}
      self.global_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
      # The original's loss averages, for summaries only; checkpointed all the same, so
      # that a resumed run charts them as the same run uninterrupted.
      self.loss_averages = {n: tf.Variable(0.0, trainable=False, name=n + "/avg")
                            for n in losses.LOSS_TERMS}
      if self.dynamic:  # the dynamic loss scale's state, checkpointed
        self.scale = tf.Variable(precision.DYNAMIC_INITIAL_SCALE, trainable=False,
                                 name="loss_scale")
        self.good_steps = tf.Variable(0, dtype=tf.int64, trainable=False,
                                      name="loss_scale_good_steps")
    # The EMA of every shard (strategies.shadows: one copy under MirroredStrategy).
    self.shadows = shadows.Shadows(strategy, self.shards, moving_average_decay,
                                   self.global_step)
    # A stop request (SIGTERM, Ctrl-C) that arrives during a call of many steps: set from
    # another thread (harness.control.signals), read by the call before each of its later steps.
    # This process's own, outside the strategy: never mirrored, never checkpointed.
    self.stop_flag = tf.Variable(0.0, trainable=False, name="stop_requested")
    self.averages = {n: _join(v, [self.shadows.of(s) for s in _parts(v)])
                     for n, v in self.params.items()}

  @property
  def variables(self):
    return [self.params[n] for n in model.VARIABLE_NAMES]

  @property
  def shards(self):
    """The variables that hold the weights: one per weight, or its shards when partitioned."""
    return [s for v in self.variables for s in _parts(v)]

  @property
  def partitions(self):
    """{weight name: number of shards} for the weights that are partitioned."""
    return {n: len(_parts(v)) for n, v in self.params.items() if len(_parts(v)) > 1}

  def request_stop(self):
    """Makes a running call of many steps end after the step in hand (any thread)."""
    self.stop_flag.assign(1.0)

  def apply_ema(self):
    self.shadows.apply()

  @tf.function(autograph=False)  # nothing here branches on a tensor: no conversion to pay
  def all_finite(self):
    """Whether every weight and moving average is finite (checked before every save)."""
    return precision.all_finite(self.shards + self.shadows.copies)

  def checkpoint(self, loss_averages=True):
    """Weights, EMA shadows, global step, loss averages and a dynamic loss scale's state.
    Plain SGD has no slot state to save. loss_averages=False leaves the loss averages out,
    to restore a checkpoint written before they were saved (cifar10.checkpoints)."""
    extra = ({"loss_scale": self.scale, "loss_scale_good_steps": self.good_steps}
             if self.dynamic else {})
    if loss_averages:
      extra["loss_averages"] = self.loss_averages
    return tf.train.Checkpoint(global_step=self.global_step, params=self.params,
                               ema=self.averages, **extra)


def _parts(var):
  return list(getattr(var, "variables", [var]))  # a ShardedVariable's shards, in row order


def _join(var, shadows):
  """The EMA shadows of `var`'s shards as one checkpointable value shaped like `var`."""
  if len(shadows) == 1:
    return shadows[0]
  return sharded_variable.ShardedVariable(shadows, name=var.name.split(":")[0] + "/avg")
