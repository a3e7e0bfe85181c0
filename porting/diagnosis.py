"""The known causes of a difference between TF1 towers and their TF2 port, named where the
numbers fit them. `causes(...)` builds the typed Observations of a comparison once and runs
every rule of RULES over them (porting.causes: one function a cause, its signature read from
the observations, its line; each tested by a deliberately wrong port). Where none fits, the
line says where the bits first part (porting.parting), never a guess.

  random ops    a forward output differs at step 0 from the same weights and batch, and a side
                draws randomly where the other does not, or draws as written (random_causes)
  not finite    a row holds NaN or Inf: where the first one appeared
  then, in order: causes.scale, causes.optimizers' learning rate, causes.batch_norm,
  causes.gradients, causes.averages, the optimizers' own (porting/causes/__init__.py)
"""

import dataclasses
import functools

import numpy as np

from porting import combination as combination_lib
from porting import findings
from porting import parting
from porting import precision as precision_lib
from porting import projections
from porting import random_causes
from porting import unexplained
from porting.causes import averages
from porting.causes import batch_norm
from porting.causes import combination as combination_causes
from porting.causes import gradients
from porting.causes import machines
from porting.causes import optimizers
from porting.causes import outputs
from porting.causes import precision as precision_causes
from porting.causes import scale
from porting.causes import shares
from porting.causes import towers
from porting.causes import updates

NOISE = 1e-2  # max rel from which a vanishing gradient's difference is its values' noise

# The order the report lists them in; a rule may read what earlier ones found (obs.fired).
RULES = (outputs.structure, precision_causes.other_precisions, towers.later_towers,
         combination_causes.transformed_scale, combination_causes.summed_towers,
         scale.gradient_scale, scale.uniform_scale, scale.loss_only, scale.regularization,
         combination_causes.regularization_placement, shares.loss_shares,
         scale.penalty_by_hand,
         optimizers.learning_rate, batch_norm.fused, batch_norm.other_towers,
         batch_norm.update_rounding, averages.read_order, gradients.vanishing_only,
         gradients.fused_bias, gradients.gradient_sums, precision_causes.low_precision,
         scale.not_a_power_of_two, averages.follow_the_weights,
         optimizers.adam_one_minus_beta, optimizers.adam_beta_powers, optimizers.momentum,
         optimizers.rmsprop, optimizers.sparse_update, machines.other_runtime)
# The rules that name a rounding: none where the update parts further than rounding
# (Observations.update_apart), which they cannot explain.
ROUNDING_RULES = (scale.loss_only, shares.loss_shares, batch_norm.fused, batch_norm.update_rounding,
                  gradients.vanishing_only, gradients.fused_bias, gradients.gradient_sums,
                  precision_causes.low_precision, scale.not_a_power_of_two,
                  optimizers.sparse_update, machines.other_runtime)


@dataclasses.dataclass
class Observations:
  """What a comparison measured, as the rules read it: the pairs, both Traces, every Row and
  the tolerance, N, the optimizers' class names, the gradient reduction, oneDNN; `found`:
  the findings.Findings the rules before have given."""
  pairs: list
  tf1: object
  tf2: object
  table: list
  tolerance: float
  n: int
  optimizers: tuple
  reduction: str
  onednn: bool
  combination: object = None  # the TF1 side's TowerCombination
  found: list = dataclasses.field(default_factory=list)
  # {rule: the Findings it gave}: what a later rule reads of an earlier one's (fired), by
  # the rule, never by its sentence.
  findings: dict = dataclasses.field(default_factory=dict)

  def __post_init__(self):
    self.bad = [r for r in self.table if not r.diff.within(self.tolerance)]
    self.rates = ([s.learning_rate for s in self.tf1.steps],
                  [s.learning_rate for s in self.tf2.steps])
    self.to2 = dict(self.pairs)
    # A cause is read where its signature first shows, the first two steps that differ:
    # later steps of a real model diverge for reasons of their own (a max-pool tie that
    # flips turns 8 ULPs into 1e-2), and must not unname it.
    self.start = min(r.step for r in self.bad) if self.bad else 0
    self.early = [r for r in self.bad if r.step <= self.start + 1]
    self.first1, self.first2 = self.tf1.steps[0], self.tf2.steps[0]
    self.names = [k for k in self.tf1.trainable if k in self.to2]
    if self.combination is None:
      self.combination = combination_lib.AVERAGE_GRADIENTS
    self.loss_factor = self.combination.loss_factor(self.n, self.reduction)

  @functools.cached_property
  def precision(self):
    """The narrowest float dtype either side's step computes in (porting.precision)."""
    return precision_lib.of(self.tf1.facts.get("precision"), self.tf2.facts.get("precision"))

  @property
  def bound(self):
    """The relative difference that is rounding at that precision: every rule's ROUNDING."""
    return precision_lib.bound(self.precision)

  @functools.cached_property
  def transform(self):
    """The one factor by which tf1_gradients scaled the combined gradients at step 0 (1.0:
    none, or it left them as they were); None where it did more than scale them (a clipping
    that cut some, not all, by one factor) or there is no tf1_gradients."""
    transformed = self.tf1.facts.get("transformed")
    if not transformed:
      return None
    g1 = [self.first1.gradients[k] for k in self.names if k in transformed]
    return projections.factor(g1, [transformed[k] for k in self.names if k in transformed])

  @functools.cached_property
  def ratio(self):
    """The TF2 step-0 gradients' projection on TF1's (N > 1, TF1's not all zero), or None."""
    g1 = [self.first1.gradients[k] for k in self.names]
    if self.n == 1 or not any(np.any(g) for g in g1):
      return None
    g2 = [self.first2.gradients[self.to2[k]] for k in self.names]
    return projections.projection(g1, g2)

  @property
  def scaled(self):
    """Whether the gradients were found N x or 1/N apart."""
    return self.fired(scale.gradient_scale, scale.uniform_scale,
                      combination_causes.transformed_scale, combination_causes.summed_towers)

  @functools.cached_property
  def largest(self):
    return max((float(np.abs(g).max()) for g in self.first1.gradients.values()
                if np.size(g)), default=0.0)

  @functools.cached_property
  def parting(self):
    if self.update_apart:
      return parting.Parting(self.start, "update", detail=self.update_detail())
    probes = self.tf1.facts.get("probes", {})
    # A gradient 0 up to rounding parts first wherever it is (an attention key's bias):
    # where the bits part is said of the rest (the not-explained line says what it left).
    bad = [r for r in self.bad if not self._noise(r)] or self.bad
    if probes is None:  # the forward pass fetched layer by layer gave other bits
      where = parting.first_parting(bad, self.table, None)
      if where is not None and where.kind == "forward" and where.step == 0:
        where.detail = (": a tower's loss or outputs differ from the same weights and batch; "
                        "its layers could not be compared: the forward pass run again with "
                        "each layer's output fetched gives other bits than the step's own "
                        "(a fetched tensor keeps grappler from fusing its ops)")
      return where
    return parting.first_parting(bad, self.table, self.tf1.facts.get("structure"),
                                 probes, self.tf2.facts.get("probes"), self.pairs, self.bound,
                                 (self.tf1.facts.get("loss_terms"),
                                  self.tf2.facts.get("loss_terms")), self.vanishing)

  @functools.cached_property
  def update_apart(self):
    """updates.apart: the weights further apart after the first step that differs than its
    gradients can move them."""
    return updates.apart(self)

  def update_detail(self):
    return updates.detail(self)

  @functools.cached_property
  def vanishing(self):
    """The TF1 variables whose gradient vanishes at a step: values and difference both within
    the rounding bound (self.bound) of the step's largest gradient (a bias before a batch norm: mathematically 0,
    its values rounding noise on both sides, so any relative difference, and so are the
    weight and the slots that noise moves)."""
    # Each step's largest TF1 gradient, kept as the steps ran (step 0's where the record
    # or trace holds no more).
    largest = self.tf1.facts.get("largest_gradient") or [self.largest]
    floor = lambda step: self.bound * (largest[step] if step < len(largest) else 0.0)
    # At any step: a gradient that is 0 but for rounding at step 2 (a second layer's
    # attention key bias, the same bits until then) is noise there as well.
    # Noise, not a small gradient: the two sides apart by a share of the values themselves
    # (NOISE of them; rounding of a real gradient, however small, is ~1e-7 of it).
    return {r.tf1 for r in self.table if r.kind == "gradient" and 0 < r.diff.max_abs and
            r.diff.max_rel >= NOISE and r.diff.max_abs <= floor(r.step) and
            r.diff.max_abs <= floor(r.step) * r.diff.max_rel}

  def rounding(self, rows, bound=None):
    """Whether every row of `rows` is at most rounding apart: `bound` relative (the
    comparison's, self.bound, by default), or a variable's whose gradient vanishes (its
    gradient, weight, slots and average)."""
    bound = self.bound if bound is None else bound
    return all(r.diff.max_rel <= bound or self._noise(r) for r in rows)

  def named_fault(self):
    """Whether a rule before the caller named a difference of the programs (not a rounding:
    ROUNDING_RULES')."""
    return any(found for rule, found in self.findings.items() if rule not in ROUNDING_RULES)

  def fired(self, *rules):
    """Whether any of `rules` (run before the caller) named its cause."""
    return any(self.findings.get(rule) for rule in rules)

  def worst(self, rows, step=None):
    """The largest max relative difference of `rows` (of step `step`'s forward pass and
    gradients where given): the measured size a line states."""
    if step is not None:
      rows = [r for r in rows if r.step == step and r.kind in ("loss", "outputs", "gradient")]
    return max((r.diff.max_rel for r in rows if r is not None and not self._noise(r)),
               default=0.0)

  def _noise(self, row):
    return row.kind not in ("loss", "outputs") and row.tf1.split(":")[0] in self.vanishing

  def noise_note(self):
    """What a line sized by worst() left out, where anything was."""
    if not self.vanishing:
      return ""
    names = sorted(self.vanishing)
    return (f"; left out: {', '.join(names[:3])}{', ...' if len(names) > 3 else ''}, whose "
            "gradient is within rounding of 0 on both sides (as a bias before a batch "
            "norm's is): its relative figures say nothing, and no tolerance covers them")


def causes(pairs, tf1, tf2, table, tolerance, replicas, optimizers_, reduction="sum",
           onednn=False, combination=None):
  """The known causes that fit the differences of `table` (report.Rows), as
  findings.Findings in the report's order."""
  obs = Observations(pairs, tf1, tf2, table, tolerance, replicas, optimizers_, reduction,
                     onednn, combination)
  if not obs.bad and obs.rates[0] == obs.rates[1]:
    return []
  for rule in RULES:
    if not (obs.update_apart and rule in ROUNDING_RULES):
      obs.findings[rule] = findings.of_rule(rule, rule(obs))
      obs.found += obs.findings[rule]
  found = [findings.Finding(findings.RANDOM, line)
           for line in random_causes.causes(obs.bad, tf1.facts, tf2.facts)] + obs.found
  nonfinite = [r for r in obs.bad if r.diff.nonfinite]
  if nonfinite:
    first = min(nonfinite, key=lambda r: r.step)
    found.insert(0, findings.Finding(findings.NOT_FINITE, (
        f"not finite: {len(nonfinite)} row(s) hold NaN or Inf, the first at step "
        f"{first.step}, {first.kind} of {first.tf1}; values that are not finite compare as "
        "nothing (NaN against NaN is no equality): find where the first comes from, "
        "tf.debugging.enable_check_numerics() on both sides")))
  # A finding that says what follows from another difference (the averages of weights that
  # differ) explains nothing: where it is all there is, where the bits part is said too.
  follows = findings.kind_of(averages.follow_the_weights)
  if obs.bad and all(f.kind == follows for f in found):
    found.append(findings.Finding(findings.NOT_EXPLAINED, unexplained.line(obs)))
  return found
