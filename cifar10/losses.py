"""The tutorial's loss, split into its parts so that each trainer picks its reduction.

The total loss of the original is `mean(cross_entropy) + sum(wd * l2_loss(w))`. A tower
trainer computes it per tower and averages the tower gradients; a tf.distribute trainer SUMS
replica gradients, so each replica must scale by the global batch and add 1/N of the weight
decay. Both reductions live here, side by side, and tests/test_losses.py proves them equal.
"""

import tensorflow as tf

from cifar10 import model


def cross_entropy(logits, labels):
  """Per-example softmax cross-entropy, float32 [batch]."""
  return tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.cast(labels, tf.int64), logits=logits)


def weight_decay(params):
  """sum(wd * l2_loss(w)) over the variables that carry weight decay (local3, local4)."""
  terms = [tf.multiply(tf.nn.l2_loss(params[s.name]), s.wd) for s in model.SPECS if s.wd]
  return tf.add_n(terms)


def tower_loss(logits, labels, params):
  """TF1 tower reduction: mean cross-entropy over the tower's batch plus the full decay."""
  return tf.reduce_mean(cross_entropy(logits, labels)) + weight_decay(params)


def replica_loss(logits, labels, params, global_batch_size, num_replicas):
  """tf.distribute reduction: summed over replicas (SUM all-reduce) this is the global loss.

  sum(cross_entropy) / global_batch_size + weight_decay / num_replicas. Dividing by the
  per-replica batch instead would multiply the effective learning rate by N.
  """
  per_example = cross_entropy(logits, labels)
  return (tf.reduce_sum(per_example) / tf.cast(global_batch_size, tf.float32)
          + weight_decay(params) / tf.cast(num_replicas, tf.float32))
