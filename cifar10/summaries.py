"""What the original tutorial summarised of one tower, by tag; each trainer writes the values
with its own API (tf.summary in strategies/, tf.compat.v1.summary in compat_v1/).

The original's tags, tower prefix stripped as its `_activation_summary` and `tower_loss` did:

  <layer>/activations   histogram of the layer's output (conv1 ... softmax_linear)
  <layer>/sparsity      fraction of zeros in it (tf.nn.zero_fraction's number, see sparsity)
  <term>__raw_          the tower's loss term (cross_entropy, local3/weight_loss,
                        local4/weight_loss, total_loss); the original asked for
                        "<term> (raw)", which TF1 rewrote to this
  <term>                its moving average (ExponentialMovingAverage(0.9, name='avg'))

As in the original multi-GPU trainer, the values are those of the last tower (replica).
The trainers' own `learning_rate`, `<variable>/values` and `<variable>/gradients` are
written beside them, and the tags training shares with evaluation (cifar10.scores).
"""

import tensorflow as tf

from cifar10 import losses
from cifar10 import model

def sparsity(x):
  """The fraction of zeros in x, as float32: counted exactly and divided in float64, so graph
  and eager code give the same bits (tf.nn.zero_fraction's float32 arithmetic differed by an
  ulp between a v1 graph and eager execution)."""
  zeros = tf.math.count_nonzero(tf.equal(x, 0), dtype=tf.int64)
  return tf.cast(tf.cast(zeros, tf.float64) / tf.cast(tf.size(x, tf.int64), tf.float64),
                 tf.float32)


def original(activations, terms, averages):
  """({tag: scalar tensor}, {tag: tensor for a histogram}) from inference's `activations`,
  losses.tower_terms and their averages (losses.average_update)."""
  scalars, histograms = {}, {}
  for layer in model.ACTIVATION_LAYERS:
    histograms[f"{layer}/activations"] = activations[layer]
    scalars[f"{layer}/sparsity"] = sparsity(activations[layer])
  for name in losses.LOSS_TERMS:
    scalars[name + losses.RAW_TAG_SUFFIX] = terms[name]
    scalars[name] = averages[name]
  return scalars, histograms
