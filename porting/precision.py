"""The precision a comparison's rounding is read at: the narrowest float dtype either side's
step computes in (float16 in a mixed-precision port: TF1's casts to float16 in the tower, a
Keras `mixed_float16` policy), and the bound of a difference that is rounding at it.

A difference is rounding where it stays within ROUNDING relative (of the largest entry) at
float32: about 84 of float32's epsilon, room for a few steps' growth of 1-ULP partings. A
step that computes in float16 rounds every product, sum and cast to 11 bits, not 24: the
same 84 epsilons are float16's (0.082 relative). Measured on a conv + batch norm + dense
port under `mixed_float16` (tests/fp16_bn_port.py): TF1's reduce_mean in float16 and Keras's
mean (which sums a float16 tensor in float32) part by 1 float16 ULP of the pooled
activations, and step 0's gradients stand up to 0.0024 relative apart, 2.4 float16
epsilons; at float32's bound that was 240 times past rounding and "not explained".
"""

import numpy as np

ROUNDING = 1e-5  # max rel of a difference that is rounding at float32, not another computation
FLOAT32 = "float32"
# bfloat16's 84 epsilons would be 0.66: a loss scaled by 1/2 on one side would read as its
# rounding. No bound is taken above this, where a factor of a port's own (a rate 10% off,
# 1/N of a loss) is still told from rounding.
CEILING = 0.1
# Narrowest first: the comparison reads its rounding at the first of these either side uses.
_NARROW = ("bfloat16", "float16", "float32", "float64")


def narrowest(ops):
  """The narrowest float dtype among the outputs of `ops` (a graph's operations), as a name
  ("float16"), or "float32" where none is a float narrower than it (a graph with no float
  output at all computes nothing a bound is read of)."""
  names = {t.dtype.name for op in ops for t in op.outputs}
  return next((name for name in _NARROW[:2] if name in names), FLOAT32)


def of(*dtypes):
  """The narrowest of `dtypes` (names; None where a side's is unknown, as in a record made
  before the kit read it: the other side's then decides)."""
  known = [d for d in dtypes if d in _NARROW]
  return min(known, key=_NARROW.index) if known else FLOAT32


def epsilons(dtype):
  """How many of float32's epsilons one of `dtype`'s is (float16: 8192; float32: 1)."""
  return float(_eps(dtype) / _eps(FLOAT32))


def bound(dtype):
  """The relative difference that is rounding where the narrowest dtype is `dtype`: float32's
  ROUNDING in its epsilons, never above CEILING."""
  return min(ROUNDING * epsilons(dtype), CEILING)


def said(dtype):
  """The bound at `dtype` as a line says it: the number and where it comes from."""
  scaled = ROUNDING * epsilons(dtype)
  return (f"{bound(dtype):.2g}, float32's {ROUNDING:g} in {dtype}'s epsilons" +
          (f" ({scaled:.2g}) held at {CEILING:g}" if scaled > CEILING else ""))


def in_epsilons(rel, dtype):
  """`rel` (a relative difference) in `dtype`'s epsilons: what a line says it as."""
  return rel / _eps(dtype)


def _eps(dtype):
  if dtype == "bfloat16":
    return 2.0 ** -7  # numpy has no bfloat16: 8 bits of significand
  return float(np.finfo(np.dtype(dtype)).eps)


def note(tf1, tf2):
  """The report's line on the precisions where either side computes narrower than float32
  (None otherwise): what the causes read rounding at."""
  narrow = of(tf1, tf2)
  if narrow == FLOAT32:
    return None
  sides = (f"both sides compute in {narrow}" if tf1 == tf2 else
           f"TF1 computes in {tf1 or 'a precision not recorded'}, TF2 in {tf2}")
  return (f"precision: {sides} (the narrowest float dtype of each side's graph ops); a "
          f"difference is read as rounding within {said(narrow)} (the tolerance and the ULP "
          "columns stay the rows' own: the values compared are float32)")
