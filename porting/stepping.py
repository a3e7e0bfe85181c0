"""The compared steps: both sides on the same global batches, one step at a time.

Streamed: each step's rows are made as it ends, then only what the diagnosis reads is kept
(step 0's gradients and regularization, every step's losses, outputs and rate), so memory is
that of one step of both sides at any number of steps.
"""

import dataclasses

import numpy as np

from porting import penalties
from porting import report


@dataclasses.dataclass
class Sides:
  """The two programs compared, their variables paired [(TF1 name, TF2 name)], and their
  Traces (what the kit keeps of each side's run)."""
  towers: object
  tf2: object
  pairs: list
  trace1: object
  trace2: object


def run(sides, batch_at, steps, *, factor, optimizers, start, settings, parted):
  """Runs `steps` steps of both sides; returns (every report.Row, `start` if step 0's
  forward passes parted, else None: the layers are compared from those weights).

  batch_at(s): step s's global batch, checked. factor: what the TF2 loss is multiplied by to
  be on the towers' scale (TowerCombination.loss_factor). start: the starting weights {TF2
  name: value}, which a penalty written by hand is fitted against. settings: both sides'
  layer settings. parted(rows): whether step 0's rows part (the caller's tolerance).
  """
  towers, tf2, pairs, trace1, trace2 = (sides.towers, sides.tf2, sides.pairs, sides.trace1,
                                        sides.trace2)
  table = []
  for s in range(steps):
    images, labels = batch_at(s)
    a, b = towers.step(images, labels), tf2.step(images, labels)
    table += report.step_rows(s, a, b, pairs, trace1, optimizers, factor)
    if hasattr(towers, "global_step_now"):  # where the TF1 schedule reads its step
      trace1.facts.setdefault("global_steps", []).append(towers.global_step_now())
    # Each step's largest TF1 gradient: what a vanishing gradient is measured against.
    trace1.facts.setdefault("largest_gradient", []).append(max(
        (float(np.abs(g).max()) for g in a.gradients.values() if np.size(g)), default=0.0))
    if s == 0 and hasattr(towers, "step0"):
      trace1.facts.update(towers.step0)
    if s == 0:  # the starting weights fit a penalty written by hand, then go
      trace1.facts["penalty"] = penalties.fit(pairs, trace1.trainable, a, b, start)
      trace1.facts["penalty_frameworks"] = penalties.framework(
          pairs, trace1.facts["penalty"], settings[0].regularization,
          settings[1].regularization, start)
      start = start if parted(table) else None
    trace1.steps.append(_kept(a, s))
    trace2.steps.append(_kept(b, s))
    del a, b
  return table, start


def _kept(step, number):
  """What a Trace keeps of a compared Step: its losses, outputs and rate; step 0's gradients
  and regularization (the diagnosis reads the first step's); no weights, slots or averages."""
  first = number == 0
  return dataclasses.replace(step, gradients=step.gradients if first else {}, weights={},
                             slots={}, averages={},
                             regularization=step.regularization if first else {})
