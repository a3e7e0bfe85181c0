"""The L2-by-hand cause (porting.penalties) where a variable's gradient differs for another
reason than the penalty: by rounding (a batch norm's beta starting at 0, a sum the penalty's
term regroups), which must not hide the penalty, or beyond it, which no penalty explains."""

import numpy as np
import pytest
import tensorflow as tf

import porting
from tests import helpers

from porting import penalties


def _fits(d_and_w):
  """{name: (d.w, w.w, d.d)} as penalties.fit measures them."""
  return {name: (float(np.dot(d, w)), float(np.dot(w, w)), float(np.dot(d, d)))
          for name, (d, w) in d_and_w.items()}


KERNEL = np.array([0.5, -0.25, 0.125], np.float32)
LOGITS = np.array([0.3, 0.1], np.float32)


def test_a_penalty_is_named_beside_a_zero_weight_that_differs_by_rounding():
  fits = _fits({"conv/kernel": (4e-3 * KERNEL, KERNEL), "logits/kernel": (4e-3 * LOGITS, LOGITS),
                "bn/beta": (np.array([3e-9, 0], np.float32), np.zeros(2, np.float32))})
  (line,) = penalties.causes(fits)
  # Before: the beta (w = 0) refused the fit, and nothing was named.
  assert line.startswith("an L2 penalty is in the TF1 loss only, or stronger there: the "
                         "gradients of conv/kernel, logits/kernel differ by 0.004 x their weights")


def test_a_zero_weight_that_differs_beyond_rounding_is_no_penalty():
  fits = _fits({"conv/kernel": (4e-3 * KERNEL, KERNEL),
                "bn/beta": (np.array([1e-3, 0], np.float32), np.zeros(2, np.float32))})
  assert penalties.causes(fits) == []


def test_gradients_apart_by_different_factors_are_no_penalty():
  fits = _fits({"conv/kernel": (4e-3 * KERNEL, KERNEL), "logits/kernel": (1e-2 * LOGITS, LOGITS)})
  assert penalties.causes(fits) == []


def test_the_advice_changes_the_port_never_the_tf1_code():
  fits = _fits({"conv/kernel": (-4e-3 * KERNEL, KERNEL)})  # TF2's gradient is the larger
  (line,) = penalties.causes(fits)
  assert line.startswith("an L2 penalty is in the TF2 loss only")
  assert line.endswith("take it out of the port's replica_loss (or weaken it to the TF1 "
                       "code's)")
  (line,) = penalties.causes(_fits({"conv/kernel": (4e-3 * KERNEL, KERNEL)}))
  assert line.endswith("add it to the port's replica_loss (or strengthen it)")


def test_a_regularizer_twice_the_penalty_written_by_hand_is_said_as_twice_not_as_one_side_only():
  # The text CNN's lambda * (l2_loss(W) + l2_loss(b)) ported as keras.regularizers.L2(lambda):
  # TF2's gradient is 0.2 w, TF1's 0.1 w, so they differ by 0.1 w. The kit said "the TF1
  # code has no such penalty: take it out", which would leave the port without its penalty.
  fits = _fits({"output/kernel": (-0.1 * KERNEL, KERNEL), "output/b": (-0.1 * LOGITS, LOGITS)})
  frameworks = {"output/kernel": (0.0, 0.2), "output/b": (0.0, 0.2)}
  (line,) = penalties.causes(fits, frameworks)
  assert line.startswith("the L2 penalty of the TF2 loss is 2 x the TF1 loss's: the gradients "
                         "of output/kernel, output/b differ by 0.1 x their weights")
  assert "gives 0.2 x w, so the TF1 loss's own (written by hand) gives 0.1 x w" in line
  assert "L2(0.05) is the TF1 loss's" in line
  # A regularizer as strong as the whole difference is the TF2 loss's only penalty.
  (line,) = penalties.causes(fits, {"output/kernel": (0.0, 0.1), "output/b": (0.0, 0.1)})
  assert line.startswith("an L2 penalty is in the TF2 loss only: ")
  assert line.endswith("the TF1 code has no such penalty: take the regularizer out of the port")
  # TF1's regularizer (REGULARIZATION_LOSSES) 3 x what the port writes by hand.
  fits = _fits({"conv/kernel": (2e-3 * KERNEL, KERNEL)})
  (line,) = penalties.causes(fits, {"conv/kernel": (3e-3, 0.0)})
  assert line.startswith("the L2 penalty of the TF1 loss is 3 x the TF2 loss's")
  assert "keras.regularizers" not in line


def test_framework_coefficients_are_read_as_c_times_w_or_not_at_all():
  w = {"k2": KERNEL}
  pairs = [("k1", "k2")]
  (c1, c2), = penalties.framework(pairs, ["k1"], None, {"k2": 0.2 * KERNEL}, w).values()
  assert c1 == 0.0 and c2 == pytest.approx(0.2, rel=1e-6)
  # An L1 term's gradient (sign(w)) is not c x w: no coefficient, and the line says both.
  (c1, c2), = penalties.framework(pairs, ["k1"], {"k1": np.sign(KERNEL)}, None, w).values()
  assert c1 is None and c2 == 0.0


LAMBDA, FEATURES, CLASSES = 0.1, 6, 3
SEED = 3  # initial weights whose loss the two penalties' sums round apart (not every seed's)


def _tf1_tower(images, labels, *, by_hand=True):
  """The text CNN's output layer: xw_plus_b, mean cross-entropy + lambda x (l2_loss(W) +
  l2_loss(b)), the penalty written by hand."""
  v1 = tf.compat.v1
  w = v1.get_variable("W", [FEATURES, CLASSES])
  b = v1.get_variable("b", [CLASSES])
  logits = tf.compat.v1.nn.xw_plus_b(images, w, b)
  loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                       logits=logits))
  return loss + LAMBDA * (tf.nn.l2_loss(w) + tf.nn.l2_loss(b)), logits


def _port(l2):
  import keras  # pylint: disable=g-import-not-at-top

  def build():
    model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(
        CLASSES, kernel_initializer=keras.initializers.GlorotUniform(SEED),
        kernel_regularizer=keras.regularizers.L2(l2),
        bias_regularizer=keras.regularizers.L2(l2), name="out")], name="net")
    model.layers[0].bias.assign(np.linspace(-0.5, 0.5, CLASSES).astype(np.float32))
    return model

  return porting.Port(
      tower_loss=_tf1_tower,
      tf1_optimizer=lambda step: tf.compat.v1.train.GradientDescentOptimizer(0.5),
      build_model=build, replica_loss=helpers.mean_cross_entropy_loss,
      tf2_optimizer=lambda: keras.optimizers.SGD(0.5), gradient_reduction="mean",
      variable_map={"W": "net/out/kernel", "b": "net/out/bias"})


def _batches(steps=3):
  rng = np.random.default_rng(3)
  return [(rng.normal(size=(4, FEATURES)).astype(np.float32),
           rng.integers(0, CLASSES, 4).astype(np.int32)) for _ in range(steps)]


def test_keras_regularizers_for_a_penalty_by_hand_through_the_kit():
  """L2(lambda): the penalty twice TF1's, said as twice (it was "take it out"); L2(lambda / 2):
  the steps the same bits, only the losses apart by the penalty's sum order, said as such
  (it was "not explained ... or TF_ENABLE_ONEDNN_OPTS=0")."""
  twice = porting.compare(_port(LAMBDA), _batches(1), replicas=1, steps=1)
  (line,) = twice.hints
  assert line.startswith("the L2 penalty of the TF2 loss is 2 x the TF1 loss's: the gradients "
                         "of W, b differ by 0.1 x their weights"), line
  faithful = porting.compare(_port(LAMBDA / 2), _batches(), replicas=1, steps=3)
  apart = [r for r in faithful.rows if not r.diff.within(0)]
  assert apart and {r.kind for r in apart} == {"loss"}, faithful.text()
  (line,) = faithful.hints
  assert line.startswith("only the losses differ, by rounding (up to "), line
  assert "The port is not at fault" in line
