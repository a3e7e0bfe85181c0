"""The TF2 training loop under a synchronous strategy: a backend of harness.control.driver.

  strategy = strategies.devices.get_strategy("mirrored", devices)   # the entry point's job
  strategies.loop.train(config, strategy)                          # -> the final global step

`train` trains until the global step reaches config.max_steps under MirroredStrategy,
OneDeviceStrategy or MultiWorkerMirroredStrategy (ParameterServerStrategy has its own
backend, strategies.cluster_loop, over the same step and state). The driver decides resume or
--init_from, log lines, summaries, checkpoints, profiles and stops; `Backend` does them with a
strategies.step.Trainer: restore, run k steps in one call, write a step's summaries, check
finiteness, save with tf.train.CheckpointManager (data files first, then the `checkpoint`
index replaced atomically, so a run killed at any moment restarts from the last complete
checkpoint).
"""

import os

from absl import logging
import tensorflow as tf
from tensorflow.python.eager import context  # pylint: disable=g-direct-tensorflow-import

from cifar10 import checkpoints
from cifar10 import data_sources
from cifar10 import model
from cifar10 import scores
from cifar10 import summaries
from cifar10.step_settings import StepSettings
from harness.control import driver
from harness.control import progress
from harness.control import run_errors
from harness.folders import run_folder
from strategies import histograms
from strategies.inputs import distributed_input
from strategies.step import Trainer

# Prefix of a non-chief worker's scratch folder in train_dir (its task id follows).
WORKER_SCRATCH = ".worker-"


def build_trainer(config, strategy, summary_outputs=True, jit_compile=False):
  """The step and the state of `config`'s run, created under `strategy`."""
  settings = StepSettings.of(config, strategy.num_replicas_in_sync, jit_compile=jit_compile)
  return Trainer(strategy, settings, summary_outputs=summary_outputs)


class CheckpointedBackend(driver.Backend):
  """What the backends over a tf.train.Checkpoint state share (a Trainer, or the Keras path's
  State: `checkpoint()`, `params`, `averages`, `global_step`, `all_finite()`): resume,
  --init_from, the finiteness check, the save and the step. Subclasses set `config`, `state`
  and `save_dir` before the driver calls them."""

  def _manage(self):
    # After the driver's recover: the manager counts the checkpoints the index lists.
    self.manager = tf.train.CheckpointManager(  # pylint: disable=attribute-defined-outside-init
        self.state.checkpoint(), self.save_dir, max_to_keep=self.config.max_checkpoints_to_keep)

  def resume(self, path, keep):  # pylint: disable=unused-argument  # the index keeps them
    self._manage()
    try:
      self._checkpoint_of(path).restore(path).assert_existing_objects_matched()
    except Exception as e:  # pylint: disable=broad-except  # TF raises many kinds here
      raise run_errors.cannot_resume(path, e) from None
    return self.global_step()

  def _checkpoint_of(self, path):
    """The state's checkpoint as `path` holds it: a Trainer's without its loss averages if
    `path` was written before they were checkpointed (they then start from 0, as then)."""
    if not hasattr(self.state, "loss_averages") or checkpoints.loss_average_keys(path):
      return self.state.checkpoint()
    logging.info(checkpoints.NO_LOSS_AVERAGES, path)
    return self.state.checkpoint(loss_averages=False)

  def initialize(self, values):
    """Assigns a checkpoints.State `values` (--init_from, of any trainer) to the weights,
    averages and step (a new run: its loss averages start from 0); None leaves the seed's
    values."""
    self._manage()
    if values is not None:
      for name, value in values.weights.items():
        self.state.params[name].assign(value)
        self.state.averages[name].assign(values.averages[name])
      self.state.global_step.assign(values.global_step)
    return self.global_step()

  def all_finite(self):
    return bool(self.state.all_finite())

  def save(self, step):
    self.manager.save(checkpoint_number=step)
    return os.path.join(self.config.train_dir, f"ckpt-{step}")

  def global_step(self):
    return int(self.state.global_step.numpy())


class Backend(CheckpointedBackend):
  """A synchronous strategy's run for harness.control.driver (see its docstring for the methods)."""

  def __init__(self, config, strategy, dataset=None, jit_compile=False, steps_per_loop=1):
    self.config, self.strategy, self.dataset = config, strategy, dataset
    self.max_steps_per_call = steps_per_loop
    self.n = strategy.num_replicas_in_sync
    # Every worker saves (MultiWorkerMirroredStrategy's save is collective), the chief into
    # train_dir and the others into a scratch folder of their own there; all restore from
    # train_dir. The scratch folder has a fixed name, so a worker restarted after a SIGKILL
    # removes what its predecessor left (the temp dir would keep it forever).
    self.chief = strategy.extended.should_checkpoint
    self.save_dir = config.train_dir
    if not self.chief:
      self.save_dir = os.path.join(config.train_dir,
                                   f"{WORKER_SCRATCH}{strategy.cluster_resolver.task_id}")
      run_folder.remove(self.save_dir)
    # The Trainer: the run's variables (what is checkpointed and checked for finiteness) and
    # the compiled steps over them.
    self.state = build_trainer(config, strategy, jit_compile=jit_compile)
    self.manager = self.iterator = self.writer = None
    self.graph_written = False

  def start(self, step):
    config = self.config
    logging.info("Model: the tutorial's CNN, %s parameters", f"{model.NUM_PARAMETERS:,}")
    logging.info("Training %s on %d replica(s) (%s), global batch %d, decay every %d steps",
                 config.dataset, self.n, progress.device_list(
                     d.rsplit("/device:", 1)[-1] for d in self.strategy.extended.worker_devices),
                 config.global_batch_size(self.n), self.state.settings.decay_steps)
    source = self.dataset or data_sources.load_source(
        config.dataset, "train", seed=config.seed, data_dir=config.data_dir,
        download=config.download)
    self.iterator = distributed_input(config, self.strategy, source, step)
    self.writer = (tf.summary.create_file_writer(config.train_dir) if self.chief
                   else tf.summary.create_noop_writer())

  def train(self, call):
    # The graph of the step, once, from the first call (TensorBoard's Graphs tab; the v1
    # trainer's FileWriter writes its Session's graph): collected while that call runs.
    graph = self.chief and not self.graph_written
    if graph:
      _drop_collected_graphs()
      tf.summary.trace_on(graph=True, profiler=False)
    # The stop flag goes into the step: under MWMS it is agreed by all workers there.
    out = self.state.train_steps(self.iterator, call.k, call.stop, record=call.record)
    if graph:
      with self.writer.as_default():
        tf.summary.trace_export("train_step", step=call.step)
      _stop_collecting_graphs()
      self.graph_written = True
    return driver.Steps(out.loss, out.lr, out.last_loss, out.last_lr, stop=out.stop,
                        record=out.record, ran=int(out.ran) if call.k > 1 else None,
                        precision=out.precision, last_precision=out.last_precision)

  def stop_soon(self):
    self.state.request_stop()

  def write_summaries(self, step, steps):
    """Step `step`'s summaries, eagerly, from what the step returned: loss, learning rate,
    the original's summaries (cifar10.summaries) and the histograms of each weight (after
    the update) and its all-reduced gradient. Eagerly and only on the steps that record:
    written inside the compiled step, the summary ops (under tf.summary.record_if) made its
    tracing and first run ~5 s longer. Histograms through strategies.histograms (the same
    bits as tf.summary.histogram, 5x faster)."""
    record, params = steps.record, self.state.params
    with self.writer.as_default():
      tf.summary.scalar(scores.LOSS_TAG, steps.loss, step=step)
      tf.summary.scalar(scores.PRECISION_TAG, record["precision"], step=step)
      tf.summary.scalar("learning_rate", steps.lr, step=step)
      scalars, distributions = summaries.original(record["activations"], record["terms"],
                                                  record["averages"])
      for tag, value in scalars.items():
        tf.summary.scalar(tag, value, step=step)
      for tag, value in distributions.items():
        histograms.histogram(tag, value, step=step)
      for name, grad in zip(model.VARIABLE_NAMES, record["gradients"]):
        histograms.histogram(name + "/values", params[name], step=step)
        histograms.histogram(name + "/gradients", grad, step=step)

  def close(self):
    if self.writer is not None:
      self.writer.close()
    if not self.chief:
      run_folder.remove(self.save_dir)


def train(config, strategy, dataset=None, on_step=None, steps_per_loop=1, jit_compile=False):
  """Trains; returns the final global step.

  dataset: the examples to train on (an data_sources.Source); default: config.dataset.
  on_step: called as on_step(step, loss, learning_rate) after each step (0-based step; the
    loss and rate of that step, as tensors), e.g. by the benchmark's clock; with
    steps_per_loop > 1 after the first and the last step of each call.
  steps_per_loop: steps per call of the compiled function (--steps_per_loop): no host
    round trip between them. The same weights, bit for bit, log lines, summaries and
    checkpoints as one step per call (harness.control.driver.call_length); a SIGTERM or Ctrl-C
    ends a call after the step in hand.
  jit_compile: XLA compiles each replica's forward and backward pass (--jit_compile); outside
    the bit-equality contract (XLA fuses and reorders float arithmetic).
  Raises UsageError on bad data, run_errors.NonFiniteLoss on a NaN/Inf loss (nothing of that
  step applied or saved) and run_errors.Stopped after saving on SIGTERM.
  """
  backend = Backend(config, strategy, dataset, jit_compile, steps_per_loop)
  return driver.train(config, backend, replicas=backend.n,
                      global_batch=config.global_batch_size(backend.n), chief=backend.chief,
                      on_step=on_step)


def _drop_collected_graphs():
  """Empties what the process's eager context holds for its next trace export: it hands that
  export everything collected since the last one (a graph trace of the user's own, in a
  notebook, left on; or, before _stop_collecting_graphs, this loop's of an earlier run)."""
  context.context().export_run_metadata()


def _stop_collecting_graphs():
  """TensorFlow 2.21's trace_off leaves the graph collection trace_on(graph=True) started
  running ("Disabling run_metadata disables graph collection as well", it says, and does not):
  the context went on keeping the graphs of every function instantiated after the first call,
  for the process's life. Measured in one process (a notebook, harness.command_line.cli.call,
  equivalence.runs): a one-device run after a MirroredStrategy run wrote 52-76 function graphs
  as its step's graph, the other run's 633-node step among them (0.95 MB, against its own
  step's 1 graph, 0.22 MB, in a process of its own)."""
  context.context().disable_graph_collection()
