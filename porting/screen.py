"""The report as a terminal shows it: at most `width` columns, what a team reads first first.

  NOT EQUAL: the first difference is at step 0, weight of bn1/moving_variance (...)
    cause: ... (each cause, wrapped, its continuation indented)
    machine: ..., not compared: ..., replicas apart: ...
    learning rate per step ...
    the table, its names shortened from the left to fit (`..` where cut)
  NOT EQUAL

Report.text() without a width is the same report unwrapped, each line whole, with the table
first: what a program reads (and the kit's tests).
"""

import textwrap

WIDTH = 100
INDENT = "    "  # a wrapped line's continuation
# kind, max |diff|, max rel, ULPs, first, verdict and the spaces between: the table's
# columns beside the two names.
FIXED = 2 + 8 + 1 + 1 + 1 + 10 + 1 + 9 + 1 + 6 + 2 + 5 + 2 + 10
SHORTEST = 12  # a name column narrower than this says nothing


def lines(report, width=WIDTH):
  """The report's lines, none over `width` columns (a table row where a name column would be
  narrower than SHORTEST)."""
  first = report.first_difference
  verdict = "EQUAL" if report.equal else "NOT EQUAL"
  if first is not None:
    head = (f"{verdict}: the first difference is at step {first.step}, {first.kind} of "
            f"{first.tf1} (max |diff| {first.diff.max_abs:.3g}, {first.diff.ulps} ULPs)")
  elif not report.equal:
    head = f"{verdict}: the learning rates differ"
  else:
    head = f"{verdict}: every row within the tolerance"
  out = wrap(report.title(), width, INDENT) + wrap(head, width, INDENT)
  for line in [f"cause: {h}" for h in report.hints] + report.notes() + rates(report):
    out += wrap(f"  {line}", width, INDENT)
  out += table(report, width)
  out.append(verdict)
  return out


def wrap(line, width, indent):
  """`line` broken at spaces into lines of at most `width` columns, the later ones after
  `indent`; a word longer than that (a path) stays whole."""
  if len(line) <= width:
    return [line]
  return textwrap.wrap(line, width, subsequent_indent=indent, break_long_words=False,
                       break_on_hyphens=False)


def rates(report):
  tf1, tf2 = report.learning_rates
  if tf1 == tf2:
    return [f"learning rate per step, the same on both sides: {tf1}"]
  return [f"learning rate per step: TF1 {tf1}", f"learning rate per step: TF2 {tf2}  DIFFERS"]


def table(report, width):
  """The rows of report.summary, their name columns as wide as the longest name or as `width`
  leaves them."""
  from porting import report as report_lib  # pylint: disable=g-import-not-at-top
  rows = report_lib.summary(report.rows, report.tolerance)
  names1 = [tf1 for _, tf1 in rows] + ["TF1"]
  names2 = [tf2 for _, _, tf2 in rows.values()] + ["TF2"]
  room = max(2 * SHORTEST, width - FIXED)
  w1 = min(max(map(len, names1)), max(SHORTEST, room - min(max(map(len, names2)), room // 2)))
  w2 = min(max(map(len, names2)), room - w1)
  out = [f"  {'kind':<8} {'TF1':<{w1}} {'TF2':<{w2}} {'max |diff|':>10} {'max rel':>9} "
         f"{'ULPs':>6}  first  verdict"]
  for (kind, tf1), (worst, first, tf2) in rows.items():
    ulps = "-" if worst.ulps is None else ulps_column(worst.ulps)
    out.append(f"  {kind:<8} {_fit(tf1, w1):<{w1}} {_fit(tf2, w2):<{w2}} "
               f"{worst.max_abs:>10.3g} {worst.max_rel:>9.3g} {ulps:>6}  "
               f"{'-' if first is None else first:>5}  {report_lib.verdict(worst, first)}")
  return out


def ulps_column(ulps):
  """`ulps` in the column's 6 places: a noise gradient's run to 10 digits (1315438592 ULPs
  for a difference of 1e-14 around 0), written 1.3e9 there."""
  whole = str(ulps)
  if len(whole) <= 6:
    return whole
  mantissa, exponent = f"{ulps:.1e}".split("e")
  return f"{mantissa}e{int(exponent)}"


def _fit(name, width):
  """`name` in `width` columns: whole, or its end after `..` (a variable's own name and slot
  are at its end)."""
  return name if len(name) <= width else ".." + name[len(name) - width + 2:]
