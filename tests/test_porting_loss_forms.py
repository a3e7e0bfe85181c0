"""Loss forms teams write that the kit must read right: tf.compat.v1.losses with a weights
mask (SUM_BY_NONZERO_WEIGHTS) against a port's plain mean, on the dropout/Adam model of
tests/dropout_adam_port.py."""

import numpy as np
import pytest
import tensorflow as tf

import porting
from tests import helpers
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


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
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


FEATURES, CLASSES, WD = 6, 3, 0.01


def _collection_tower(how):
  """tower_loss(scope, ...) in the original's form, its losses through tf.losses' collection:
  "right" (the tower's own losses by scope + the regularization once), "scoped" (get_total_loss
  (scope=scope): the regularization only in tower 0) or "whole" (every tower's losses)."""
  def tower_loss(scope, images, labels):
    logits = v1.layers.dense(images, CLASSES, name="out",
                             kernel_regularizer=lambda w: WD * tf.reduce_sum(tf.square(w)))
    v1.losses.sparse_softmax_cross_entropy(labels, logits)
    if how == "scoped":
      return v1.losses.get_total_loss(scope=scope), logits
    own = v1.losses.get_losses() if how == "whole" else v1.losses.get_losses(scope=scope)
    return tf.add_n(own) + v1.losses.get_regularization_loss(), logits
  return tower_loss


def _collection_port(how):
  import keras  # pylint: disable=g-import-not-at-top

  def build():
    return keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(
        CLASSES, kernel_regularizer=keras.regularizers.L2(WD),
        kernel_initializer=keras.initializers.GlorotUniform(1), name="out")], name="net")

  return porting.Port(
      tower_loss=_collection_tower(how),
      tf1_optimizer=lambda step: v1.train.GradientDescentOptimizer(0.1), build_model=build,
      replica_loss=helpers.mean_cross_entropy_loss,
      tf2_optimizer=lambda: keras.optimizers.SGD(0.1), gradient_reduction="mean")


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_tower_losses_read_from_the_collection_otherwise_in_later_towers_are_named():
  """A multi-task model's towers: get_total_loss(scope=scope) gave tower 1 no regularization
  (made in tower 0's scope only), and the kit said "an L2 penalty is in the TF2 loss only ...
  take it out of the port", advice that would tie the port to N; the whole collection read in
  a tower (tower 1 adds tower 0's losses) was "not explained"."""
  rng = np.random.default_rng(0)
  batches = [(rng.normal(size=(4, FEATURES)).astype(np.float32),
              rng.integers(0, CLASSES, 4).astype(np.int32))]
  right = porting.compare(_collection_port("right"), batches, replicas=2, steps=1)
  assert right.equal, right.text()
  for how, said in (("scoped", "TF1's later towers count less than the port's replicas"),
                    ("whole", "TF1's later towers count more than the port's replicas")):
    report = porting.compare(_collection_port(how), batches, replicas=2, steps=1)
    (line,) = report.hints
    assert line.startswith("the TF1 towers after the first count their losses otherwise: at "
                           "step 0 tower_0's loss is replica_0's (within rounding) and the "
                           "later towers' are apart (TF1 - TF2: tower_1 "), line
    assert said in line and line.endswith("The TF1 code differs by tower, not the port (or a "
                                          "port that adds a term on replica 0 only)"), line
