"""The tutorial's loss, split into its parts so that each trainer picks its reduction.

The total loss of the original is `mean(cross_entropy) + sum(wd * l2_loss(w))`. Both trainers
compute it per tower or replica (`tower_loss`) and average the gradients (compat_v1's
`average_gradients`, tfbits.gates' `replica_mean` in strategies' step). TF2's idiom, where the optimizer SUMS replica
gradients, scales each replica's loss by the global batch and adds 1/N of the weight decay
(`replica_loss`): the same numbers where N is a power of two, other roundings elsewhere
(tests/test_losses.py; MIGRATION.md shows it as the idiom, equivalence.cifar10_port runs it).

Also here: the original's per-tower loss terms and their moving averages, which both
trainers write as summaries under the original's tags.
"""

import tensorflow as tf

from cifar10 import errors
from cifar10 import model


def check_finite(loss):
  """`loss`, after a check that fails the step with errors.NON_FINITE_CHECK on NaN or Inf;
  both trainers make every update of the step depend on it."""
  return tf.debugging.check_numerics(loss, errors.NON_FINITE_CHECK)


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
  return tower_terms(logits, labels, params)["total_loss"]


def tower_terms(logits, labels, params):
  """The original's 'losses' collection of one tower and its sum, keyed by the names its
  summaries carried (tower prefix stripped): `local3/weight_loss`, `local4/weight_loss`,
  `cross_entropy` and `total_loss` (== tower_loss). The original also collected zero terms
  (wd=0.0) for conv1, conv2 and softmax_linear; they are left out."""
  terms = {f"{s.name.split('/')[0]}/weight_loss":
               tf.multiply(tf.nn.l2_loss(params[s.name]), s.wd) for s in model.SPECS if s.wd}
  # The decay terms' sum as a reduction, not an add: grappler's arithmetic optimizer flattens
  # a chain of adds into one AddN in its own order, and did so in a TF2 function (where the
  # terms had no other use) but not in the v1 graph: cross-entropy + (a + b) became
  # (cross-entropy + a) + b there, 1 ULP off in one step of four. A Sum is not an add: both
  # sides then compute (a + b) + cross-entropy, the original's add_n over its collection.
  decay = tf.reduce_sum(tf.stack(list(terms.values())))
  terms["cross_entropy"] = tf.reduce_mean(cross_entropy(logits, labels))
  terms["total_loss"] = decay + terms["cross_entropy"]
  return terms


def replica_loss(logits, labels, params, global_batch_size, num_replicas):
  """tf.distribute reduction: summed over replicas (SUM all-reduce) this is the global loss.

  sum(cross_entropy) / global_batch_size + weight_decay / num_replicas. Dividing by the
  per-replica batch instead would multiply the effective learning rate by N.
  """
  per_example = cross_entropy(logits, labels)
  return (tf.reduce_sum(per_example) / tf.cast(global_batch_size, tf.float32)
          + weight_decay(params) / tf.cast(num_replicas, tf.float32))


# The original's loss averages: ExponentialMovingAverage(0.9, name='avg') of each tower term,
# applied to tensors, which tf.compat.v1 does without zero-debiasing (the average starts at 0).
# Its summaries showed the average under the term's name and the raw value under
# "<name> (raw)", which TF1's summary name check rewrote to "<name>__raw_": that is the tag
# TensorBoard showed, and ours.
LOSS_AVERAGE_DECAY = 0.9
RAW_TAG_SUFFIX = "__raw_"
# The keys of tower_terms, in the original's collection order.
LOSS_TERMS = tuple(f"{s.name.split('/')[0]}/weight_loss" for s in model.SPECS if s.wd) + (
    "cross_entropy", "total_loss")


def average_update(average, value, decay=LOSS_AVERAGE_DECAY):
  """One step of the original's loss average on `average` (a float32 scalar variable that
  starts at 0); returns the new average. The same ops as the tf.compat.v1 moving average
  (`average -= (average - value) * (1 - decay)`, 1 - decay rounded in float32), so the values
  equal the original's to the bit."""
  one_minus_decay = 1.0 - tf.constant(decay, tf.float32)
  return average.assign_sub((average - value) * one_minus_decay)
