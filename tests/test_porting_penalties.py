"""The L2-by-hand cause (porting.penalties) where a variable's gradient differs for another
reason than the penalty: by rounding (a batch norm's beta starting at 0, a sum the penalty's
term regroups), which must not hide the penalty, or beyond it, which no penalty explains."""

import numpy as np

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
  assert line.startswith("an L2 penalty is in the TF1 loss only: the gradients of "
                         "conv/kernel, logits/kernel differ by 0.004 x their weights")


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
  assert line.endswith("the TF1 code has no such penalty: take it out of the port's "
                       "replica_loss")
  (line,) = penalties.causes(_fits({"conv/kernel": (4e-3 * KERNEL, KERNEL)}))
  assert line.endswith("add it to the port's replica_loss")
