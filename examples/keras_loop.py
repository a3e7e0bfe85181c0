"""The Keras `fit` driver behind examples.keras_fit: the same run as strategies.train, by fit.

`fit(config, strategy)` builds examples.keras_model under the strategy it is handed and fits
the shared input stream up to config.max_steps (any number: an epoch is
config.save_checkpoint_steps steps, and the run stops at max_steps inside its last one).
What strategies.train keeps, it keeps the same way, so the two write the same checkpoints, to
the bit:

- the moving averages of the weights: TensorFlow's ExponentialMovingAverage with the shared
  decay, its step count the optimizer's, applied after each step's update (`--ema_reads
  updated`, the trainers' default);
- checkpoints `ckpt-N` in strategies.train's layout (weights, averages, global step) by a
  CheckpointManager, every save_checkpoint_steps steps, at the end and on SIGTERM or Ctrl-C
  (the step finishes, the checkpoint is saved, `stopped:` and --preemption_exit_code), so
  both evaluators and both trainers' --init_from read them;
- the resume from the newest complete checkpoint, or the start from --init_from;
- the NaN checks: a non-finite loss stops before any save, non-finite weights or averages
  are never saved.

Keras's own parts stay Keras's: compile, fit, its progress bar, and the TensorBoard callback
for the loss every save_summaries_steps steps.
"""

import os

from absl import logging
import keras
import tensorflow as tf

from cifar10 import checkpoints
from cifar10 import errors
from cifar10 import input_pipeline
from cifar10 import precision
from examples import keras_model
from harness import ownership
from harness import signals
from strategies import loop


class State:
  """The Keras model's variables in strategies.train's checkpoint layout, and their EMA:
  the parts of a strategies.step.Trainer that strategies.loop.restore uses."""

  def __init__(self, net, hparams):
    self.net = net
    strategy = net.distribute_strategy
    with strategy.scope():
      net.optimizer.build(net.trainable_variables)  # creates `iterations`, the step count
      self.global_step = net.optimizer.iterations.value  # the tf.Variable under Keras's wrapper
      self.params = {n: v.value for n, v in net.params.items()}
      self.ema = tf.train.ExponentialMovingAverage(hparams.moving_average_decay,
                                                   num_updates=self.global_step)
      self.ema.apply(list(self.params.values()))  # shadows: eagerly, under the scope
    self.averages = {n: self.ema.average(v) for n, v in self.params.items()}

  @tf.function
  def apply_ema(self):
    with self.net.distribute_strategy.scope():
      self.ema.apply(list(self.params.values()))

  @tf.function
  def all_finite(self):
    tracked = list(self.params.values()) + list(self.averages.values())
    return tf.reduce_all(tf.stack([tf.reduce_all(tf.math.is_finite(v)) for v in tracked]))

  def checkpoint(self):
    return tf.train.Checkpoint(global_step=self.global_step, params=self.params,
                               ema=self.averages)


class _Steps(keras.callbacks.Callback):
  """After each step: the NaN check, the moving averages, the checkpoint when one is due,
  and the stop at max_steps or on a signal (after saving)."""

  def __init__(self, config, state, manager, stop_requested):
    super().__init__()
    self.config, self.state, self.manager = config, state, manager
    self.stop_requested = stop_requested
    self.stopped_at = None

  def on_train_batch_end(self, batch, logs=None):
    step = int(self.state.global_step.numpy())  # steps done
    loss = (logs or {}).get("loss")
    if loss is not None and not tf.math.is_finite(float(loss)):
      raise errors.NonFiniteLoss(step - 1, tf.train.latest_checkpoint(self.config.train_dir))
    self.state.apply_ema()
    stopping = bool(self.stop_requested) and step < self.config.max_steps
    if (step % self.config.save_checkpoint_steps == 0 or step >= self.config.max_steps
        or stopping):
      if not bool(self.state.all_finite()):
        raise errors.NonFiniteState(step - 1,
                                    tf.train.latest_checkpoint(self.config.train_dir))
      self.manager.save(checkpoint_number=step)
    if stopping:
      self.stopped_at = step
    if stopping or step >= self.config.max_steps:
      self.model.stop_training = True


class _TensorBoard(keras.callbacks.TensorBoard):
  """Keras's TensorBoard callback, with batch summaries numbered from the restored step.

  Keras counts batches from 0 in every process, so a resumed run would write its losses over
  the first run's steps; this starts the count at the optimizer's restored step count.
  """

  def __init__(self, start_step, **kwargs):
    super().__init__(**kwargs)
    self.start_step = start_step

  def on_train_begin(self, logs=None):
    super().on_train_begin(logs)
    self._global_train_batch = self.start_step  # pylint: disable=protected-access


def fit(config, strategy, callbacks=()):
  """Trains with model.fit under `strategy`; returns the final step count. `callbacks` go
  to fit after the loop's own (the benchmark's clock is one). Raises errors.Stopped after
  saving on SIGTERM or Ctrl-C."""
  with ownership.own_run(config, strategy.num_replicas_in_sync):  # one run per train_dir
    return _fit(config, strategy, callbacks)


def _fit(config, strategy, extra_callbacks):
  n = strategy.num_replicas_in_sync
  net = keras_model.build(
      strategy, seed=config.seed, hparams=config.hparams,
      decay_steps=config.steps_between_decays(n),
      compute_dtype=precision.compute_dtype(config.precision).name)
  state = State(net, config.hparams)
  resume_from, _ = checkpoints.recover(config.train_dir, repair=True)
  manager = tf.train.CheckpointManager(state.checkpoint(), config.train_dir,
                                       max_to_keep=config.max_checkpoints_to_keep)
  start = loop.restore(config, state, resume_from)  # the same resume as strategies.train
  if start >= config.max_steps:
    logging.info("Step %d already reached --max_steps=%d; nothing to do", start,
                 config.max_steps)
    return start
  source = input_pipeline.load_source(config.dataset, "train", seed=config.seed,
                                      data_dir=config.data_dir, download=config.download)
  dataset = input_pipeline.train_dataset(source, seed=config.seed,
                                         global_batch_size=config.global_batch_size(n),
                                         start_step=start)
  every = config.save_checkpoint_steps
  logging.info("Keras fit of %s on %d replica(s) %s, global batch %d, from step %d",
               config.dataset, n, strategy.extended.worker_devices,
               config.global_batch_size(n), start)
  board = _TensorBoard(start, log_dir=config.train_dir, update_freq=config.save_summaries_steps)
  with signals.stop_on_signals() as stop_requested:
    steps = _Steps(config, state, manager, stop_requested)
    try:
      # Epochs of `every` steps, enough of them to reach max_steps; _Steps ends the last one
      # at max_steps (the stream starts at `start`, wherever that falls in an epoch).
      net.fit(dataset, initial_epoch=start // every, epochs=-(-config.max_steps // every),
              steps_per_epoch=every, callbacks=[steps, board, *extra_callbacks], verbose=1,
              shuffle=False)
    except BaseException:
      # fit skips on_train_end when a callback raises, and the TensorBoard callback would
      # leave tf.summary's recording state switched to its own: in this process nothing
      # summarised afterwards would be written. Its on_train_end restores that state.
      # Unless the writer never opened (a full disk): then there is nothing to restore.
      if board._prev_summary_state:  # pylint: disable=protected-access
        board.on_train_end()
      raise
  if steps.stopped_at is not None:
    raise errors.stopped(steps.stopped_at,
                         os.path.join(config.train_dir, f"ckpt-{steps.stopped_at}"),
                         stop_requested.signal, config.preemption_exit_code)
  step = int(state.global_step.numpy())
  logging.info("Done: step %d, checkpoint %s", step, tf.train.latest_checkpoint(config.train_dir))
  return step
