"""The TF2 training loop: resume, distributed input, logging, summaries, checkpoints.

`run(config, devices, strategy_name)` trains until the global step reaches config.max_steps.
It resumes from the newest checkpoint in config.train_dir (the original deleted train_dir; we
never lose a run), feeds the shared input stream from the resumed step on, prints the
original's line every log_frequency steps, writes TensorBoard summaries every
save_summaries_steps and checkpoints every save_checkpoint_steps and at the end.

Checkpoints are written by tf.train.CheckpointManager: data files first, then the `checkpoint`
index is replaced atomically, so a run killed at any moment (SIGKILL included) restarts from
the last complete checkpoint.
"""

import os
import shutil
import tempfile

from absl import logging
import tensorflow as tf

from cifar10 import checkpoints
from cifar10 import errors
from cifar10 import input_pipeline
from cifar10 import progress
from cifar10 import schedule
from cifar10 import signals
from strategies import coordinator_loop
from strategies import distribute
from strategies.trainer import Trainer


def restore_latest(checkpoint, train_dir):
  """Restores the newest checkpoint of train_dir, if any; returns its path or None."""
  path = tf.train.latest_checkpoint(train_dir)
  if path is None:
    return None
  try:
    checkpoint.restore(path).assert_existing_objects_matched()
  except Exception as e:  # pylint: disable=broad-except  # TF raises many kinds here
    raise errors.cannot_resume(path, e) from None
  return path


def build_trainer(config, strategy):
  n = strategy.num_replicas_in_sync
  return Trainer(
      strategy, seed=config.seed, global_batch_size=config.batch_size * n,
      decay_steps=schedule.decay_steps(config.batch_size, n, config.decay_steps_per_global_batch),
      learning_rate=config.learning_rate,
      compute_dtype=tf.float16 if config.use_fp16 else tf.float32, ema_reads=config.ema_reads,
      summary_outputs=not isinstance(strategy, tf.distribute.ParameterServerStrategy))


def run(config, devices, strategy_name="mirrored", peer_timeout_secs=None,
        partition_min_bytes=0):
  """Trains; returns the final global step. Raises UsageError on bad data or a NaN loss."""
  strategy = distribute.get_strategy(strategy_name, devices, peer_timeout_secs,
                                     partition_min_bytes)
  chief = distribute.is_chief()
  # Every worker saves (MultiWorkerMirroredStrategy's save is collective), the chief into
  # train_dir and the others into throw-away folders; all restore from train_dir.
  save_dir = config.train_dir if chief else tempfile.mkdtemp(prefix="cifar10-worker-")
  try:
    return _train(config, strategy, save_dir, chief)
  finally:
    if not chief:
      shutil.rmtree(save_dir, ignore_errors=True)


def _train(config, strategy, save_dir, chief):
  n = strategy.num_replicas_in_sync
  devices = strategy.extended.worker_devices
  trainer = build_trainer(config, strategy)
  for name, shards in trainer.partitions.items():
    logging.info("%s is partitioned into %d shards: %s", name, shards,
                 ", ".join(s.device for s in trainer.params[name].variables))
  checkpoint = trainer.checkpoint()
  manager = tf.train.CheckpointManager(checkpoint, save_dir,
                                       max_to_keep=config.max_checkpoints_to_keep)
  resumed = restore_latest(checkpoint, config.train_dir)
  if resumed:
    logging.info("Resumed from %s at step %d", resumed, trainer.global_step.numpy())
  elif config.init_from:
    state = checkpoints.read(config.init_from)
    for name, value in state.weights.items():
      trainer.params[name].assign(value)
      trainer.averages[name].assign(state.averages[name])
    trainer.global_step.assign(state.global_step)
    logging.info("Initialized from %s at step %d", config.init_from, state.global_step)
  start = int(trainer.global_step.numpy())
  if start >= config.max_steps:
    logging.info("Step %d already reached --max_steps=%d; nothing to do", start,
                 config.max_steps)
    return start
  logging.info("Training %s on %d replica(s) %s, global batch %d, decay every %d steps",
               config.dataset, n, devices, config.batch_size * n, trainer.decay_steps)

  source = input_pipeline.load_source(config.dataset, "train", seed=config.seed,
                                      data_dir=config.data_dir, download=config.download)
  if isinstance(strategy, tf.distribute.ParameterServerStrategy):
    return coordinator_loop.run(config, strategy, trainer, manager, start, source)
  workers = distribute.worker_identity()[2]
  if workers == 1:
    dataset = input_pipeline.train_dataset(source, seed=config.seed,
                                           global_batch_size=config.batch_size * n,
                                           start_step=start)
    iterator = iter(strategy.experimental_distribute_dataset(dataset))
  else:
    # One pipeline per worker, each making only its rows of the global batch.
    iterator = iter(strategy.distribute_datasets_from_function(
        lambda ctx: input_pipeline.train_dataset(
            source, seed=config.seed, global_batch_size=config.batch_size * n,
            start_step=start, shard=(ctx.input_pipeline_id, ctx.num_input_pipelines))))
  writer = (tf.summary.create_file_writer(config.train_dir) if chief
            else tf.summary.create_noop_writer())

  logger = progress.StepLogger(start, config.max_steps, config.batch_size * n,
                               config.log_frequency)
  with writer.as_default(), signals.stop_on_sigterm() as stop_requested:
    for step in range(start, config.max_steps):
      try:
        loss, lr, stopping, record = trainer.train_step(iterator, bool(stop_requested))
      except tf.errors.InvalidArgumentError as e:
        if "loss is not finite" not in str(e):
          raise
        raise errors.nan_loss(step, tf.train.latest_checkpoint(config.train_dir)) from None
      if chief and step % config.save_summaries_steps == 0:
        trainer.write_summaries(step, loss, lr, record)
      logger.after_step(step, lambda: loss)
      done = step + 1
      # Every worker sees the same `stopping` at the same step, so all of them take part in
      # the (collective, under multi_worker_mirrored) save below.
      stopping = bool(stopping) and done < config.max_steps
      if done % config.save_checkpoint_steps == 0 or done == config.max_steps or stopping:
        manager.save(checkpoint_number=done)
      if stopping:
        writer.flush()
        raise errors.stopped(done, os.path.join(config.train_dir, f"ckpt-{done}"))
  writer.flush()
  logging.info("Done: step %d, checkpoint %s", config.max_steps,
               tf.train.latest_checkpoint(config.train_dir))
  return config.max_steps
