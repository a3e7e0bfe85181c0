"""The training loop under ParameterServerStrategy: the chief schedules steps on the workers.

  strategy = strategies.devices.get_strategy("parameter_server", devices)  # on the chief
  strategies.cluster_loop.train(config, strategy)                          # -> the final step

The workers and ps tasks only serve (strategies.devices.serve); the entry point picks which.
The step and state are strategies.loop's (the same compiled `Trainer` step, the same resume
and --init_from), and harness.control.driver decides the rest as for every loop; this backend only
schedules. The coordinator schedules exactly max_steps - start steps; if a worker dies,
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

from absl import logging
import tensorflow as tf

from cifar10 import data_sources
from cifar10 import input_pipeline
from cifar10 import scores
from harness.control import driver
from strategies import histograms
from strategies import loop


class Backend(loop.CheckpointedBackend):
  """The chief's side of a parameter-server job for harness.control.driver. `run` schedules one step
  and returns at once; with `sync` (a log line, summary or save is due) it joins the workers
  first and fetches that step's loss and rate."""

  def __init__(self, config, strategy, dataset=None):
    self.config, self.strategy, self.dataset = config, strategy, dataset
    self.workers = strategy.extended._num_workers  # pylint: disable=protected-access
    self.state = loop.build_trainer(config, strategy, summary_outputs=False)  # a Trainer
    self.save_dir = config.train_dir
    for name, shards in self.state.partitions.items():
      logging.info("%s is partitioned into %d shards: %s", name, shards,
                   ", ".join(s.device for s in self.state.params[name].variables))
    self.manager = self.coordinator = self.iterator = self.writer = None
    self.no_stop = tf.constant(0.0)  # the chief alone handles SIGTERM: it stops scheduling

  def start(self, step):
    config, strategy, workers = self.config, self.strategy, self.workers
    self.coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    global_batch = config.global_batch_size(workers)
    logging.info("Training %s on %d worker(s), global batch %d, decay every %d steps",
                 config.dataset, workers, global_batch, self.state.settings.decay_steps)
    source = self.dataset or data_sources.load_source(
        config.dataset, "train", seed=config.seed, data_dir=config.data_dir,
        download=config.download)

    def dataset_fn(_):
      index = tf.distribute.coordinator.experimental_get_current_worker_index()
      return input_pipeline.train_dataset(source, seed=config.seed,
                                          global_batch_size=global_batch,
                                          start_step=step // workers, shard=(index, workers))

    @tf.function(autograph=False)
    def per_worker_dataset():
      return strategy.distribute_datasets_from_function(dataset_fn)

    self.iterator = iter(self.coordinator.create_per_worker_dataset(per_worker_dataset))
    self.writer = tf.summary.create_file_writer(config.train_dir)

  def train(self, call):
    result = self.coordinator.schedule(self.state.step_fn, args=(self.iterator, self.no_stop))
    if not call.sync:
      return driver.Steps(None, None)
    self.coordinator.join()
    loss, lr, _, record, hits = result.fetch()
    next_step = call.step + 1
    surplus = self.global_step() - next_step
    if surplus:
      # Nothing is in flight after join(), so this write races with no step.
      logging.warning("%d step(s) of a lost worker were applied and then run again; the "
                      "global step counts each scheduled step once", surplus)
      self.state.global_step.assign(next_step)
    return driver.Steps(loss, lr, loss, lr, record=record, precision=hits, last_precision=hits)

  def write_summaries(self, step, steps):
    with self.writer.as_default():
      tf.summary.scalar(scores.LOSS_TAG, steps.loss, step=step)
      tf.summary.scalar(scores.PRECISION_TAG, steps.record["precision"], step=step)
      tf.summary.scalar("learning_rate", steps.lr, step=step)
      # The weights are read from the ps tasks (shards joined); the gradients stay on the
      # workers, so unlike the synchronous strategies there are no gradient histograms.
      for name, variable in self.state.params.items():
        histograms.histogram(name + "/values", tf.convert_to_tensor(variable), step=step)

  def close(self):
    if self.writer is not None:
      self.writer.close()


def train(config, strategy, dataset=None):
  """Schedules the steps up to config.max_steps; returns the final global step.

  dataset: the examples to train on (an data_sources.Source); default: config.dataset.
  """
  backend = Backend(config, strategy, dataset)
  return driver.train(config, backend, replicas=backend.workers,
                      global_batch=config.batch_size)
