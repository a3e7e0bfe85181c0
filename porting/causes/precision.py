"""A comparison read at a precision narrower than float32 (porting.precision): the two sides
computing in other precisions, and every difference where the bits first part within the
narrower dtype's rounding."""

from porting import precision as precision_lib

_READ = "read from each side's graph: its ops' narrowest float outputs"


def _sides(obs):
  return obs.tf1.facts.get("precision"), obs.tf2.facts.get("precision")


def _size(obs, worst):
  narrow = obs.precision
  return (f"up to {worst:.2g} relative, {precision_lib.in_epsilons(worst, narrow):.2g} of "
          f"{narrow}'s epsilon; its rounding bound is {precision_lib.said(narrow)}")


def _where(obs):
  return obs.parting.line() if obs.parting is not None else "where the bits part is not known"


def other_precisions(obs):
  """The two sides' graphs compute in other dtypes (TF1's towers cast to float16, the port
  keeps a float32 policy, or the other way): a difference of the programs, named whatever
  its size; past the narrower dtype's rounding, something else may differ besides."""
  tf1, tf2 = _sides(obs)
  if not obs.bad or tf1 is None or tf2 is None or tf1 == tf2:
    return []
  worst = obs.worst(obs.early)
  fits = obs.rounding(obs.early)
  narrow = obs.precision
  return [f"the two sides compute in other precisions: TF1 in {tf1}, TF2 in {tf2} ({_READ}); "
          f"steps {obs.start}-{obs.start + 1} differ {_size(obs, worst)}"
          + ("" if fits else f", past {narrow}'s rounding: something else may differ besides")
          + f"; {_where(obs)}. The port does not compute as the script does: give the "
          f"other side {narrow} too (a Keras dtype policy 'mixed_{narrow}', or TF1's casts in "
          "the tower), then compare again"]


def low_precision(obs):
  """Both sides compute in float16 or bfloat16 (or one does and the other's precision was not
  read), no other cause named a fault, and every difference of the step where the bits first
  part is within that dtype's rounding, past float32's. Later steps are not held to it: in
  float16 rounding grows fast (measured on a float16 ResNet-8 port whose only difference is
  its pooling's float16 sum: step 0 up to 0.0024 relative apart, step 1 0.32), and a later
  row past the bound is said as not explained by this."""
  narrow = obs.precision
  at = [r for r in obs.bad if r.step == obs.start]
  if narrow == precision_lib.FLOAT32 or not at or obs.fired(other_precisions) or (
      obs.named_fault()) or not obs.rounding(at):
    return []
  worst = obs.worst(at)
  if worst <= precision_lib.ROUNDING:
    return []  # float32's rounding (an update's arithmetic), which another rule names
  tf1, tf2 = _sides(obs)
  sides = (f"both sides compute in {narrow} ({_READ})" if tf1 == tf2 else
           f"the {'TF1' if tf2 is None else 'TF2'} side computes in {narrow} (read from its "
           "graph); the other side's precision was not read (a record from before the kit "
           "read it)")
  line = (f"{narrow} rounding: {sides}, and every difference of step {obs.start}, where the "
          f"bits first part, is within {narrow}'s rounding ({_size(obs, worst)}); "
          f"{_where(obs)}: two programs that cast, sum or fuse {narrow} values in another "
          f"order part there by a few of its ULPs. A difference this small in {narrow} cannot "
          "tell a fault of the port from rounding: compare with a tolerance of that size, and "
          "check the rest of the port in float32 on both sides (no casts in the tower, a "
          "float32 policy)")
  later = [r for r in obs.bad if r.step > obs.start and not obs.rounding([r])]
  if later:
    first = min(later, key=lambda r: (r.step, -r.diff.max_rel))
    line += (f"; from step {first.step} {first.kind} {first.tf1} is {first.diff.max_rel:.2g} "
             f"relative apart, past {narrow}'s rounding, which this does not explain (rounding "
             "grows through the steps: where the port computes as the script, the same port "
             "with the parting above removed shows it)")
  return [line]
