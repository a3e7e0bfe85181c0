"""Both trainers against the original TF1 tutorial's graph (tests/tf1_reference.py): the same
gradients, weights and moving averages, to the bit, over steps across learning-rate decays.

The reference shares nothing with the trainers but the starting values and the batches, so
this is where a change of op (`+` for `bias_add`: conv bias gradients off by up to 6e-7
relative, every weight off after a few steps) or of order (the EMA reading the weights before
or after the update: up to 2.6e-2 apart) shows.
"""

import numpy as np
import pytest

from cifar10 import model
from equivalence import compare
from equivalence import runs
from tests import tf1_reference

SEED = 6
BATCH = 8
STEPS = 5
DECAY_STEPS = 2  # decays after steps 2 and 4


def _assert_bit_identical(expected, got, what):
  bad = [r for r in compare.compare(expected, got) if not r.ok]
  assert not bad, compare.table(what, bad, 0.0)


@pytest.mark.parametrize("n,ema_reads", [(1, "updated"), (2, "previous"), (2, "updated")])
@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_both_trainers_follow_the_originals_graph_to_the_bit(n, ema_reads):
  original = tf1_reference.train(n, SEED, STEPS, BATCH, DECAY_STEPS, ema_reads)
  images, labels = runs.global_batch(SEED, BATCH * n)
  _assert_bit_identical(original["grads"], runs.v1_gradients(n, SEED, images, labels),
                        "first-step gradients, towers vs original")
  assert original["global_step"] == np.float32(STEPS)  # the original's step is a float
  for run in (runs.v1_train, runs.tf2_train):
    result = run(n, SEED, STEPS, BATCH, DECAY_STEPS, ema_reads=ema_reads)
    assert result.global_step == STEPS
    weights = {k: v for k, v in result.variables.items() if k in model.VARIABLE_NAMES}
    ema = {k.rsplit("/", 1)[0]: v for k, v in result.variables.items()
           if k.endswith("/ExponentialMovingAverage")}
    _assert_bit_identical(original["weights"], weights, f"{run.__name__} weights")
    _assert_bit_identical(original["ema"], ema, f"{run.__name__} EMA ({ema_reads})")


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_the_two_ema_orders_differ_and_previous_lags_the_weights():
  updated = tf1_reference.train(1, SEED, 2, BATCH, DECAY_STEPS, "updated")
  previous = tf1_reference.train(1, SEED, 2, BATCH, DECAY_STEPS, "previous")
  np.testing.assert_array_equal(updated["weights"]["conv1/weights"],
                                previous["weights"]["conv1/weights"])
  initial = model.initial_values(SEED)["local4/biases"]
  # After one step "previous" averaged the untouched initial weights with themselves.
  one = tf1_reference.train(1, SEED, 1, BATCH, DECAY_STEPS, "previous")
  np.testing.assert_array_equal(one["ema"]["local4/biases"], initial)
  assert not np.array_equal(updated["ema"]["local4/biases"], previous["ema"]["local4/biases"])
