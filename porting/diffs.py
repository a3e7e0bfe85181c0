"""How far apart two arrays are: max absolute and relative difference, and ULPs.

`ulps` counts the representable floats between two values of the same dtype (0: the same
bits; 1: neighbours), the measure in which "bit-identical" and "a rounding apart" differ.
"""

import dataclasses

import numpy as np

_INT = {np.dtype(np.float16): np.int16, np.dtype(np.float32): np.int32,
        np.dtype(np.float64): np.int64}


@dataclasses.dataclass(frozen=True)
class Diff:
  """max_abs: max |a - b|; max_rel: max_abs / max |a| (the scale of a's largest entry, so
  entries near zero do not blow it up); ulps: the largest distance in representable floats
  (None for non-float arrays); shape_mismatch: the shapes differ (nothing else is
  meaningful); nonfinite: either side holds a NaN or an infinity (the numbers above compare
  them as equal where both sides hold the same one)."""
  max_abs: float
  max_rel: float
  ulps: object
  shape_mismatch: bool = False
  nonfinite: bool = False

  def within(self, tolerance):
    """Equal up to `tolerance` (a max_rel bound; 0: the same bits). Never where a value is
    not finite: two NaNs of the same bits prove nothing about a port."""
    if self.shape_mismatch or self.nonfinite:
      return False
    if tolerance == 0:
      return self.max_abs == 0 and (self.ulps in (None, 0))
    return self.max_rel <= tolerance


def flat(value):
  """`value` as a flat float32 array (what the diagnosis's dot products read)."""
  return np.ravel(np.asarray(value, np.float32))


def _ordered(x):
  """The float's bits as integers that order like the floats (so neighbours differ by 1)."""
  ints = x.view(_INT[x.dtype]).astype(np.int64)
  top = np.int64(1) << (8 * x.dtype.itemsize - 1)
  return np.where(ints < 0, -top - ints, ints)


# Elements per block: differences are taken block by block, so that a 20M-parameter layer
# costs a few 8 MB temporaries, not float64 copies of the whole of both arrays.
BLOCK = 1 << 20


def diff(a, b):
  """The Diff of `b` against the reference `a`."""
  with np.errstate(invalid="ignore"):  # inf - inf: equal infinities, handled below
    found = _diff(a, b)
  if found.shape_mismatch or not _inexact(a) or (
      np.isfinite(a).all() and np.isfinite(b).all()):
    return found
  return dataclasses.replace(found, nonfinite=True)


def _inexact(a):
  return np.issubdtype(np.asarray(a).dtype, np.inexact)


def _diff(a, b):
  a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
  if a.shape != b.shape:
    return Diff(float("inf"), float("inf"), None, shape_mismatch=True)
  if a.size == 0:
    return Diff(0.0, 0.0, 0)
  floats = a.dtype == b.dtype and a.dtype in _INT
  if floats and np.array_equal(a.view(_INT[a.dtype]), b.view(_INT[a.dtype])):
    return Diff(0.0, 0.0, 0)  # the same bits: the common case, and the cheapest
  flat_a, flat_b = a.reshape(-1), b.reshape(-1)
  if floats and not (np.isnan(flat_a).any() or np.isnan(flat_b).any()):
    return _float_diff(flat_a, flat_b)
  max_abs, scale, ulps, finite = 0.0, 0.0, 0, False
  for start in range(0, flat_a.size, BLOCK):
    block_a, block_b = flat_a[start:start + BLOCK], flat_b[start:start + BLOCK]
    wide_a, wide_b = block_a.astype(np.float64), block_b.astype(np.float64)
    both_nan = np.isnan(wide_a) & np.isnan(wide_b)
    delta = np.where(both_nan | (wide_a == wide_b), 0.0, np.abs(wide_a - wide_b))  # inf, inf
    max_abs = max(max_abs, float(np.max(np.where(np.isnan(delta), np.inf, delta))))
    if np.isfinite(wide_a).any():
      finite = True
      scale = max(scale, float(np.nanmax(np.abs(wide_a))))
    if floats:
      distance = np.abs(_ordered(block_a) - _ordered(block_b))
      ulps = max(ulps, int(np.where(both_nan, 0, distance).max()))
  scale = scale if finite else 0.0
  max_rel = max_abs / scale if scale else (0.0 if max_abs == 0 else float("inf"))
  return Diff(max_abs, max_rel, ulps if floats else None)


def _float_diff(a, b):
  """diff() of two flat float arrays of one dtype without NaNs: the same numbers in fewer
  passes over memory (a 20M-parameter model's weights, slots and gradients differing
  everywhere are ~90M values a step), blocks small enough for the CPU's caches."""
  max_abs, scale, ulps, block = 0.0, 0.0, 0, 1 << 16
  ints = _INT[a.dtype]
  magnitude = ints(np.iinfo(ints).max)  # every bit but the sign
  for start in range(0, a.size, block):
    block_a, block_b = a[start:start + block], b[start:start + block]
    delta = block_a.astype(np.float64)
    np.subtract(delta, block_b, out=delta)
    np.abs(delta, out=delta)
    # fmax skips the NaN of inf - inf: equal infinities, no difference.
    max_abs = max(max_abs, float(np.fmax.reduce(delta)))
    scale = max(scale, float(block_a.max()), -float(block_a.min()))
    order_a = _ordered_fast(block_a.view(ints), magnitude).astype(np.int64)
    np.subtract(order_a, _ordered_fast(block_b.view(ints), magnitude), out=order_a)
    ulps = max(ulps, int(np.abs(order_a).max()))
  if not np.isfinite(scale):
    scale = scale if np.isfinite(a).any() else 0.0
  max_rel = max_abs / scale if scale else (0.0 if max_abs == 0 else float("inf"))
  return Diff(max_abs, max_rel, ulps)


def _ordered_fast(bits, magnitude):
  """_ordered() in the float's own integer width, without a masked write (numpy's masked
  ufuncs were 6.5 ns an element here): sign-magnitude to two's complement, -0.0 and 0.0 both
  0. The negation of a magnitude always fits."""
  sign = bits >> (8 * bits.dtype.itemsize - 1)  # 0, or -1 for a negative float
  return ((bits & magnitude) ^ sign) - sign
