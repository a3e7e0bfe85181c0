"""The training loop under ParameterServerStrategy: the chief schedules steps on the workers.

  strategy = strategies.devices.get_strategy("parameter_server", devices)  # on the chief
  strategies.cluster_loop.run(config, strategy)                          # -> the final step

The workers and ps tasks only serve (strategies.devices.serve); the entry point picks which.
The step and state are strategies.loop's (the same compiled `Trainer` step, the same resume
and --init_from); only the driver differs. The coordinator schedules exactly max_steps - start steps; if a worker dies,
ClusterCoordinator runs its pending steps on the others and the run still reaches --max_steps.
ClusterCoordinator runs a step at least once: a step the dying worker had in flight may
already have updated the variables (its increment included) and then runs again elsewhere.
So the coordinator, which knows how many scheduled steps completed, owns the step count: at
every join (before each log line and checkpoint) it sets the global step to that number, and
logs any surplus update. Each worker reads its own shard of the shared stream (worker k of
K: rows k*G/K .. of each G = K * batch_size). Updates are asynchronous: every worker applies
its gradient to the variables on the ps tasks when it is done, so runs with several workers
depend on timing and are never bit-equal to a synchronous run. Summaries (loss, learning rate,
weight histograms) are written by the chief from the values its steps return and the
variables on the ps tasks.
"""

import os

from absl import logging
import tensorflow as tf

from cifar10 import checkpoints
from cifar10 import errors
from cifar10 import input_pipeline
from harness import ownership
from harness import progress
from harness import signals
from strategies import loop


def run(config, strategy, dataset=None):
  """Schedules the steps up to config.max_steps; returns the final global step.

  dataset: the examples to train on (an input_pipeline.Source); default: config.dataset.
  """
  workers = strategy.extended._num_workers  # pylint: disable=protected-access
  with ownership.own_run(config, workers):  # one run per train_dir
    return _run(config, strategy, dataset)


def _run(config, strategy, dataset):
  trainer = loop.build_trainer(config, strategy, summary_outputs=False)
  for name, shards in trainer.partitions.items():
    logging.info("%s is partitioned into %d shards: %s", name, shards,
                 ", ".join(s.device for s in trainer.params[name].variables))
  resume_from, _ = checkpoints.recover(config.train_dir)
  manager = tf.train.CheckpointManager(trainer.checkpoint(), config.train_dir,
                                       max_to_keep=config.max_checkpoints_to_keep)
  start = loop.restore(config, trainer, resume_from)
  if start >= config.max_steps:
    logging.info("Step %d already reached --max_steps=%d; nothing to do", start,
                 config.max_steps)
    return start
  coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
  workers = strategy.extended._num_workers  # pylint: disable=protected-access
  global_batch = config.global_batch_size(workers)
  logging.info("Training %s on %d worker(s), global batch %d, decay every %d steps",
               config.dataset, workers, global_batch, trainer.decay_steps)
  source = dataset or input_pipeline.load_source(
      config.dataset, "train", seed=config.seed, data_dir=config.data_dir,
      download=config.download)

  def dataset_fn(_):
    index = tf.distribute.coordinator.experimental_get_current_worker_index()
    return input_pipeline.train_dataset(source, seed=config.seed,
                                        global_batch_size=global_batch,
                                        start_step=start // workers, shard=(index, workers))

  @tf.function
  def per_worker_dataset():
    return strategy.distribute_datasets_from_function(dataset_fn)

  iterator = iter(coordinator.create_per_worker_dataset(per_worker_dataset))
  writer = tf.summary.create_file_writer(config.train_dir)
  logger = progress.StepLogger(start, config.max_steps, config.batch_size,
                               config.log_frequency)
  no_stop = tf.constant(0.0)  # the chief alone handles SIGTERM: it stops scheduling
  with signals.stop_on_signals() as stop_requested:
    for step in range(start, config.max_steps):
      result = coordinator.schedule(trainer.step_fn, args=(iterator, no_stop))
      done = step + 1
      stopping = bool(stop_requested) and done < config.max_steps
      _after_schedule(config, trainer, manager, coordinator, result, writer, logger, step,
                      stopping)
      if stopping:
        writer.flush()
        raise errors.stopped(done, os.path.join(config.train_dir, f"ckpt-{done}"),
                             stop_requested.signal, config.preemption_exit_code)
  writer.flush()
  logging.info("Done: step %d, checkpoint %s", int(trainer.global_step.numpy()),
               loop.last_checkpoint(config))
  return int(trainer.global_step.numpy())


def _after_schedule(config, trainer, manager, coordinator, result, writer, logger, step,
                    stopping):
  """Joins the workers when a log line, summary or checkpoint is due after `step`."""
  done = step + 1
  due_log = step % config.log_frequency == 0 or done == config.max_steps
  due_save = done % config.save_checkpoint_steps == 0 or done == config.max_steps or stopping
  due_summary = step % config.save_summaries_steps == 0
  if not (due_log or due_save or due_summary):
    return
  with errors.loss_checked(step, lambda: loop.last_checkpoint(config)):
    coordinator.join()
    loss, lr, _, _ = result.fetch()
  surplus = int(trainer.global_step.numpy()) - done
  if surplus:
    # Nothing is in flight after join(), so this write races with no step.
    logging.warning("%d step(s) of a lost worker were applied and then run again; the "
                    "global step counts each scheduled step once", surplus)
    trainer.global_step.assign(done)
  logger.after_step(step, lambda: loss)
  if due_summary:
    with writer.as_default():
      tf.summary.scalar("loss", loss, step=step)
      tf.summary.scalar("learning_rate", lr, step=step)
      # The weights are read from the ps tasks (shards joined); the gradients stay on the
      # workers, so unlike the synchronous strategies there are no gradient histograms.
      for name, variable in trainer.params.items():
        tf.summary.histogram(name + "/values", tf.convert_to_tensor(variable), step=step)
  if due_save:
    if not bool(trainer.all_finite()):
      raise errors.NonFiniteState(step, loop.last_checkpoint(config))
    manager.save(checkpoint_number=done)
