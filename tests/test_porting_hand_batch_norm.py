"""The kit on a sixth model nobody here wrote for it (tests/debiased_bn_port.py: tf.layers, a
batch norm written by hand with zero-debiased moving averages, a residual block, momentum on a
piecewise-constant rate, an EMA, a float32 global step): the faithful port is the same bits,
each one-fault port is named with its size and nothing else but what follows from it."""

import pytest

import porting
from tests import debiased_bn_port as m

# pytest resets warning filters per test; the model's own filter does not outlive it.
pytestmark = pytest.mark.filterwarnings("ignore:`tf.layers.")
FOLLOWS = "the moving averages follow the weights"


@pytest.mark.parametrize("replicas", [1, 2])
def test_the_faithful_port_is_the_same_bits(replicas):
  report = porting.compare(m.port(replicas), m.batches(replicas), replicas=replicas, steps=3)
  assert report.equal, report.text()
  assert report.learning_rates[0] == [0.10000000149011612, 0.10000000149011612,
                                      0.009999999776482582]


def test_keras_sgd_is_named_where_the_rate_changes():
  report = porting.compare(m.keras_sgd_port(2), m.batches(2), replicas=2, steps=3)
  (line,) = [h for h in report.hints if h.startswith("momentum:")]
  # Before: named only while every row was within 1e-5, "not explained" once the rate moved.
  assert "the rate moves at step 2 (TF1 0.1 -> 0.01)" in line
  assert "porting.TF1Momentum" in line
  assert all(h.startswith(("momentum:", FOLLOWS)) for h in report.hints), report.hints


@pytest.mark.parametrize("make, cause", [
    (m.penalty_in_tf1_only_port, "the regularization is missing from the TF2 loss"),
    (m.penalty_in_tf2_only_port, "an L2 penalty is in the TF2 loss only"),
])
def test_a_penalty_on_one_side_is_named(make, cause):
  report = porting.compare(make(2), m.batches(2), replicas=2, steps=2)
  assert not report.equal
  assert [h for h in report.hints if h.startswith(cause)], report.hints
  assert all(h.startswith((cause, FOLLOWS)) for h in report.hints), report.hints
