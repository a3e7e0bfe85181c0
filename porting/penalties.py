"""An L2 penalty written into one side's loss by hand (not through a regularization
collection, whose gradient the TF1 side reports): step 0's gradients then differ by c x the
starting weights, with one c for every penalized variable. `fit` reduces step 0 to three dot
products a variable (the starting weights are not kept past it); `causes` names the penalty
where every differing gradient fits."""

import numpy as np

from porting.diffs import flat


def fit(pairs, trainable, tf1_step, tf2_step, start):
  """{TF1 name: (d.w, w.w, d.d)} of step 0's gradient difference d = TF1 - TF2 against the
  starting weights w (`start`, by TF2 name), for each trainable variable whose gradients
  differ: an L2 penalty written into one side's loss only (not through a collection, whose
  gradient the TF1 side reports) makes d = c w."""
  to2 = dict(pairs)
  fits = {}
  for k in trainable:
    if k not in to2:
      continue
    d = flat(tf1_step.gradients[k]) - flat(tf2_step.gradients[to2[k]])
    if np.any(d):
      w = flat(start[to2[k]])
      fits[k] = (float(np.dot(d, w)), float(np.dot(w, w)), float(np.dot(d, d)))
  return fits


ROUNDING = 1e-3  # a difference this far below the largest is another's rounding, not c w


def causes(fits):
  """The hint where every differing gradient is c x its starting weight, one c for all: a
  gradient that differs only by rounding against the largest difference (a beta starting at
  0, a variable whose gradient the penalty's regrouped sum rounds) is not one of them."""
  largest = max((dd for _, _, dd in fits.values()), default=0.0)
  cs = {}
  for name, (dw, ww, dd) in fits.items():
    if dd <= ROUNDING * ROUNDING * largest:
      continue
    if ww == 0 or dd - dw * dw / ww > 0.05 * 0.05 * dd:
      return []
    cs[name] = dw / ww
  if not cs:
    return []
  c = np.median(list(cs.values()))
  if any(abs(x - c) > 0.05 * abs(c) for x in cs.values()):
    return []
  side = "TF1" if c > 0 else "TF2"
  # The TF1 code is the reference: the port is what changes.
  advice = ("add it to the port's replica_loss" if side == "TF1" else
            "the TF1 code has no such penalty: take it out of the port's replica_loss")
  return [f"an L2 penalty is in the {side} loss only: the gradients of {', '.join(cs)} differ "
          f"by {abs(c):.3g} x their weights, all that differs at step 0 beyond rounding (a "
          f"penalty {abs(c):.3g} x tf.nn.l2_loss(w) added by hand; a variable starting at 0, "
          f"a batch norm's beta, shows none at step 0); {advice}"]
