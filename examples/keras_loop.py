"""The Keras `fit` driver behind examples.keras_fit: the same run as strategies.train, by fit.

`fit(config, strategy)` builds examples.keras_model under the strategy it is handed and fits
the shared input stream up to config.max_steps (any number: an epoch is
config.save_checkpoint_steps steps, and the run stops at max_steps inside its last one).
What strategies.train keeps, it keeps the same way, so the two write the same checkpoints, to
the bit:

- the moving averages of the weights: TensorFlow's ExponentialMovingAverage with the shared
  decay, its step count the optimizer's, applied after each step's update (`--ema_reads
  updated`, the trainers' default);
- checkpoints `ckpt-N` in strategies.train's layout (weights, averages, global step; not its
  loss averages, which only its charts of the original's summaries use) by a
  CheckpointManager, every save_checkpoint_steps steps, at the end and on SIGTERM or Ctrl-C
  (the step finishes, the checkpoint is saved, `stopped:` and --preemption_exit_code), so
  both evaluators and both trainers' --init_from read them;
- the run control of harness.control.driver, as every trainer: resume or --init_from, the progress
  lines, saves, the finiteness check, stops; fit owns the iteration and hands each step to
  the driver from a callback (`Backend.drive`);
- the NaN check of the loss Keras reports (its running mean over the epoch, also what the
  progress line shows): a non-finite loss stops before any save.

Keras's own parts stay Keras's: compile, fit, and the TensorBoard callback for the loss every
save_summaries_steps steps.
"""

from absl import logging
import keras
import tensorflow as tf

from cifar10 import data_sources
from cifar10 import input_pipeline
from cifar10 import precision
from examples import keras_model
from harness.control import driver
from harness.control import progress
from harness.control import run_errors
from strategies import loop


class State:
  """The Keras model's variables in strategies.train's checkpoint layout, and their EMA:
  the parts of a strategies.step.Trainer that strategies.loop.CheckpointedBackend uses."""

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
    return precision.all_finite(list(self.params.values()) + list(self.averages.values()))

  def checkpoint(self):
    return tf.train.Checkpoint(global_step=self.global_step, params=self.params,
                               ema=self.averages)


class _Steps(keras.callbacks.Callback):
  """Hands each of fit's steps to the driver's Control: the NaN check of the loss Keras reports,
  the moving averages, then everything the driver decides (log line, save, stop)."""

  def __init__(self, control, state):
    super().__init__()
    self.control, self.state = control, state

  def on_train_batch_begin(self, batch, logs=None):
    self.control.before(int(self.state.global_step.numpy()))

  def on_train_batch_end(self, batch, logs=None):
    next_step = int(self.state.global_step.numpy())
    loss = (logs or {}).get("loss")  # Keras's running mean over the epoch
    if loss is not None and not tf.math.is_finite(float(loss)):
      raise run_errors.NonFiniteLoss(next_step - 1, driver.last_checkpoint(self.control.config))
    self.state.apply_ema()
    accuracy = (logs or {}).get("accuracy")  # also a running mean, as Keras's bar shows it
    if self.control.after(next_step - 1, 1, driver.Steps(loss, None, loss, None,
                                                         precision=accuracy,
                                                         last_precision=accuracy)) \
        >= self.control.config.max_steps:
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


class Backend(loop.CheckpointedBackend):
  """The Keras model's run for harness.control.driver: fit owns the iteration (`drive`)."""

  def __init__(self, config, strategy, callbacks=()):
    self.config, self.strategy, self.callbacks = config, strategy, list(callbacks)
    self.n = strategy.num_replicas_in_sync
    self.net = keras_model.build(
        strategy, seed=config.seed, hparams=config.hparams,
        decay_steps=config.steps_between_decays(self.n),
        compute_dtype=precision.compute_dtype(config.precision).name)
    self.state = State(self.net, config.hparams)
    self.save_dir = config.train_dir
    self.manager = self.dataset = self.board = None

  def start(self, step):
    config = self.config
    source = data_sources.load_source(config.dataset, "train", seed=config.seed,
                                        data_dir=config.data_dir, download=config.download)
    self.dataset = input_pipeline.train_dataset(
        source, seed=config.seed, global_batch_size=config.global_batch_size(self.n),
        start_step=step)
    logging.info("Keras fit of %s on %d replica(s) (%s), global batch %d, from step %d",
                 config.dataset, self.n, progress.device_list(
                     d.rsplit("/device:", 1)[-1] for d in self.strategy.extended.worker_devices),
                 config.global_batch_size(self.n), step)
    self.board = _TensorBoard(step, log_dir=config.train_dir,
                              update_freq=config.save_summaries_steps)

  def drive(self, control, start):
    every = self.config.save_checkpoint_steps
    try:
      # Epochs of `every` steps, enough of them to reach max_steps; the driver ends the last
      # one at max_steps (the stream starts at `start`, wherever that falls in an epoch).
      # The driver prints the progress lines, so Keras's bar is off.
      self.net.fit(self.dataset, initial_epoch=start // every,
                   epochs=-(-self.config.max_steps // every), steps_per_epoch=every,
                   callbacks=[_Steps(control, self.state), self.board, *self.callbacks],
                   verbose=0, shuffle=False)
    except BaseException:
      # fit skips on_train_end when a callback raises, and the TensorBoard callback would
      # leave tf.summary's recording state switched to its own: in this process nothing
      # summarised afterwards would be written. Its on_train_end restores that state.
      # Unless the writer never opened (a full disk): then there is nothing to restore.
      if self.board._prev_summary_state:  # pylint: disable=protected-access
        self.board.on_train_end()
      raise

  def write_summaries(self, step, steps):
    """Keras's TensorBoard callback writes the loss every save_summaries_steps steps."""


def fit(config, strategy, callbacks=()):
  """Trains with model.fit under `strategy`; returns the final step count. `callbacks` go
  to fit after the loop's own (the benchmark's clock is one). Raises run_errors.Stopped after
  saving on SIGTERM or Ctrl-C."""
  backend = Backend(config, strategy, callbacks)
  return driver.train(config, backend, replicas=backend.n,
                      global_batch=config.global_batch_size(backend.n))
