"""What training and evaluation report of the model's predictions, under shared tags.

TensorBoard overlays curves of one tag across runs: a trainer's `train_dir` and its
evaluator's `train_dir/eval` are two runs, so training and evaluation write the same two
tags (as Keras's `train/` and `validation/` runs both hold `epoch_loss`):

  loss             training: the step's loss (mean of the towers' total loss);
                   evaluation: the same quantity over the split, with the moving averages
                   (mean cross-entropy over every example scored + the weight decay)
  Precision @ 1    training: the fraction of the step's global batch whose top class is the
                   label; evaluation: the same over the split (the original's eval tag)

Every count here is exact and every sum is taken in a fixed order, so two trainers or two
evaluators that compute the same logits write the same points to the bit.
"""

import numpy as np
import tensorflow as tf

from cifar10 import losses
from cifar10 import model

LOSS_TAG = "loss"
PRECISION_TAG = "Precision @ 1"


def batch_precision(logits, labels):
  """float32: the fraction of one tower's or replica's batch classified right (top 1)."""
  hits = tf.math.in_top_k(tf.cast(labels, tf.int32), logits, 1)
  return tf.reduce_mean(tf.cast(hits, tf.float32))


def batch_counts(logits, labels):
  """(correct, sum of the examples' cross-entropy, examples) of one evaluation batch: int64,
  float32, int64 (the last batch of a split may be smaller)."""
  hits = tf.math.in_top_k(tf.cast(labels, tf.int32), logits, 1)
  return (tf.reduce_sum(tf.cast(hits, tf.int64)),
          tf.reduce_sum(losses.cross_entropy(logits, labels)),
          tf.size(labels, out_type=tf.int64))


def weight_decay(weights):
  """The loss's weight-decay term of {variable name: numpy array}, in float64 (numpy's own
  summation: the same number wherever the weights are the same bits)."""
  return sum(s.wd * 0.5 * float(np.sum(np.square(weights[s.name], dtype=np.float64)))
             for s in model.SPECS if s.wd)


class Tally:
  """The counts of an evaluation, batch after batch in the split's order."""

  def __init__(self):
    self.correct = self.examples = 0
    self.cross_entropy = 0.0  # a float64 sum of the batches' float32 sums

  def add(self, correct, cross_entropy, examples):
    self.correct += int(correct)
    self.cross_entropy += float(cross_entropy)
    self.examples += int(examples)

  def precision(self):
    return self.correct / self.examples

  def loss(self, weights):
    """The loss over the split, of the weights scored ({name: numpy array})."""
    return self.cross_entropy / self.examples + weight_decay(weights)
