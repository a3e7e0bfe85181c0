"""The TF2 training loop under a synchronous strategy, driven from outside.

  strategy = strategies.devices.get_strategy("mirrored", devices)   # the entry point's job
  strategies.loop.run(config, strategy)                            # -> the final global step

`run` trains until the global step reaches config.max_steps under MirroredStrategy,
OneDeviceStrategy or MultiWorkerMirroredStrategy (ParameterServerStrategy has its own driver,
strategies.cluster_loop, over the same step and state). It resumes from the newest checkpoint
in config.train_dir (the original deleted train_dir; we never lose a run), or starts from
--init_from, feeds the shared input stream from the resumed step on, prints the original's
line every log_frequency steps, writes summaries every save_summaries_steps and checkpoints
every save_checkpoint_steps, at the end and on SIGTERM.

Checkpoints are written by tf.train.CheckpointManager: data files first, then the `checkpoint`
index is replaced atomically, so a run killed at any moment (SIGKILL included) restarts from
the last complete checkpoint.
"""

import os
import shutil

from absl import logging
import tensorflow as tf

from cifar10 import checkpoints
from cifar10 import errors
from cifar10 import input_pipeline
from cifar10 import precision
from harness import ownership
from harness import profiling
from harness import progress
from harness import signals
from strategies.step import Trainer

# Prefix of a non-chief worker's scratch folder in train_dir (its task id follows).
WORKER_SCRATCH = ".worker-"


# ---------------------------------------------------------------------------- Model & state

def build_trainer(config, strategy, summary_outputs=True, jit_compile=False):
  """The step and the state of `config`'s run, created under `strategy`."""
  n = strategy.num_replicas_in_sync
  return Trainer(
      strategy, seed=config.seed, global_batch_size=config.global_batch_size(n),
      decay_steps=config.steps_between_decays(n),
      hparams=config.hparams, compute_dtype=precision.compute_dtype(config.precision),
      loss_scale=config.scale,
      ema_reads=config.ema_reads, summary_outputs=summary_outputs, jit_compile=jit_compile)


def restore(config, trainer, path):
  """Resumes from checkpoint `path` of train_dir (see checkpoints.recover), or starts from
  --init_from, or from the seed's weights; returns the global step to start at."""
  if path is not None:
    try:
      trainer.checkpoint().restore(path).assert_existing_objects_matched()
    except Exception as e:  # pylint: disable=broad-except  # TF raises many kinds here
      raise errors.cannot_resume(path, e) from None
    logging.info("Resumed from %s at step %d", path, trainer.global_step.numpy())
  elif config.init_from:
    state = checkpoints.read(config.init_from)
    for name, value in state.weights.items():
      trainer.params[name].assign(value)
      trainer.averages[name].assign(state.averages[name])
    trainer.global_step.assign(state.global_step)
    logging.info("Initialized from %s at step %d", config.init_from, state.global_step)
  return int(trainer.global_step.numpy())


def last_checkpoint(config):
  return tf.train.latest_checkpoint(config.train_dir)


# ---------------------------------------------------------------------------- Input

def distributed_input(config, strategy, source, start):
  """An iterator of distributed global batches of the shared stream, from step `start`."""
  n = strategy.num_replicas_in_sync
  replica_devices = strategy.extended.worker_devices
  workers = n // len(replica_devices)
  if (workers == 1 and isinstance(strategy, tf.distribute.MirroredStrategy)
      and all("CPU" in d.upper() for d in replica_devices)):
    # Replicas on this host's CPUs: one pipeline per replica, each making its rows of the
    # global batch, read where it is made (MirroredStrategy only has this mode). The default
    # (one pipeline, its batches split and sent through a MultiDeviceIterator) costs a copy
    # per replica and stalls up to 3.7 s when the iterator is deleted mid-prefetch
    # (measured; BENCHMARKS.md).
    options = tf.distribute.InputOptions(
        experimental_replication_mode=tf.distribute.InputReplicationMode.PER_REPLICA,
        experimental_fetch_to_device=False)
    return iter(strategy.distribute_datasets_from_function(
        lambda ctx: input_pipeline.train_dataset(
            source, seed=config.seed, global_batch_size=config.global_batch_size(n),
            start_step=start, shard=(ctx.input_pipeline_id, ctx.num_input_pipelines)),
        options))
  if workers == 1:
    dataset = input_pipeline.train_dataset(source, seed=config.seed,
                                           global_batch_size=config.global_batch_size(n),
                                           start_step=start)
    return iter(strategy.experimental_distribute_dataset(dataset))
  # One pipeline per worker, each making only its rows of the global batch.
  return iter(strategy.distribute_datasets_from_function(
      lambda ctx: input_pipeline.train_dataset(
          source, seed=config.seed, global_batch_size=config.global_batch_size(n),
          start_step=start, shard=(ctx.input_pipeline_id, ctx.num_input_pipelines))))


# ---------------------------------------------------------------------------- Train loop

def call_length(step, config, steps_per_loop):
  """How many steps the call starting at 0-based `step` runs: at most steps_per_loop, and no
  more than lets every step that logs be the first or last step of a call, every step that
  writes summaries a call of its own, and every checkpoint come after a call's last step.
  Log lines, summaries and checkpoints are then those of one step per call."""
  if step % config.save_summaries_steps == 0:
    return 1  # its summaries hold the weights after this step, so it runs alone
  k = min(steps_per_loop, config.max_steps - step,
          config.save_checkpoint_steps - step % config.save_checkpoint_steps)
  for every in (config.log_frequency, config.save_summaries_steps):
    # No multiple of `every` strictly inside the call (the call may end on one).
    k = min(k, every - step % every if step % every else every)
  for edge in (config.profile_steps or ())[:1] + tuple(s + 1 for s in
                                                        (config.profile_steps or ())[1:]):
    if step < edge:  # the profile starts and ends between calls
      k = min(k, edge - step)
  return max(k, 1)


def run(config, strategy, dataset=None, on_step=None, steps_per_loop=1, jit_compile=False):
  """Trains; returns the final global step.

  dataset: the examples to train on (an input_pipeline.Source); default: config.dataset.
  on_step: called as on_step(step, loss, learning_rate) after each step (0-based step; the
    loss and rate of that step, as tensors), e.g. by the benchmark's clock; with
    steps_per_loop > 1 after the first and the last step of each call.
  steps_per_loop: steps per call of the compiled function (--steps_per_loop): no host
    round trip between them. The same weights, bit for bit, log lines, summaries and
    checkpoints as one step per call (see call_length); a SIGTERM stops after the call.
  jit_compile: XLA compiles each replica's forward and backward pass (--jit_compile); outside
    the bit-equality contract (XLA fuses and reorders float arithmetic).
  Raises UsageError on bad data, errors.NonFiniteLoss on a NaN/Inf loss (nothing of that
  step applied or saved) and errors.Stopped after saving on SIGTERM.
  """
  # Every worker saves (MultiWorkerMirroredStrategy's save is collective), the chief into
  # train_dir and the others into a scratch folder of their own there; all restore from
  # train_dir. The scratch folder has a fixed name, so a worker restarted after a SIGKILL
  # removes what its predecessor left (the temp dir would keep it forever).
  chief = strategy.extended.should_checkpoint
  if chief:
    with ownership.own_run(config, strategy.num_replicas_in_sync):  # one run per train_dir
      return _train(config, strategy, dataset, on_step, config.train_dir, chief,
                    steps_per_loop, jit_compile)
  save_dir = os.path.join(config.train_dir,
                          f"{WORKER_SCRATCH}{strategy.cluster_resolver.task_id}")
  shutil.rmtree(save_dir, ignore_errors=True)
  try:
    return _train(config, strategy, dataset, on_step, save_dir, chief, steps_per_loop,
                  jit_compile)
  finally:
    shutil.rmtree(save_dir, ignore_errors=True)


def _train(config, strategy, dataset, on_step, save_dir, chief, steps_per_loop, jit_compile):
  n = strategy.num_replicas_in_sync
  trainer = build_trainer(config, strategy, jit_compile=jit_compile)
  resume_from, _ = checkpoints.recover(config.train_dir, repair=chief)
  # After recover: the manager counts the checkpoints the index lists against max_to_keep.
  manager = tf.train.CheckpointManager(trainer.checkpoint(), save_dir,
                                       max_to_keep=config.max_checkpoints_to_keep)
  start = restore(config, trainer, resume_from)
  if start >= config.max_steps:
    logging.info("Step %d already reached --max_steps=%d; nothing to do", start,
                 config.max_steps)
    return start
  logging.info("Training %s on %d replica(s) %s, global batch %d, decay every %d steps",
               config.dataset, n, strategy.extended.worker_devices,
               config.global_batch_size(n), trainer.decay_steps)
  source = dataset or input_pipeline.load_source(
      config.dataset, "train", seed=config.seed, data_dir=config.data_dir,
      download=config.download)
  iterator = distributed_input(config, strategy, source, start)
  writer = (tf.summary.create_file_writer(config.train_dir) if chief
            else tf.summary.create_noop_writer())
  logger = progress.StepLogger(start, config.max_steps, config.global_batch_size(n),
                               config.log_frequency)
  profile = profiling.Window(config.train_dir, config.profile_steps if chief else None)
  with writer.as_default(), signals.stop_on_signals() as stop_requested, profile:
    step = start
    while step < config.max_steps:
      k = call_length(step, config, steps_per_loop)
      profile.before(step)
      # With k > 1 the failing step is the first not applied: the global step after the call.
      failed_at = step if k == 1 else lambda: int(trainer.global_step.numpy())
      summarise = chief and step % config.save_summaries_steps == 0  # then k is 1
      with errors.loss_checked(failed_at, lambda: last_checkpoint(config)):
        loss, lr, stopping, record, last_loss, last_lr = trainer.train_steps(
            iterator, k, bool(stop_requested), record=summarise)
      if summarise:
        trainer.write_summaries(step, loss, lr, record)
      logger.after_step(step, lambda: loss)
      if k > 1:
        logger.after_step(step + k - 1, lambda: last_loss)
      done = step + k
      # Every worker sees the same `stopping` at the same step, so all of them take part in
      # the (collective, under multi_worker_mirrored) save below.
      stopping = bool(stopping) and done < config.max_steps
      if done % config.save_checkpoint_steps == 0 or done == config.max_steps or stopping:
        if not bool(trainer.all_finite()):
          raise errors.NonFiniteState(done - 1, last_checkpoint(config))
        manager.save(checkpoint_number=done)
      profile.after(done - 1)
      if on_step:
        on_step(step, loss, lr)
        if k > 1:
          on_step(done - 1, last_loss, last_lr)
      if stopping:
        writer.flush()
        raise errors.stopped(done, os.path.join(config.train_dir, f"ckpt-{done}"),
                             stop_requested.signal, config.preemption_exit_code)
      step = done
  writer.flush()
  logging.info("Done: step %d, checkpoint %s", config.max_steps, last_checkpoint(config))
  return config.max_steps
