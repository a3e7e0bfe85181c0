"""Causes in the moving averages (EMA) of the weights: read at another point of the step, or
apart only as far as the weights they average."""


def read_order(obs):
  """The averages differ while the weights they average (and everything else) do not."""
  averages = [r for r in obs.bad if r.kind == "average"]
  if not averages:
    return []
  s = min(r.step for r in averages)
  if [r for r in obs.bad if r.step <= s and r.kind != "average"]:
    return []
  order = obs.tf1.facts.get("ema_order", "after_update").replace("_", " ")
  if order == "after update":  # both read the updated weights: the order is no cause
    return ["the moving averages differ while the weights they average do not, and both "
            "sides apply the EMA after the update: the two EMAs compute differently (a "
            "setting the kit could not compare, such as a decay held in a tensor; another "
            f"formula) (up to {obs.worst(averages):.2g} relative apart)"]
  return ["the moving averages differ while the weights they average do not: the "
          f"EMA reads the weights (and the step) at another point of the step; TF1 "
          f"applies it {order} (ema_order), TF2 after the optimizer's update; the original "
          "tutorial's grouped train op read them before, in most of its runs (up to "
          f"{obs.worst(averages):.2g} relative apart)"]


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
