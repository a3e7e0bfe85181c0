"""The tower trainer's Session loop: a backend of harness.control.driver, as strategies.loop is.

  devices, session_config = compat_v1.devices.setup(device_config)   # the entry point's job
  compat_v1.loop.train(config, devices, session_config)                # -> the final global step

The driver decides resume or --init_from, log lines, summaries, checkpoints, profiles and
stops, exactly as for the TF2 loop; `Backend` does them in a Session. It reads the global
step of the checkpoint it starts from before the graph is built, so the shared input stream
starts at the same example as TF2's would, and saves with tf.compat.v1.train.Saver.
`build` is its graph: every op the loop runs, finalized.
"""

import dataclasses
import os

from absl import logging
import tensorflow as tf

from cifar10 import checkpoints
from cifar10 import devices as device_plan
from cifar10 import model
from cifar10 import precision
from cifar10.step_settings import StepSettings
from compat_v1 import inputs
from compat_v1 import restore
from compat_v1.step import build_train_graph
from compat_v1.step import TrainGraph
from harness.control import driver
from harness.control import progress
from harness.control import run_errors

v1 = tf.compat.v1


@dataclasses.dataclass
class Built:
  """The finalized training graph and what the loop runs in it."""
  graph: tf.Graph
  train: TrainGraph
  input_init: tf.Operation
  feed: dict
  init: tf.Operation
  local_init: tf.Operation
  saver: v1.train.Saver
  restorer: v1.train.Saver  # the saver, or one without the loss averages for an older checkpoint
  writer: v1.summary.FileWriter
  loader: restore.Loader  # assigns the values of an --init_from checkpoint
  all_finite: tf.Tensor  # every weight and moving average finite (checked before each save)


# ---------------------------------------------------------------------------- Graph

def build(config, devices, start, arrays, graph, restores_loss_averages=True):
  """The tower graph of `config` on `devices` in `graph`, its input starting at step `start`.

  arrays: (images, labels) numpy arrays of the training split, or None for synthetic data.
  restores_loss_averages=False: the checkpoint to resume holds no loss averages (written
  before they were saved); the restorer then leaves them at 0.
  """
  n = len(devices)
  with graph.as_default():
    images, labels, input_init, feed = inputs.train_batch(
        arrays, seed=config.seed, global_batch_size=config.global_batch_size(n),
        start_step=start)
    g = build_train_graph(images, labels, devices, StepSettings.of(config, n),
                          param_device=device_plan.parameter_device(devices))
    # Relative paths in the index: the folder can be moved or copied and still resumes.
    # Every global variable, as Saver() takes them, and the loss averages, which are local
    # (compat_v1.step) and saved all the same: a resumed run charts them on.
    saved = v1.global_variables() + list(g.loss_averages.values())
    saver = v1.train.Saver(saved, max_to_keep=config.max_checkpoints_to_keep,
                           save_relative_paths=True)
    restorer = saver if restores_loss_averages else v1.train.Saver(v1.global_variables())
    averages = {n: g.ema.average(v) for n, v in g.params.items()}
    loader = restore.Loader(g.global_step, g.params, averages)
    all_finite = precision.all_finite(list(g.params.values()) + list(averages.values()))
    init = v1.global_variables_initializer()
    local_init = v1.local_variables_initializer()
    writer = v1.summary.FileWriter(config.train_dir, graph)
  graph.finalize()
  return Built(graph, g, input_init, feed, init, local_init, saver, restorer, writer, loader,
               all_finite)


# ---------------------------------------------------------------------------- Backend

class Backend(driver.Backend):
  """The towers' run for harness.control.driver (see its docstring for the methods). The graph and
  the Session are made in `start`, once the step to start at is known."""

  def __init__(self, config, devices, session_config, dataset=None):
    self.config, self.devices, self.session_config = config, devices, session_config
    self.dataset = dataset
    self.built = self.sess = None
    self.begin = None  # (path to restore, checkpoints.State to assign, start step)
    self.restores_loss_averages = True  # whether the checkpoint to resume holds them

  def resume(self, path, keep):
    self.keep = keep  # pylint: disable=attribute-defined-outside-init
    state = checkpoints.read(path, kinds=("step",))
    self.begin = (path, None, state.global_step)
    self.restores_loss_averages = bool(state.loss_averages)
    if not state.loss_averages:
      logging.info(checkpoints.NO_LOSS_AVERAGES, path)
    return self.begin[2]

  def initialize(self, values):
    self.begin = (None, values, values.global_step if values else 0)
    return self.begin[2]

  def start(self, step):
    config, n = self.config, len(self.devices)
    graph = tf.Graph()
    # The Session first, so that its ConfigProto makes the devices, as in TF1: tfds's reads
    # and the input's tf.data functions start TensorFlow 2's eager runtime (gpu_runtime).
    self.sess = v1.Session(graph=graph, config=self.session_config)
    logging.info("Model: the tutorial's CNN, %s parameters", f"{model.NUM_PARAMETERS:,}")
    logging.info("Training %s on %d tower(s) (%s), global batch %d, decay every %d steps",
                 config.dataset, n, progress.device_list(
                     d.rsplit("/device:", 1)[-1].replace("/", "") for d in self.devices),
                 config.global_batch_size(n),
                 config.steps_between_decays(n))  # before the data's read: it takes seconds
    arrays = self.dataset if self.dataset is not None else inputs.load(config, "train")
    self.built = b = build(config, self.devices, step, arrays, graph,
                           self.restores_loss_averages)
    self.sess.run([b.input_init, b.local_init], b.feed)
    path, values, _ = self.begin
    with b.graph.as_default():  # what Saver needs outside a `with Session` block
      self._restore(path, values)

  def _restore(self, path, values):
    b = self.built
    if path:
      try:
        b.restorer.restore(self.sess, path)
      except Exception as e:  # pylint: disable=broad-except  # TF raises many kinds here
        raise run_errors.cannot_resume(path, e) from None
      b.saver.recover_last_checkpoints(self.keep)  # --max_checkpoints_to_keep spans restarts
    else:
      self.sess.run(b.init, b.train.init_feed)
      if values is not None:
        b.loader.assign(self.sess, values)

  def train(self, call):
    g = self.built.train
    fetches = [g.train_op, g.loss, g.learning_rate, g.precision] + (
        [g.summary_op] if call.record else [])
    out = self.sess.run(fetches)
    return driver.Steps(out[1], out[2], out[1], out[2], record=out[4] if call.record else None,
                        precision=out[3], last_precision=out[3])

  def write_summaries(self, step, steps):
    self.built.writer.add_summary(steps.record, step)

  def all_finite(self):
    return bool(self.sess.run(self.built.all_finite))

  def save(self, step):
    with self.built.graph.as_default():
      return self.built.saver.save(self.sess, os.path.join(self.config.train_dir, "model.ckpt"),
                                   global_step=step)

  def global_step(self):
    if self.sess is None:
      return self.begin[2]
    return int(self.sess.run(self.built.train.global_step))

  def close(self):
    # On every exit: a FileWriter left open loses what it holds since its last flush (its
    # thread dies with the process), i.e. the summaries of the steps before a failure.
    if self.built is not None:
      self.built.writer.close()
    if self.sess is not None:
      self.sess.close()


def train(config, devices, session_config, dataset=None, on_step=None):
  """Trains; returns the final global step.

  dataset: the examples to train on, (images, labels) numpy arrays; default: config.dataset.
  on_step: called as on_step(step, loss, learning_rate) after each step (0-based step; the
    loss and rate of that step, as numpy values), e.g. by the benchmark's clock.
  Raises UsageError on bad data, run_errors.NonFiniteLoss on a NaN/Inf loss (nothing of that
  step applied or saved) and run_errors.Stopped after saving on SIGTERM.
  """
  n = len(devices)
  return driver.train(config, Backend(config, devices, session_config, dataset), replicas=n,
                      global_batch=config.global_batch_size(n), on_step=on_step)
