"""Loss forms teams write that the kit must read right: tf.compat.v1.losses with a weights
mask (SUM_BY_NONZERO_WEIGHTS) against a port's plain mean, on the dropout/Adam model of
tests/dropout_adam_port.py."""

import numpy as np
import pytest
import tensorflow as tf

import porting
from tests import dropout_adam_port as m

v1 = tf.compat.v1
pytestmark = pytest.mark.filterwarnings("ignore:`tf.layers.")


def _weights(labels):
  # Class 1 is "ignore" (a padded word, an unlabelled pixel): weight 0.
  return tf.cast(tf.not_equal(labels, 1), tf.float32)


def _tower_loss(images, labels):
  _, logits = m.tower_loss(images, labels)
  return v1.losses.sparse_softmax_cross_entropy(labels, logits, weights=_weights(labels)), logits


def _replica_loss(model, images, labels, global_batch_size, nonzero=True):
  _, logits = m.replica_loss(model, images, labels, global_batch_size)
  per_row = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
  w = _weights(labels)
  if nonzero:  # tf.losses' SUM_BY_NONZERO_WEIGHTS, written out
    return tf.reduce_sum(per_row * w) / tf.reduce_sum(w), logits
  return tf.reduce_mean(per_row * w), logits  # the mean over every row: the fault


def test_a_mean_over_every_row_against_sum_by_nonzero_weights_is_named_with_its_factor():
  """A GRU classifier's padded rows, weighted 0: the port's mean over all 4 rows, 3 of them
  counted, made every gradient exactly 0.75 x TF1's, and the kit said only "not explained:
  in what follows it (the head, the loss)"."""
  batches = m.batches(1, steps=1)
  labels = batches[0][1]
  counted = np.count_nonzero(labels != 1)
  assert 0 < counted < len(labels)  # the batch has rows weighted 0
  faithful = porting.compare(m.port(tower_loss=_tower_loss, replica_loss=_replica_loss),
                             batches, replicas=1, steps=1)
  assert faithful.equal, faithful.text()
  wrong = porting.compare(
      m.port(tower_loss=_tower_loss,
             replica_loss=lambda *a: _replica_loss(*a, nonzero=False)),
      batches, replicas=1, steps=1)
  factor = counted / len(labels)
  (line,) = wrong.hints
  assert line.startswith(f"every gradient is {factor:.4g} x TF1's at step 0, one factor for "
                         "all: the port's loss is normalized otherwise, e.g. a mean over "
                         "every example or pixel where TF1's tf.compat.v1.losses divides by "
                         "the number of non-zero weights (SUM_BY_NONZERO_WEIGHTS"), line
