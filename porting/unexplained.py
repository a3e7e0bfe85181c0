"""The line said where no known cause fits: where the bits first part (porting.parting), how
to narrow it, and what the numbers show besides (a fused TF1 batch norm, the first difference
past rounding, gradients that are noise). porting.diagnosis adds it where no rule's line fits."""

from porting import precision

PAST = 1e-3  # max rel from which a difference is no rounding of float32's, however grown
# (in float16 the comparison's bound is larger: past that, porting.precision)
KERNELS = 1e-4  # max rel of a parting that another kernel or graph rewrite may explain (at
# float32; in float16 as many of its epsilons)


def line(obs):
  """The not-explained line of diagnosis.Observations `obs` (which has rows outside the
  tolerance)."""
  first = min(obs.bad, key=lambda r: (r.step, r.kind != "loss"))
  where = obs.parting
  # Kernels' settings (oneDNN, grappler) only where what parts is of rounding's size: a
  # difference of 0.3 relative is no kernel's.
  size = (where.rel if where is not None and where.rel else
          obs.worst(obs.bad, obs.start) or first.diff.max_rel)
  small = size <= KERNELS * precision.epsilons(obs.precision)
  return ("not explained: no known cause fits; " + (
      where.line() if where is not None else
      f"the first difference is at step {first.step}, {first.kind} of {first.tf1}, "
      f"{first.diff.max_rel:.3g} relative") + "; compare fewer steps" + ((
          ", one tower, or TF_ENABLE_ONEDNN_OPTS=0 on this side (the record's TensorFlow "
          "chose its own)" if "recorded" in obs.tf1.facts else
          ", one tower, or TF_ENABLE_ONEDNN_OPTS=0 on both sides")
          if obs.onednn and small else " or one tower") +  # oneDNN's only where it is on
      " to narrow it" + (_grappler(where) if small else "") + _fused_first(obs)
      + _past_rounding(obs) + obs.noise_note())


def _grappler(where):
  """A forward pass apart by rounding: grappler's arithmetic optimizer may have rewritten a
  sum in one graph and not the other (a ResNet's residual add: the same bits with it off)."""
  if where is None or where.kind != "forward":
    return ""
  return ("; grappler's arithmetic optimizer, which may rewrite a sum in one graph and not "
          "the other, can be turned off on both sides to see (tf.config.optimizer."
          "set_experimental_options({'arithmetic_optimization': False}))")


def _past_rounding(obs):
  """Where the bits first part by rounding only (the forward pass and gradients of that
  step) and something is far past it, the first such row: a record's other kernels round at
  step 0 while the port's per-variable clipping moved the weights 0.2 apart in the same
  step, and the line said only 'the forward pass'."""
  kinds = ("loss", "outputs", "gradient", "weight", "slot", "average")
  first = [r for r in obs.bad if r.step == obs.start and r.kind in kinds[:3] and
           not obs._noise(r)]  # pylint: disable=protected-access
  if not first or not obs.rounding(first):
    return ""
  noise = obs._noise  # pylint: disable=protected-access
  past = [r for r in obs.bad if r.diff.max_rel > max(PAST, obs.bound) and not noise(r) and (
      r.step > obs.start or r.kind in kinds[3:])]
  if not past:
    return ""
  r = min(past, key=lambda r: (r.step, kinds.index(r.kind) if r.kind in kinds else 9))
  return (f"; step {obs.start}'s forward pass and gradients are rounding apart only (up to "
          f"{max(x.diff.max_rel for x in first):.2g} relative); the first difference past "
          f"rounding is at step {r.step}, {r.kind} of {r.tf1} ({r.diff.max_rel:.2g} relative), "
          "where it grew or another difference starts")


def _fused_first(obs):
  """Where TF1's batch norm is fused and its cause did not fit (step 0 more than rounding
  apart, which a fused kernel's sums can be where they cancel, or another fault beside it):
  said as what it is, not as the cause."""
  if not obs.tf1.facts.get("fused_batch_norm"):
    return ""
  return ("; TF1's batch norm is fused (FusedBatchNorm, its own rounding; step 0 is up to "
          f"{obs.worst(obs.table, 0):.2g} relative apart, more than the fused-kernel cause "
          "is named for): compare with fused=False on the TF1 side first, to see whether "
          "anything else differs")
