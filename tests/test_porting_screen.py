"""The kit's report as a terminal shows it (porting.screen): no line past the width, the
verdict, the first difference and the causes before the table (they came after ~100 rows, on
lines of 120-301 columns), every cause and row still there."""

import dataclasses

import pytest

import porting
from porting import screen
from tests import dropout_adam_port as m

pytestmark = pytest.mark.filterwarnings("ignore:`tf.layers.", "ignore:`layer.apply`")


def test_names_are_cut_from_the_left():
  assert screen._fit("net/bn1/moving_variance", 23) == "net/bn1/moving_variance"  # pylint: disable=protected-access
  assert screen._fit("net/bn1/moving_variance", 12) == "..g_variance"  # pylint: disable=protected-access


def test_ulps_past_six_digits_fit_their_column():
  """A gradient 0 but for rounding (BERT's attention key bias) is 1e-14 apart around 0:
  1315438592 ULPs made its row 104 columns wide."""
  assert [screen.ulps_column(u) for u in (0, 999999, 1315438592, 2 ** 32, 10 ** 19)] == [
      "0", "999999", "1.3e9", "4.3e9", "1.0e19"]


@pytest.mark.parametrize("width", [100, 84, 60])
@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_the_verdict_and_causes_come_first_within_the_width(width):
  # A port with Keras's default Adam epsilon: a cause, named.
  report = porting.compare(dataclasses.replace(m.port(), gradient_reduction="mean"),
                           m.batches(1, steps=2), replicas=1, steps=2, tolerance=1e-6)
  whole = report.text()
  shown = report.text(width=width).splitlines()
  # A table row needs its numbers and two names of 12 columns (83); the other lines wrap.
  assert max(map(len, shown)) <= max(width, screen.FIXED + 2 * screen.SHORTEST), shown
  assert all(len(line) <= width for line in shown if not line.startswith("  ") or
             line.startswith(("  cause:", "  machine:", "  not compared:"))), shown
  verdict = "EQUAL" if report.equal else "NOT EQUAL"
  heads = [line for line in shown if not line.startswith(screen.INDENT)]
  assert heads[1].startswith(verdict) and shown[-1] == verdict
  table = shown.index(next(line for line in shown if line.startswith("  kind ")))
  joined = " ".join(" ".join(shown[:table]).split())
  for hint in report.hints:  # each cause whole, before the table
    assert " ".join(f"cause: {hint}".split()) in joined
  # Every row of the whole report is a row here, in the same order.
  rows = [line.split()[:1] for line in whole.splitlines() if line.startswith("  ") and
          len(line.split()) > 7 and line.split()[-1] in ("ok", "DIFFERS")]
  assert [line.split()[:1] for line in shown[table + 1:-1]] == rows
