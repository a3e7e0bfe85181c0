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
  meaningful)."""
  max_abs: float
  max_rel: float
  ulps: object
  shape_mismatch: bool = False

  def within(self, tolerance):
    """Equal up to `tolerance` (a max_rel bound; 0: the same bits, NaNs compared as equal)."""
    if self.shape_mismatch:
      return False
    if tolerance == 0:
      return self.max_abs == 0 and (self.ulps in (None, 0))
    return self.max_rel <= tolerance


def _ordered(x):
  """The float's bits as integers that order like the floats (so neighbours differ by 1)."""
  ints = x.view(_INT[x.dtype]).astype(np.int64)
  top = np.int64(1) << (8 * x.dtype.itemsize - 1)
  return np.where(ints < 0, -top - ints, ints)


def diff(a, b):
  """The Diff of `b` against the reference `a`."""
  a, b = np.asarray(a), np.asarray(b)
  if a.shape != b.shape:
    return Diff(float("inf"), float("inf"), None, shape_mismatch=True)
  if a.size == 0:
    return Diff(0.0, 0.0, 0)
  wide_a, wide_b = a.astype(np.float64), b.astype(np.float64)
  both_nan = np.isnan(wide_a) & np.isnan(wide_b)
  delta = np.where(both_nan, 0.0, np.abs(wide_a - wide_b))
  max_abs = float(np.nanmax(np.where(np.isnan(delta), np.inf, delta)))
  scale = float(np.nanmax(np.abs(wide_a))) if np.isfinite(wide_a).any() else 0.0
  max_rel = max_abs / scale if scale else (0.0 if max_abs == 0 else float("inf"))
  ulps = None
  if a.dtype == b.dtype and a.dtype in _INT:
    distance = np.abs(_ordered(a) - _ordered(b))
    ulps = int(np.where(both_nan, 0, distance).max())
  return Diff(max_abs, max_rel, ulps)
