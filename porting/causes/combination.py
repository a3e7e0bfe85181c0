"""Causes in how the two sides combine their towers and replicas, measured against the TF1
side's TowerCombination (porting.combination), never against an assumed average: the
regularization placed on other towers than replicas with the same update, a script's
tf1_gradients that scales what the towers combined, a sum of towers against a mean."""

import fractions

import numpy as np



def transformed_scale(obs):
  """The port's step-0 gradients are TF1's as tf1_gradients leaves them, c x the towers'
  combined ones (c != 1): the script's combination is partly in tf1_gradients, which the kit
  does not read, so the gradient rows (taken before it) are c apart with nothing wrong."""
  c, ratio = obs.transform, obs.ratio
  if c is None or abs(c - 1) <= 1e-6 or ratio is None or abs(ratio - c) > 1e-3 * abs(c):
    return []
  n = obs.n
  hint = (f"; {c:.4g} = N: a sum of the towers' gradients written as a factor on their "
          "average (model_deploy sums its clones' gradients of losses divided by N): say so in "
          "Port(tf1_towers=porting.MODEL_DEPLOY) and drop the factor, and the rows compare "
          "what the script combines" if abs(c - n) <= 1e-6 * n and n > 1 else "")
  return [f"tf1_gradients multiplies the towers' combined gradients by {c:.4g} at step 0, and "
          "the port's gradients are TF1's as tf1_gradients leaves them: the gradient rows "
          "compare TF1's before it, so they are that factor apart while the weights' rows "
          "show what the two updates do; no cause is named for that factor"
          f" (tf1_towers: {obs.combination.describe(n)}){hint}"]


def summed_towers(obs):
  """TF1's towers combine to N x the mean of their own gradients (a sum of losses as
  written: replicate_model_fn(SUM), horovod's average=False) and the port's replicas to the
  mean, or the other way round."""
  ratio, n = obs.ratio, obs.n
  scale = obs.combination.update_scale(n)
  if ratio is None or abs(scale - 1) <= 1e-6 or obs.scaled:
    return []
  if abs(ratio * scale - 1) > 0.05:
    return []
  return [f"every gradient is {ratio:.3g} x the towers' combined one (N = {n}): the TF1 "
          f"script combines its towers to {scale:.3g} x the mean of their gradients "
          f"({obs.combination.describe(n)}), the port's replicas to the mean; make the "
          "port's update the script's (each replica's loss its own mean under "
          "gradient_reduction='sum' sums them), or check that tf1_towers says what the "
          "script does"]


def regularization_placement(obs):
  """Step 0's losses apart tower by tower by multiples of the regularization / N that sum to
  0, with every gradient and output within rounding: the two sides add the regularization to
  other towers and replicas (model_deploy's first clone against a share on every replica;
  the tutorial's every tower against a port's replica 0), and their updates are the same."""
  r = obs.tf1.facts.get("regularization_loss")
  n = obs.n
  l1, l2 = obs.first1.losses, obs.first2.losses
  if n < 2 or r is None or not float(r) or len(l1) != n or len(l2) != n:
    return []
  r = float(r)
  d = [float(np.float64(a) - obs.loss_factor * np.float64(b)) for a, b in zip(l1, l2)]
  size = max(abs(r), max(abs(float(x)) for x in l1))
  step0 = [row for row in obs.table if row.step == 0 and row.kind in ("gradient", "outputs")]
  if not any(abs(x) > obs.bound * size for x in d) or abs(sum(d)) > 1e-4 * size or not (
      obs.rounding(step0)):
    return []
  shares = [x * n / r for x in d]
  if any(abs(s - round(s)) > 1e-2 for s in shares):
    return []
  apart = ", ".join(f"tower_{i} {_fraction(x / r, n)} R" for i, x in enumerate(d))
  tf1 = {"first_tower": "adds it to tower 0's loss only",
         "every_tower": "adds it to every tower's loss",
         "in_tower_loss": "has it where tower_loss adds it"}[obs.combination.regularization]
  return [f"the regularization (R = {r:.4g} at step 0) is added to other towers than "
          f"replicas: TF1 - TF2 in the losses at step 0 is {apart}, summing to 0, with every "
          f"gradient and output within rounding: the two updates are the same. TF1 {tf1} "
          f"({obs.combination.name}), the port places it otherwise; the loss rows compare "
          "each side's own placement, and neither is at fault. To compare the losses to the "
          f"bit, add it where the script does ({_where(obs)})"]


def _where(obs):
  if obs.combination.regularization == "first_tower":
    return ("on replica 0 only: where tf.distribute.get_replica_context()."
            "replica_id_in_sync_group == 0")
  if obs.reduction == "sum":
    return ("on every replica, tf.nn.scale_regularization_loss of it (gradient_reduction="
            "'sum')")
  return "on every replica, the whole of it (gradient_reduction='mean')"


def regularization_count(obs):
  """How many times the TF1 update holds the regularization collection, from the towers
  whose losses reach it (read from the graph) and the combination; None where not read (a
  record from before the kit read it) or there is no collection."""
  towers = obs.tf1.facts.get("regularized_towers")
  if towers is None:
    return None
  c, n = obs.combination, obs.n
  each = 1.0 / n if c.averaged else 1.0
  if c.regularization == "in_tower_loss":
    each *= c.tower_scale(n)
  return len(towers) * each


def _fraction(x, n):
  """x as a signed fraction with a denominator up to N (-1/2, +1, +3/4)."""
  f = fractions.Fraction(x).limit_denominator(max(n, 1))
  return f"{'+' if f >= 0 else '-'}{abs(f)}"
