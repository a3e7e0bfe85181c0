"""The comparison of two traces, variable by variable and step by step, as numbers and text.

Rows are (step, kind, TF1 name, TF2 name, Diff) with kind one of:
  loss      tower i's loss against replica i's loss on the tower's scale (TowerCombination.
            loss_factor: x N under the "sum" gradient reduction against averaged towers, a
            replica's loss being scaled by the global batch; x N is exact for powers of
            two; x 1 against summed towers: model_deploy's clones divided by N, losses
            summed as written)
  outputs   tower i's outputs against replica i's
  gradient  the towers' combined gradient (averaged, or as the script combines them)
            against the replicas' reduced one
  weight    every model variable after the step (moving statistics included; TF2's value is
            replica 0's, the one its checkpoint saves)
  slot      optimizer slots after the step, in TF1's convention (see SLOT_CONVENTIONS)
  average   the moving average (EMA) of each trainable variable after the step
"""

import dataclasses

import numpy as np

from porting import diffs

KINDS = ("loss", "outputs", "gradient", "weight", "slot", "average")
# (TF1 optimizer, Keras optimizer) -> {TF1 slot: (Keras slot, its factor at rate lr)}: the
# Keras slot holds factor(lr) x the TF1 one (None: 1). MomentumOptimizer keeps
# accum = m*accum + g and steps -lr*accum; Keras SGD keeps the velocity v = m*v - lr*g and
# steps +v: v = -lr*accum while the rate is constant.
SLOT_CONVENTIONS = {
    ("MomentumOptimizer", "SGD"): {"momentum": ("momentum", lambda lr: -lr)},
    ("AdamOptimizer", "Adam"): {"m": ("momentum", None), "v": ("velocity", None)},
    # ApplyRMSProp's mean square and momentum against Keras's: the same quantities (TF1's
    # mean square from 1.0, Keras's from 0: the rows show it).
    ("RMSPropOptimizer", "RMSprop"): {"rms": ("velocity", None), "momentum": ("momentum", None)},
}


def slot_convention(optimizers, kind):
  """(Keras slot kind, factor(lr) or None) of TF1 slot `kind` under `optimizers`."""
  return SLOT_CONVENTIONS.get(optimizers, {}).get(kind, (kind, None))


@dataclasses.dataclass
class Row:
  step: int
  kind: str
  tf1: str
  tf2: str
  diff: diffs.Diff


def rows(pairs, tf1, tf2, optimizers, loss_factor):
  """Every Row of traces `tf1` and `tf2` under the variable `pairs`; `optimizers` is the
  (TF1, TF2) optimizer class names, for the slot conventions; a replica's loss is compared
  times `loss_factor` (TowerCombination.loss_factor: N under the "sum" gradient reduction
  against averaged towers)."""
  out = []
  for s, (a, b) in enumerate(zip(tf1.steps, tf2.steps)):
    out += step_rows(s, a, b, pairs, tf1, optimizers, loss_factor)
  return out


def step_rows(s, a, b, pairs, tf1, optimizers, loss_factor):
  """The Rows of step `s`: TF1's Step `a` against TF2's Step `b` (`tf1` the TF1 Trace, for
  its variables' names and order)."""
  to2 = dict(pairs)
  n = loss_factor
  out = []
  for i, (la, lb) in enumerate(zip(a.losses, b.losses)):
    out.append(Row(s, "loss", f"tower_{i}", f"replica_{i}",
                   diffs.diff(la, np.asarray(lb) * np.asarray(n, np.asarray(lb).dtype))))
  for i, (oa, ob) in enumerate(zip(a.outputs, b.outputs)):
    if oa is not None and ob is not None:
      out.append(Row(s, "outputs", f"tower_{i}", f"replica_{i}", diffs.diff(oa, ob)))
  for name in (n for n in tf1.trainable if n in to2):  # those left out are not compared
    out.append(Row(s, "gradient", name, to2[name],
                   diffs.diff(a.gradients[name], b.gradients[to2[name]])))
  for name in (n for n, _ in tf1.variables if n in to2):
    out.append(Row(s, "weight", name, to2[name],
                   diffs.diff(a.weights[name], b.weights[to2[name]])))
  for (name, kind), value in a.slots.items():
    if name not in to2:
      continue
    kind2, factor = slot_convention(optimizers, kind)
    other = b.slots.get((to2[name], kind2))
    if other is None:
      continue
    expected = factor(np.float32(a.learning_rate)) * value if factor else value
    out.append(Row(s, "slot", f"{name}:{kind}", f"{to2[name]}:{kind2}",
                   diffs.diff(expected, other)))
  for name, value in a.averages.items():
    if name in to2 and to2[name] in b.averages:
      out.append(Row(s, "average", name, to2[name],
                     diffs.diff(value, b.averages[to2[name]])))
  return out


def first_difference(table, tolerance):
  """The first Row (by step, then kind) outside `tolerance`, or None."""
  order = {k: i for i, k in enumerate(KINDS)}
  bad = [r for r in table if not r.diff.within(tolerance)]
  return min(bad, key=lambda r: (r.step, order[r.kind])) if bad else None


def summary(table, tolerance):
  """Per (kind, TF1 name), in table order: (the largest max_abs, max_rel and ULPs over the
  steps as one Diff, the first step outside the tolerance or None, the TF2 name)."""
  out = {}
  for r in table:
    key = (r.kind, r.tf1)
    worst, first, _ = out.get(key, (r.diff, None, r.tf2))
    ulps = (None if worst.ulps is None or r.diff.ulps is None
            else max(worst.ulps, r.diff.ulps))
    worst = diffs.Diff(max(worst.max_abs, r.diff.max_abs), max(worst.max_rel, r.diff.max_rel),
                       ulps, worst.shape_mismatch or r.diff.shape_mismatch,
                       worst.nonfinite or r.diff.nonfinite)
    if first is None and not r.diff.within(tolerance):
      first = r.step
    out[key] = (worst, first, r.tf2)
  return out


def text(table, tolerance, learning_rates, hints, title):
  """The report as aligned text: one line per (kind, variable), the rates, hints, verdict."""
  lines = [f"{title} ({bound(tolerance)}; steps count from 0)",
           f"  {'kind':<8} {'TF1':<36} {'TF2':<36} {'max |diff|':>10} {'max rel':>9} "
           f"{'ULPs':>6}  first  verdict"]
  for (kind, tf1), (worst, first, tf2) in summary(table, tolerance).items():
    ulps = "-" if worst.ulps is None else str(worst.ulps)
    lines.append(f"  {kind:<8} {tf1:<36} {tf2:<36} {worst.max_abs:>10.3g} "
                 f"{worst.max_rel:>9.3g} {ulps:>6}  {'-' if first is None else first:>5}  "
                 f"{verdict(worst, first)}")
  tf1_rates, tf2_rates = learning_rates
  lines.append(f"  learning rate per step: TF1 {tf1_rates}")
  lines.append(f"                          TF2 {tf2_rates}  "
               f"{'ok' if tf1_rates == tf2_rates else 'DIFFERS'}")
  first = first_difference(table, tolerance)
  if first is not None:
    lines.append(f"  first difference: step {first.step}, {first.kind} of {first.tf1} "
                 f"(max |diff| {first.diff.max_abs:.3g}, {first.diff.ulps} ULPs)")
  lines += [f"  cause: {h}" for h in hints]
  return "\n".join(lines)


def bound(tolerance):
  return "bit-identical" if tolerance == 0 else f"max rel diff <= {tolerance:g}"


def verdict(worst, first):
  """A row's verdict: ok, DIFFERS or NON-FINITE."""
  if first is None:
    return "ok"
  return "NON-FINITE" if worst.nonfinite else "DIFFERS"
