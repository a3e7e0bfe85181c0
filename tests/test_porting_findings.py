"""The diagnosis' findings as data (porting.findings): each a line that knows its kind (the
rule of porting.causes that found it, or the diagnosis' own), in the report's order; rows made
by hand, so the test is of the diagnosis alone."""

import pickle

import numpy as np

from porting import diagnosis
from porting import findings
from porting.causes import averages
from porting.causes import batch_norm
from porting.diffs import Diff
from porting.report import Row
from porting.trace import Step
from porting.trace import Trace

ROUNDING = Diff(6e-8, 6e-8, 1)


def _causes(table, steps=2):
  def trace():
    step = Step([np.float32(1)], [None], {"w": np.ones(3, np.float32)}, 0.1, {}, {})
    return Trace([], ["w"], [step] * steps, {"update_ops": "first_tower"})
  return diagnosis.causes([("w", "w")], trace(), trace(), table, 0.0, 1, ("A", "B"), "mean")


def test_a_rules_finding_is_of_its_rules_kind():
  table = [Row(0, "weight", "bn/moving_mean", "bn/moving_mean", ROUNDING)]
  (found,) = _causes(table)
  assert found.kind == "batch_norm.update_rounding" == findings.kind_of(
      batch_norm.update_rounding)
  assert found.startswith("moving statistics differ by rounding")  # the line it prints


def test_where_nothing_fits_the_finding_is_where_the_bits_part():
  table = [Row(0, "weight", "w", "w", Diff(0.2, 0.2, 10 ** 6))]
  (found,) = _causes(table)
  assert found.kind == findings.NOT_EXPLAINED
  assert found.text.startswith("not explained: no known cause fits")


def test_a_value_not_finite_comes_first():
  nan = Diff(float("nan"), float("nan"), 0, nonfinite=True)
  found = _causes([Row(1, "weight", "w", "w", nan)])
  assert found[0].kind == findings.NOT_FINITE
  assert found[0].startswith("not finite: 1 row(s) hold NaN or Inf, the first at step 1")


def test_averages_that_follow_the_weights_explain_nothing_alone():
  table = [Row(0, "weight", "w", "w", Diff(0.2, 0.2, 10 ** 6)),
           Row(0, "average", "w", "w", Diff(0.02, 0.02, 10 ** 5))]
  kinds = [f.kind for f in _causes(table)]
  assert kinds == [findings.kind_of(averages.follow_the_weights), findings.NOT_EXPLAINED]


def test_every_kind_the_diagnosis_gives_is_a_rule_or_its_own():
  known = {findings.kind_of(rule) for rule in diagnosis.RULES}
  assert len(known) == len(diagnosis.RULES)  # no two rules share a kind
  assert not known & {findings.RANDOM, findings.NOT_FINITE, findings.NOT_EXPLAINED}


def test_a_finding_keeps_its_kind_through_a_pickle():
  found = findings.Finding("scale.regularization", "the regularization is counted 2 times")
  back = pickle.loads(pickle.dumps(found))
  assert (back.kind, back.text) == (found.kind, found.text)
  assert back == "the regularization is counted 2 times"
