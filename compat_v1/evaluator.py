"""Precision @ 1 the TF1 way: a graph, `variables_to_restore()`, a Session.

As the original `cifar10_eval.py`: the model variables take their moving averages, as
`ExponentialMovingAverage.variables_to_restore()` maps them ('conv1/weights/
ExponentialMovingAverage' -> conv1/weights). The values are read under whichever keys the
checkpoint has (compat_v1's, strategies.train's object-based ones, or the original
tutorial's) and assigned by `restore.Loader`, not a Saver: a Saver refuses the original's
float32 global step and float16 (`--use_fp16`) weights. Every checkpoint is scored alike.
"""

import contextlib

import tensorflow as tf

from cifar10 import checkpoints
from cifar10 import input_pipeline as ip
from cifar10 import model
from cifar10 import scores
from cifar10.hparams import DEFAULT
from compat_v1 import devices
from compat_v1 import inputs
from compat_v1 import restore
from harness.folders import polling
from harness.control import progress

v1 = tf.compat.v1


class Evaluator:
  """The eval graph and its session; `evaluate(path)` restores and scores one checkpoint."""

  def __init__(self, config, session_config=None):
    """session_config: devices.setup's (`run` makes it first); None: made here."""
    self.config = config
    if session_config is None:
      _, session_config = devices.setup(config.devices)
    self.graph = tf.Graph()
    # Opened first and kept: its ConfigProto makes the devices before tfds's reads and the
    # input's tf.data functions start TensorFlow 2's eager runtime (harness.devices.gpu_runtime).
    self.sess = v1.Session(graph=self.graph, config=session_config)
    try:
      self._build(config)
    except BaseException:
      self.sess.close()
      raise

  def _build(self, config):
    split = "test" if config.eval_data == "test" else "train"
    arrays = inputs.load(config, split)
    with self.graph.as_default():
      source, feed = inputs.graph_source(arrays, config.seed, split)
      dataset = ip.eval_dataset(source, batch_size=config.batch_size,
                                num_examples=config.num_examples)
      self.iterator = v1.data.make_initializable_iterator(dataset)
      self.feed = feed
      images, labels = self.iterator.get_next()
      params = {}
      for spec in model.SPECS:  # every value comes from the checkpoint: no initial values
        scope, leaf = spec.name.split("/")
        with v1.variable_scope(scope):
          params[spec.name] = v1.get_variable(leaf, spec.shape, tf.float32,
                                              v1.zeros_initializer())
      global_step = v1.train.get_or_create_global_step()
      self.counts = scores.batch_counts(model.inference(params, images), labels)
      # The original's idiom: {'conv1/weights/ExponentialMovingAverage': conv1/weights, ...}
      to_restore = v1.train.ExponentialMovingAverage(
          DEFAULT.moving_average_decay).variables_to_restore()
      averages = {n: to_restore[n + checkpoints.EMA_SUFFIX] for n in model.VARIABLE_NAMES}
      self.loader = restore.Loader(global_step, averages=averages)
      self.writer = v1.summary.FileWriter(config.eval_dir, self.graph)
    self.graph.finalize()

  def close(self):
    """Closes the summary writer (an open v1 FileWriter keeps a thread running) and the
    Session."""
    self.writer.close()
    self.sess.close()

  def evaluate(self, path):
    """Returns (precision @ 1, global step) of checkpoint `path` and writes the summary."""
    sess = self.sess  # every variable is assigned, the iterator re-initialised, per checkpoint
    state = self.loader.load(sess, path)
    step = state.global_step
    sess.run(self.iterator.initializer, self.feed)
    tally = scores.Tally()
    while True:  # until the dataset ends: each example of the split once
      try:
        tally.add(*sess.run(self.counts))
      except tf.errors.OutOfRangeError:
        break
    precision, loss = tally.precision(), tally.loss(state.averages)
    progress.print_scores(precision, loss, tally.examples, step, path)
    # The original's idiom, which keeps the tag as written: v1.summary.scalar would rename it
    # `Precision___1`, and the two evaluators' charts would not overlay.
    self.writer.add_summary(v1.Summary(value=[
        v1.Summary.Value(tag=scores.PRECISION_TAG, simple_value=precision),
        v1.Summary.Value(tag=scores.LOSS_TAG, simple_value=loss)]), step)
    self.writer.flush()
    return precision, step


def run(config):
  """Evaluates the newest checkpoint once, or each new one every eval_interval_secs."""
  # Its one device and the bit contract's settings (a Session's ConfigProto, as TF1 did).
  _, session_config = devices.setup(config.devices)
  polling.open_eval_dir(config)  # reads files and checkpoints only: no eager runtime yet
  with contextlib.closing(Evaluator(config, session_config)) as scorer:
    return polling.evaluate_each(scorer.evaluate, config)
