"""Precision @ 1 of a checkpoint's moving averages (the TF2 form of `cifar10_eval.py`).

The model variables are loaded with the checkpoint's EMA shadows (the TF2 counterpart of
`ExponentialMovingAverage.variables_to_restore()`), and the first num_examples of the eval
split are classified on one device, each exactly once (the last batch holds the remainder).
Checkpoints of either trainer are read (cifar10.checkpoints maps the names).
"""

import contextlib

import tensorflow as tf

from cifar10 import checkpoints
from cifar10 import data_sources
from cifar10 import input_pipeline
from cifar10 import model
from cifar10 import scores
from harness.folders import polling
from harness.control import progress
from strategies import devices


class Evaluator:
  """Holds the eval data and variables; `evaluate(path)` restores and scores one checkpoint."""

  def __init__(self, config):
    self.config = config
    split = "test" if config.eval_data == "test" else "train"
    source = data_sources.load_source(config.dataset, split, seed=config.seed,
                                        data_dir=config.data_dir, download=config.download)
    self.dataset = input_pipeline.eval_dataset(source, batch_size=config.batch_size,
                                               num_examples=config.num_examples)
    values = model.initial_values(0)  # only for shapes; every value is overwritten on restore
    self.params = {n: tf.Variable(values[n], name=n) for n in model.VARIABLE_NAMES}
    self.writer = tf.summary.create_file_writer(config.eval_dir)

  @tf.function(autograph=False)  # nothing here branches on a tensor: no conversion to pay
  def _scores(self, images, labels):
    return scores.batch_counts(model.inference(self.params, images), labels)

  def close(self):
    """Closes the summary writer, flushing what it holds."""
    self.writer.close()

  def evaluate(self, path):
    """Returns (precision @ 1, global step) of checkpoint `path` and writes its summaries."""
    state = checkpoints.read(path, kinds=("ema", "step"))
    for name, value in state.averages.items():
      self.params[name].assign(value)
    tally = scores.Tally()
    for images, labels in self.dataset:
      tally.add(*self._scores(images, labels))
    step, precision, loss = state.global_step, tally.precision(), tally.loss(state.averages)
    progress.print_scores(precision, loss, tally.examples, step, path)
    with self.writer.as_default():
      tf.summary.scalar(scores.PRECISION_TAG, precision, step=step)
      tf.summary.scalar(scores.LOSS_TAG, loss, step=step)
    self.writer.flush()
    return precision, step


def run(config):
  """Evaluates the newest checkpoint once, or each new one every eval_interval_secs."""
  devices.setup(config.devices)  # its one device, and the bit contract's settings
  polling.open_eval_dir(config)
  with contextlib.closing(Evaluator(config)) as scorer:
    return polling.evaluate_each(scorer.evaluate, config)
