"""The Keras `fit` driver behind examples.keras_fit: resume, callbacks, NaN stop.

`fit(config, strategy)` builds examples.keras_model under the strategy it is handed, loads the newest
complete `keras-EPOCH.weights.h5` of config.train_dir (weights and the optimizer's step
count), starts the shared input stream at that step and fits epochs of
config.save_checkpoint_steps steps up to config.max_steps.
"""

import glob
import os
import re

from absl import logging
import keras
import tensorflow as tf

from cifar10 import errors
from cifar10 import input_pipeline
from cifar10 import precision
from examples import keras_model
from harness import ownership

PATTERN = "keras-{epoch:04d}.weights.h5"


def checkpoint_files(train_dir):
  """keras_fit checkpoints of train_dir, newest first."""
  files = glob.glob(os.path.join(train_dir, "keras-*.weights.h5"))
  number = lambda f: int(re.search(r"keras-(\d+)\.weights\.h5$", f)[1])
  return sorted(files, key=number, reverse=True)


def restore_latest(net, train_dir):
  """Loads the newest checkpoint that loads; returns (path, step) or (None, 0).

  A file cut short by a kill during the save does not load: the one before it is used.
  """
  with net.distribute_strategy.scope():
    net.optimizer.build(net.trainable_variables)  # its step count is in the file too
  for path in checkpoint_files(train_dir):
    try:
      net.load_weights(path)
    except Exception as e:  # pylint: disable=broad-except  # h5py and Keras raise many kinds
      logging.warning("Skipping %s, which does not load: %s", path, str(e).splitlines()[0])
      continue
    return path, int(net.optimizer.iterations.numpy())
  return None, 0


class _StopOnNaN(keras.callbacks.Callback):
  """Raises the trainers' one-line NaN errors before any checkpoint callback runs: for a
  non-finite loss after each step, for non-finite weights before each save."""

  def __init__(self, train_dir):
    super().__init__()
    self.train_dir = train_dir

  def on_train_batch_end(self, batch, logs=None):
    loss = (logs or {}).get("loss")
    if loss is not None and not tf.math.is_finite(float(loss)):
      step = int(self.model.optimizer.iterations.numpy()) - 1
      newest = checkpoint_files(self.train_dir)
      raise errors.NonFiniteLoss(step, newest[0] if newest else None)

  def on_epoch_end(self, epoch, logs=None):  # runs before ModelCheckpoint's, listed after it
    if not all(bool(tf.reduce_all(tf.math.is_finite(w))) for w in self.model.weights):
      step = int(self.model.optimizer.iterations.numpy()) - 1
      newest = checkpoint_files(self.train_dir)
      raise errors.NonFiniteState(step, newest[0] if newest else None)


class _KeepNewest(keras.callbacks.Callback):
  """Deletes all but the newest `keep` checkpoints after each save (as CheckpointManager)."""

  def __init__(self, train_dir, keep):
    super().__init__()
    self.train_dir, self.keep = train_dir, keep

  def on_epoch_end(self, epoch, logs=None):
    for path in checkpoint_files(self.train_dir)[self.keep:]:
      os.remove(path)


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
  to fit after the loop's own (the benchmark's clock is one)."""
  with ownership.own_run(config, strategy.num_replicas_in_sync):  # one run per train_dir
    return _fit(config, strategy, callbacks)


def _fit(config, strategy, extra_callbacks):
  n = strategy.num_replicas_in_sync
  net = keras_model.build(
      strategy, seed=config.seed, hparams=config.hparams,
      decay_steps=config.steps_between_decays(n),
      compute_dtype=precision.compute_dtype(config.precision).name)
  path, start = restore_latest(net, config.train_dir)
  if path:
    logging.info("Resumed from %s at step %d", path, start)
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
  os.makedirs(config.train_dir, exist_ok=True)
  board = _TensorBoard(start, log_dir=config.train_dir, update_freq=config.save_summaries_steps)
  callbacks = [
      _StopOnNaN(config.train_dir),
      keras.callbacks.ModelCheckpoint(os.path.join(config.train_dir, PATTERN),
                                      save_weights_only=True),
      _KeepNewest(config.train_dir, config.max_checkpoints_to_keep),
      board,
  ] + list(extra_callbacks)
  try:
    net.fit(dataset, initial_epoch=start // every, epochs=config.max_steps // every,
            steps_per_epoch=every, callbacks=callbacks, verbose=1, shuffle=False)
  except BaseException:
    # fit skips on_train_end when a callback raises, and the TensorBoard callback would
    # leave tf.summary's recording state switched to its own: in this process nothing
    # summarised afterwards would be written. Its on_train_end restores that state.
    # Unless the writer never opened (a full disk): then there is nothing to restore.
    if board._prev_summary_state:  # pylint: disable=protected-access
      board.on_train_end()
    raise
  step = int(net.optimizer.iterations.numpy())
  logging.info("Done: step %d, checkpoint %s", step, checkpoint_files(config.train_dir)[0])
  return step
