"""Causes in the moving averages (EMA) of the weights: read at another point of the step, or
apart only as far as the weights they average."""


# How much further apart than its weight an average must be to be no difference of the
# weights: under one EMA formula an average moves (1 - decay) x its weight's difference, so
# at the first step the averages part they can be no further apart than their weights; read at
# another point of the step they part by (1 - decay) x the step's update, ~1e4 x rounding.
FAR = 100


def read_order(obs):
  """The averages differ while the weights they average (and everything else) do not, or
  while everything else is apart by rounding only and each average is far further apart
  than its weight (Inception's faithful port with its EMA read before the update, on kernels
  whose head rounds the loss 1 ULP otherwise: the order unnamed behind that ULP before)."""
  averages = [r for r in obs.bad if r.kind == "average"]
  if not averages:
    return []
  s = min(r.step for r in averages)
  at = [r for r in averages if r.step == s]
  rest = [r for r in obs.bad if r.step <= s and r.kind != "average"]
  beside = ""
  if rest:
    weights = {r.tf1: r for r in obs.table if r.kind == "weight" and r.step == s}
    if not obs.rounding(rest) or any(
        r.tf1 not in weights or r.diff.max_abs <= FAR * weights[r.tf1].diff.max_abs
        for r in at):
      return []
    first = min(rest, key=lambda r: (r.step, r.kind != "loss"))
    beside = (f"; beside them every row up to step {s} is rounding apart only (up to "
              f"{obs.worst(rest):.2g} relative, from step {first.step}'s {first.kind} of "
              f"{first.tf1}), each average {FAR} x or more further apart than its weight, "
              "which no difference of the weights under one EMA gives")
  order = obs.tf1.facts.get("ema_order", "after_update").replace("_", " ")
  averaged = "do not" if not rest else "differ by rounding only"
  if order == "after update":  # both read the updated weights: the order is no cause
    return [f"the moving averages differ while the weights they average {averaged}, and both "
            "sides apply the EMA after the update: the two EMAs compute differently (a "
            "setting the kit could not compare, such as a decay held in a tensor; another "
            f"formula) ({_size(averages)}{beside})"]
  return [f"the moving averages differ while the weights they average {averaged}: the "
          f"EMA reads the weights (and the step) at another point of the step; TF1 "
          f"applies it {order} (ema_order), TF2 after the optimizer's update; the original "
          "tutorial's grouped train op read them before, in most of its runs "
          f"({_size(averages)}{beside})"]


def _size(rows):
  """How far apart `rows` are: relative, or absolute where an average is 0 on one side
  (a bias's at its first step: its relative figure is infinite)."""
  rel = max(r.diff.max_rel for r in rows)
  if rel != float("inf"):
    return f"up to {rel:.2g} relative apart"
  return (f"up to {max(r.diff.max_abs for r in rows):.2g} apart, absolute (an average is 0 "
          "on one side, as a bias's is after its first step read before the update)")


def follow_the_weights(obs):
  """Each differing average is no further apart than its own weight: the EMA is the same,
  the weights it averages are not (their own cause is elsewhere)."""
  averages = [r for r in obs.bad if r.kind == "average"]
  if not averages or obs.fired(read_order):
    return []
  weights = {(r.step, r.tf1): r for r in obs.table if r.kind == "weight"}
  s = min(r.step for r in averages)
  at = [r for r in averages if r.step == s]
  own = [weights.get((s, r.tf1)) for r in at]
  if any(w is None or w.diff.within(obs.tolerance) or r.diff.max_abs > w.diff.max_abs
         for r, w in zip(at, own)):
    return []
  return [f"the moving averages follow the weights: from step {s} each differs no more than "
          f"the weight it averages ({len(at)} average(s), up to {obs.worst(at):.2g} "
          f"relative, their weights up to {obs.worst(own):.2g}); the EMA itself is the same "
          "computation on both sides"]
