"""Per-variable comparison of two {name: ndarray} dicts, and its table."""

import collections

import numpy as np

from porting import diffs

Row = collections.namedtuple("Row", "variable shape max_abs max_rel ok")


def compare(expected, actual, rel_tolerance=0.0):
  """One Row per variable of `expected`, by porting.diffs (the one difference of the project).

  max_rel is max |diff| / max |expected| of the variable (the scale of its largest entry, so
  entries near zero do not blow it up). A row is ok when max_rel <= rel_tolerance; with the
  default 0 only the same bits pass. A NaN or an infinity on either side is never ok, not even
  against the same bits: two runs that both went NaN prove nothing equal.
  """
  rows = []
  for name, want in expected.items():
    got = actual.get(name)
    if got is None or np.shape(got) != np.shape(want):
      rows.append(Row(name, np.shape(want), float("inf"), float("inf"), False))
      continue
    found = diffs.diff(np.asarray(want), np.asarray(got))
    rows.append(Row(name, np.shape(want), found.max_abs, found.max_rel,
                    found.within(rel_tolerance)))
  return rows


def table(title, rows, rel_tolerance):
  """The rows as aligned text, with a title line naming the tolerance."""
  bound = "bit-identical" if rel_tolerance == 0 else f"max rel diff <= {rel_tolerance:g}"
  lines = [f"{title} ({bound})",
           f"  {'variable':<48} {'shape':<16} {'max |diff|':>11} {'max rel':>10}  verdict"]
  for r in rows:
    shape = "x".join(str(d) for d in r.shape) or "scalar"
    lines.append(f"  {r.variable:<48} {shape:<16} {r.max_abs:>11.3g} {r.max_rel:>10.3g}  "
                 f"{'ok' if r.ok else 'FAIL'}")
  return "\n".join(lines)
