"""Gradients as vectors: one side's projected on the other's, and the one factor that maps
one onto the other where there is one (what the scale causes and a clipping's transform are
read from)."""

import numpy as np

from porting.diffs import flat

FIT = 1e-5  # the residual, relative to the factor, within which `factor` is one factor


def dot(xs, ys):
  """The dot product of two lists of arrays, variable by variable (no concatenated float64
  copy of a 100M-parameter model's gradients: its sums of float32 products decide ratios to
  5%, which float32 carries)."""
  return sum(float(np.dot(flat(x), flat(y))) for x, y in zip(xs, ys))


def projection(onto, xs):
  """The projection factor of the arrays `xs` on `onto` (x . o / o . o)."""
  return dot(xs, onto) / dot(onto, onto)


def factor(onto, xs):
  """The one factor c with xs = c x onto, within FIT; None where no one factor fits (a
  clipping that cut some arrays, not all) or `onto` is all zero."""
  den = dot(onto, onto)
  if den == 0:
    return None
  c = dot(xs, onto) / den
  residual = sum(float(np.dot(flat(b) - c * flat(a), flat(b) - c * flat(a)))
                 for a, b in zip(onto, xs))
  return c if residual <= (FIT * c) ** 2 * den else None
