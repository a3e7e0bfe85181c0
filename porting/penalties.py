"""An L2 penalty written into one side's loss by hand (not through a regularization
collection, whose gradient the TF1 side reports): step 0's gradients then differ by c x the
starting weights, with one c for every penalized variable. `fit` reduces step 0 to three dot
products a variable (the starting weights are not kept past it); `causes` names the penalty
where every differing gradient fits."""

import numpy as np

from porting.diffs import flat


def fit(pairs, trainable, tf1_step, tf2_step, start):
  """{TF1 name: (d.w, w.w, d.d, g.g)} of step 0's gradient difference d = TF1 - TF2 against
  the starting weights w (`start`, by TF2 name), and of TF1's gradient g, for each trainable
  variable whose gradients differ: an L2 penalty written into one side's loss only (not
  through a collection, whose gradient the TF1 side reports) makes d = c w."""
  to2 = dict(pairs)
  fits = {}
  for k in trainable:
    if k not in to2:
      continue
    d = flat(tf1_step.gradients[k]) - flat(tf2_step.gradients[to2[k]])
    if np.any(d):
      w = flat(start[to2[k]])
      g = flat(tf1_step.gradients[k])
      fits[k] = (float(np.dot(d, w)), float(np.dot(w, w)), float(np.dot(d, d)),
                 float(np.dot(g, g)))
  return fits


ROUNDING = 1e-3  # a difference this far below the largest is another's rounding, not c w
# A difference this small against its own gradient is that gradient's rounding (a fused batch
# norm's, 2.5e-6 relative on a ResNet's convolutions), not c w, however it compares with the
# largest difference: the penalty's (2e-4 x a gamma of 1) stood 40 x above it, and the
# kernels' rounding broke the fit.
OWN_ROUNDING = 1e-5
SAME = 0.05  # coefficients this close (relative) are one


def framework(pairs, names, reg1, reg2, start):
  """{TF1 name: (c1, c2)} for `names`: each side's framework regularization (TF1's
  REGULARIZATION_LOSSES, a Keras regularizer: `reg1` by TF1 name, `reg2` by TF2 name, their
  gradients at the starting weights `start`, by TF2 name) as c x w, 0.0 where that side has
  none, None where its gradient is not c x w (an L1 term, a penalty on a transform)."""
  to2 = dict(pairs)
  out = {}
  for k in names:
    w = flat(start[to2[k]])
    ww = float(np.dot(w, w))
    out[k] = tuple(_coefficient(r.get(key) if r else None, w, ww)
                   for r, key in ((reg1, k), (reg2, to2[k])))
  return out


def _coefficient(gradient, w, ww):
  if gradient is None:
    return 0.0
  g = flat(gradient)
  if ww == 0:
    return None
  c = float(np.dot(g, w)) / ww
  return c if float(np.dot(g - c * w, g - c * w)) <= SAME * SAME * float(np.dot(g, g)) else None


def causes(fits, frameworks=None):
  """The hint where every differing gradient is c x its starting weight, one c for all: a
  gradient that differs only by rounding against the largest difference (a beta starting at
  0, a variable whose gradient the penalty's regrouped sum rounds) is not one of them.

  `frameworks` ({TF1 name: (c1, c2)}, framework()) says what each side's regularizers add:
  where the side with the larger penalty has one and the other side none, the other side's
  own penalty (written by hand) is what remains, and the line says how the two compare;
  without it the line cannot tell a penalty on one side only from a stronger one, and says
  both."""
  largest = max((fit[2] for fit in fits.values()), default=0.0)
  cs = {}
  for name, (dw, ww, dd, *own) in fits.items():
    if dd <= ROUNDING * ROUNDING * largest or (own and dd <= OWN_ROUNDING ** 2 * own[0]):
      continue
    if ww == 0 or dd - dw * dw / ww > SAME * SAME * dd:
      return []
    cs[name] = dw / ww
  if not cs:
    return []
  c = np.median(list(cs.values()))
  if any(abs(x - c) > SAME * abs(c) for x in cs.values()):
    return []
  more, less = ("TF1", "TF2") if c > 0 else ("TF2", "TF1")
  names, size = ", ".join(cs), abs(c)
  differ = (f"the gradients of {names} differ by {size:.3g} x their weights, all that differs "
            "at step 0 beyond rounding")
  own = _common([(frameworks or {}).get(k, (None, None)) for k in cs], 0 if c > 0 else 1)
  if own and own[0] > 0 and own[1] == 0:
    regularizer, rest = own[0], own[0] - size
    if abs(rest) <= SAME * regularizer:
      return [f"an L2 penalty is in the {more} loss only: {differ}, its regularizer's "
              f"gradient {regularizer:.3g} x w, the whole difference (read as the {more} "
              f"side's only penalty: one written by hand there too is not seen); " + (
                  "add it to the port" if more == "TF1" else
                  "the TF1 code has no such penalty: take the regularizer out of the port")]
    if rest > 0:
      ratio = regularizer / rest
      keras = (f" (keras.regularizers.L2(k) is k x sum(w^2), twice k x tf.nn.l2_loss(w): "
               f"L2({rest / 2:.3g}) is the TF1 loss's)" if more == "TF2" and
               abs(ratio - 2) <= 2 * SAME else "")
      return [f"the L2 penalty of the {more} loss is {ratio:.3g} x the {less} loss's: {differ}; "
              f"the {more} side's regularizer gives {regularizer:.3g} x w, so the {less} "
              f"loss's own (written by hand) gives {rest:.3g} x w (read with the regularizer "
              f"as the {more} side's only penalty){keras}; make the port's penalty the TF1 "
              "code's"]
  # The TF1 code is the reference: the port is what changes.
  advice = ("add it to the port's replica_loss (or strengthen it)" if more == "TF1" else
            "take it out of the port's replica_loss (or weaken it to the TF1 code's)")
  return [f"an L2 penalty is in the {more} loss only, or stronger there: {differ} (a penalty "
          f"{size:.3g} x tf.nn.l2_loss(w) added by hand; a variable starting at 0, a batch "
          f"norm's beta, shows none at step 0); {advice}"]


def _common(pairs, more):
  """(the larger side's framework coefficient, the other side's), one for every variable
  named, or None where they disagree or one is not c x w."""
  firsts = [p[more] for p in pairs]
  seconds = [p[1 - more] for p in pairs]
  if any(x is None for x in firsts + seconds):
    return None
  a, b = firsts[0], seconds[0]
  if any(abs(x - a) > SAME * abs(a) for x in firsts) or any(x != b for x in seconds):
    return None
  return a, b
