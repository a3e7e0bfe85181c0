"""Where the bits of the two sides first part, said structurally when no known cause fits.

  layer_structure.structure(graph, variables)  read once from the TF1 graph (tower 0's
      forward ops): the trainable variables from the loss down, and the tensors used more
      than once between each layer and the next layer up
  first_parting(rows, structure)  the first step that differs; there, the first of the
      forward pass (a tower's loss or outputs) or, with the forward pass the same bits, the
      first gradient from the loss down that differs while every gradient above it is the
      same bits, with what the TF1 graph holds there
"""

import dataclasses

import numpy as np

from porting import diffs
from porting import loss_terms
from porting import precision


@dataclasses.dataclass
class Parting:
  """step; kind: "forward" or "gradient"; variable: the TF1 variable whose gradient parts
  first (None in the forward pass); above: how many gradients above it are the same bits;
  rel: its max relative difference; shared: [(tensor, consumers, [op types])] between its
  layer and the next one up (TF1 tower 0)."""
  step: int
  kind: str
  variable: str = None
  above: int = 0
  rel: float = 0.0
  shared: list = dataclasses.field(default_factory=list)
  detail: str = ""
  inexact: int = 0  # of the gradients above: within the tolerance, not the same bits
  noisy: int = 0  # of the gradients above: left out, rounding noise of a vanishing gradient
  forward_inexact: bool = False  # the step's forward pass: within the tolerance, not the same
  head: bool = False  # parts after the last layer compared: in the head or the loss

  def line(self):
    if self.kind == "forward":
      detail = self.detail or ": a tower's loss or outputs differ from the same weights and batch"
      return (f"the bits part at step {self.step} in the forward pass"
              f"{'' if detail.startswith(':') else ' '}{detail}")
    if self.kind == "update":
      return f"the bits part at step {self.step} in the update: {self.detail}"
    above = (f"the {self.above} gradient(s) above it the same bits" if not self.inexact else
             f"the {self.above} gradient(s) above it within the tolerance ({self.inexact} of "
             "them not the same bits)")
    if self.noisy:  # not within any tolerance: left out, as the line's note says
      above += f" but for {self.noisy} left out (a gradient 0 but for rounding)"
    where = (f"the bits part at step {self.step} in the backward pass: from the loss down, "
             f"the first gradient that differs is {self.variable}'s ({self.rel:.2g} relative)"
             f", with {above} and the forward pass " +
             ("within the tolerance" if self.forward_inexact else "the same bits"))
    if self.shared:
      where += "; between its layer and the next one up, TF1's tower 0 uses " + "; ".join(
          f"{tensor} {k} times ({', '.join(types)})" for tensor, k, types in self.shared)
    return where


# Where the step's loss or outputs are this far apart (relative; at least the comparison's
# rounding bound, porting.precision), a layer apart by no more than that bound is not where
# they part: a fused TF1 batch norm rounds 1e-7 at the first
# layer while a loss left unmasked is 0.14 apart at the head, and the line sent a team to
# the first layer.
FAR = 1e-3


def _forward(step, probes1, probes2, pairs, order, reads=None, floor=0.0):
  """The forward Parting at `step` from both sides' probes (TF1 names; `order` from the loss
  down), or a plain forward Parting where no layer can be compared; `reads` {variable: k} of
  those read k times, said where they are (a probe compares a variable's first read); a
  layer apart by at most `floor` (relative) counts as the same."""
  where = _forward_layers(step, probes1, probes2, pairs, order, floor)
  if reads and where.detail:
    names = sorted(reads, key=lambda n: (-reads[n], n))
    where.detail += (f"; {', '.join(names[:2])}{', ...' if len(names) > 2 else ''} "
                     f"{'is' if len(names) == 1 else 'are'} read up to {reads[names[0]]} "
                     "times in the forward pass (a recurrent layer's steps, or weights "
                     "shared): the layers are compared at their first read, so a difference "
                     "at a later read shows after it")
  return where


def _forward_layers(step, probes1, probes2, pairs, order, floor=0.0):
  to2 = dict(pairs)
  rounded = 0.0  # the largest difference of the layers passed as the same (within `floor`)

  def same(x, y):
    nonlocal rounded
    if np.array_equal(x, y):
      return True
    rel = diffs.diff(x, y).max_rel
    if rel <= floor:
      rounded = max(rounded, rel)
      return True
    return False

  # Weights one side's probes read and the other's do not, or outside the TF1 order (a
  # recurrent cell's, read inside its loop): no layer of theirs is compared, and a parting
  # "before" a layer may lie in one of them.
  uncompared = [a for a, b in pairs if (a in probes1) != (b in probes2) or (
      a not in order and (a in probes1 or b in probes2))]
  before, skipped = None, []  # skipped: layers since `before` the kit could not compare
  for name in reversed(order):
    a, b = probes1.get(name), probes2.get(to2.get(name))
    if a is None or b is None:
      continue
    if np.shape(a[1]) == np.shape(b[1]) and np.shape(a[2]) != np.shape(b[2]) and (
        np.array_equal(a[1], b[1])):
      # The same input, an output of another shape (a transposed convolution's padding, a
      # crop): this layer is where the two part, not something after it.
      return Parting(step, "forward", name, rel=float("inf"), detail=(
          f"at {name}'s layer: its input the same bits, its output of another shape (TF1 "
          f"{list(np.shape(a[2]))}, TF2 {list(np.shape(b[2]))}; TF1 {a[0]}, TF2 {b[0]})"))
    if np.shape(a[1]) != np.shape(b[1]) or np.shape(a[2]) != np.shape(b[2]):
      which = 2 if np.shape(a[2]) != np.shape(b[2]) else 1
      if np.ndim(a[which]) == np.ndim(b[which]) and (
          np.shape(a[which])[:1] == np.shape(b[which])[:1]):
        # Of one rank and batch, of other sizes: a layer apart in shape (a bias read by a
        # broadcast add on one side gives [1, ..] and is no such layer); its input where
        # that is what differs (TF1's explicit padding, 10x10, against 'same' on 8x8).
        skipped.append(f"{name} ({'outputs' if which == 2 else 'inputs'} TF1 "
                       f"{list(np.shape(a[which]))}, TF2 {list(np.shape(b[which]))})")
      continue
    same_in = same(a[1], b[1])
    same_out = same(a[2], b[2])
    if same_in and same_out:
      before, skipped = name, []
      continue
    bits = (f"the same bits or rounding apart (up to {rounded:.2g} relative)" if rounded else
            "the same bits")
    after = f"every layer before it {bits}" if before else "the first layer compared"
    if skipped:
      after = (f"every layer compared before it {bits}" if before else after) + (
          f"; before it, layers the kit could not compare: {_listed(skipped)}")
    if same_in:
      rel = diffs.diff(a[2], b[2]).max_rel
      return Parting(step, "forward", name, rel=rel, detail=(
          f"at {name}'s layer: its input the same bits, its output {rel:.2g} relative apart "
          f"(TF1 {a[0]}, TF2 {b[0]}; {after})"))
    rel = diffs.diff(a[1], b[1]).max_rel
    where = f"between {before}'s layer and {name}'s" if before else f"before {name}'s layer"
    return Parting(step, "forward", name, rel=rel, detail=(
        f"{where}: {name}'s layer's input is {rel:.2g} relative apart"
        + (f" while {before}'s output is {bits}" if before else "") +
        (f" (in between, layers the kit could not compare: {_listed(skipped)})" if skipped else
         " (what is there reads no weight of a layer compared: an activation, a pooling, a "
         "dropout, a reshape, an embedding's lookup, a normalization's statistics"
         + (f"; or a layer of weights the kit compares no layer of: {_listed(uncompared)}"
            if uncompared else "") + ")")))
  if before is not None:
    bits = (f"the same bits or rounding apart, up to {rounded:.2g} relative" if rounded else
            "the same bits")
    return Parting(step, "forward", head=True, detail=(
        f"after the last layer compared ({before}'s, {bits}): in what follows it "
        "(the head, the loss" + (f"; and layers the kit could not compare: "
                                 f"{_listed(skipped)}" if skipped else "")
        + (f"; or a layer of weights the kit compares no layer of: {_listed(uncompared)}"
           if uncompared else "") + ")"))
  return Parting(step, "forward")


def _listed(names):
  return ", ".join(names[:3]) + (f", and {len(names) - 3} more" if len(names) > 3 else "")


def _inputs_apart(table, step):
  """': ...' naming the weights step `step` read that the step before left apart (within the
  tolerance, or left out as noise), or "" where every one is the same bits (step 0's are)."""
  apart = sorted((r for r in table if r.step == step - 1 and r.kind == "weight"
                  and r.diff.max_abs != 0), key=lambda r: -r.diff.max_rel)
  if not apart:
    return ""
  return (f": a tower's loss or outputs differ, from weights that are not all the same bits: "
          f"after step {step - 1}, {_listed([r.tf1 for r in apart])} apart (up to "
          f"{apart[0].diff.max_rel:.2g} relative)")


def first_parting(bad, table, structure_fact, probes1=None, probes2=None, pairs=(),
                  bound=precision.ROUNDING, terms=(None, None), noise=frozenset()):
  """The Parting of rows `bad` (those outside the tolerance) of `table`, or None; `probes1`,
  `probes2` the two sides' step-0 layer probes (TF1, TF2 names), `pairs` the variables';
  `bound` the comparison's rounding (porting.precision); `terms` the two sides' step-0 loss
  terms (porting.loss_terms), said where the bits part after the last layer compared;
  `noise` the TF1 variables whose gradients were left out as rounding noise."""
  if not bad:
    return None
  step = min(r.step for r in bad)
  at = [r for r in bad if r.step == step]
  if any(r.kind in ("loss", "outputs") for r in at):
    if step == 0 and probes1 and probes2 and structure_fact:
      far = any(r.kind in ("loss", "outputs") and r.diff.max_rel > max(FAR, bound)
                for r in at)
      where = _forward(step, probes1, probes2, pairs, structure_fact["order"],
                       structure_fact.get("reads"), bound if far else 0.0)
      head = loss_terms.said(*terms) if where.head else None
      if head is not None:
        where.detail += f"; measured at step 0: {head.text}"
      return where
    # "From the same weights" only where they are: a weight within the tolerance, or left
    # out as noise, after the step before is read by this one (BERT's attention key bias).
    return Parting(step, "forward", detail=_inputs_apart(table, step))
  if not any(r.kind == "gradient" for r in at):
    first = min(at, key=lambda r: ("weight", "slot", "average").index(r.kind)
                if r.kind in ("weight", "slot", "average") else 3)
    return Parting(step, "update", first.tf1, rel=first.diff.max_rel, detail=(
        "the forward pass and every gradient the same bits, "
        f"the {first.kind} of {first.tf1} after it {first.diff.max_rel:.2g} relative apart "
        "(the optimizer's update, a moving statistic's or the moving average's)"))
  if not structure_fact or not any(r.kind == "gradient" for r in at):
    return None
  gradients = {r.tf1: r for r in table if r.step == step and r.kind == "gradient"}
  above = inexact = noisy = 0
  for name in structure_fact["order"]:
    row = gradients.get(name)
    if row is None:
      continue
    if row in at:
      return Parting(step, "gradient", name, above, row.diff.max_rel,
                     [tuple(s) for s in structure_fact["shared"].get(name, [])],
                     inexact=inexact, noisy=noisy, forward_inexact=any(
                         r.diff.max_abs != 0 for r in table
                         if r.step == step and r.kind in ("loss", "outputs")))
    above += 1
    if row.diff.max_abs != 0:
      noisy += name in noise
      inexact += name not in noise
  return None
