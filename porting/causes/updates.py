"""Where the two updates part: the weights after a step further apart than that step's
gradients can move them, with the forward pass and the gradients at most rounding apart (a
clipping by each variable's norm against by the global norm, a decay of the weights, another
formula). Read for optimizers whose step is linear in the gradients; said by porting.parting
as where the bits part, and it keeps the rounding causes from being named over it."""

# Keras optimizers whose step moves a weight by the rate times a sum of gradients: a
# difference in the gradients moves the weights by at most UPDATE_SLACK x the rate x it
# (momentum's and Nesterov's factors). Adam's, RMSProp's and Adagrad's steps are not
# bounded so: a rounding of a gradient near 0 moves its weight by up to the rate.
LINEAR = ("SGD", "TF1Momentum")
UPDATE_SLACK = 4


def apart(obs):
  """[(weight Row, what it moved apart, the rate x its gradient's difference)] at the first
  step that differs: the trainable weights further apart after it than the step's gradients
  can move them, beyond rounding."""
  if obs.optimizers[1] not in LINEAR or not obs.bad:
    return []
  s = obs.start
  # Only past a forward pass and gradients at most rounding apart: where those differ more,
  # a clipping by their norm on both sides scales two different norms.
  if obs.worst(obs.table, s) > obs.bound:
    return []
  rate = max(abs(obs.rates[0][s]), abs(obs.rates[1][s]))
  rows = {(r.step, r.kind, r.tf1): r for r in obs.table}
  out = []
  for name in obs.names:
    w, g = rows.get((s, "weight", name)), rows.get((s, "gradient", name))
    if w is None or g is None or w.diff.shape_mismatch or w.diff.nonfinite or (
        g.diff.shape_mismatch or g.diff.nonfinite or w.diff.max_rel <= obs.bound):
      continue
    before = rows.get((s - 1, "weight", name))
    moved = rate * g.diff.max_abs
    if w.diff.max_abs > UPDATE_SLACK * moved + (before.diff.max_abs if before else 0.0):
      out.append((w, w.diff.max_abs, moved))
  return sorted(out, key=lambda x: -x[0].diff.max_rel)


def detail(obs):
  """What the update Parting says of apart(obs)."""
  at = obs.update_apart
  step = [r for r in obs.table if r.step == obs.start and
          r.kind in ("loss", "outputs", "gradient")]
  g = obs.worst(step)
  named = "; ".join(f"{w.tf1} {w.diff.max_rel:.2g} relative (|diff| {d:.2g} against the "
                    f"rate x its gradient's {m:.2g})" for w, d, m in at[:3])
  return ("the forward pass and every gradient " +
          ("the same bits" if g == 0 else f"at most {g:.2g} relative apart") +
          ", the weights after it further apart than the step's gradients move them: " +
          named + (f", and {len(at) - 3} more" if len(at) > 3 else "") +
          "; what runs there is the optimizers' update: a clipping of the gradients (by "
          "each variable's norm against by their global norm; each replica's before the "
          "sum), a decay of the weights, or its formula")
