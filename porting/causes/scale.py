"""Causes in how the replicas' loss is scaled: gradients N x or 1/N the towers' average, the
regularization counted N times or missing, a penalty written into one side's loss only, an N
that is not a power of two under TF2's loss-over-the-global-batch idiom."""

import numpy as np

from porting import loss_terms
from porting import penalties
from porting.causes import combination as combination_causes
from porting.causes import towers
from porting.diffs import flat



def _close(parts, rel=0.05):
  """|x - y| <= rel |y| over [(x_k, y_k)] of arrays, variable by variable."""
  error = scale = 0.0
  for x, y in parts:
    x, y = flat(x), flat(y)
    scale += float(np.dot(y, y))
    d = x - y
    error += float(np.dot(d, d))
  return scale > 0 and error <= rel * rel * scale


def gradient_scale(obs):
  """Every gradient N x or 1/N the towers' average (the ratio of the two sides' step-0
  gradients, over every variable)."""
  ratio, n = obs.ratio, obs.n
  # Read against towers that combine to their mean (the tutorial's average, model_deploy's
  # sum of divided losses); a script that sums its towers' own is causes.combination's.
  if ratio is None or obs.scaled or abs(obs.combination.update_scale(n) - 1) > 1e-6:
    return []
  if obs.reduction == "mean" and abs(ratio - 1 / n) < 0.05 / n:
    return [f"every gradient is {ratio:.3g} x the towers' average (1/N, N = {n}): "
            "the replicas' gradients are averaged (gradient_reduction='mean'), so each "
            "replica's loss must be the tower's own, its mean over the replica's "
            "examples, not their sum over the global batch (a keras.losses object called "
            "in a replica divides its mean by the number of replicas itself: with one, "
            "use gradient_reduction='sum')"]
  if abs(ratio - n) < 0.05 * n:
    return [f"every gradient is {ratio:.3g} x the towers' average (N = {n}): the TF2 "
            "loss is divided by the replica's batch, not the global batch (divide the "
            "sum of the replica's per-example losses by the global batch, "
            "tf.nn.compute_average_loss)"]
  if abs(ratio - 1 / n) < 0.05 / n:
    return [f"every gradient is {ratio:.3g} x the towers' average (1/N, N = {n}): the "
            "replicas' gradients are averaged twice (a MEAN all-reduce or a division "
            "by N on top of the optimizer's SUM over replicas)"]
  return []


UNIFORM = 1e-4  # relative residual under which every gradient is one factor x TF1's


def uniform_scale(obs):
  """Every step-0 gradient one factor c x TF1's, c neither 1 nor N nor 1/N (those above): the
  port's loss is normalized otherwise. Measured: a loss over 4 rows of which 3 have a
  non-zero weight, c = 0.75 (Keras's mean over every row against tf.losses'
  SUM_BY_NONZERO_WEIGHTS)."""
  if obs.scaled:
    return []
  g1 = [obs.first1.gradients[k] for k in obs.names]
  g2 = [obs.first2.gradients[obs.to2[k]] for k in obs.names]
  den = sum(float(np.dot(flat(a), flat(a))) for a in g1)
  if den == 0:
    return []
  c = sum(float(np.dot(flat(b), flat(a))) for a, b in zip(g1, g2)) / den
  if abs(c - 1) <= 1e-3 or not _close([(b, c * flat(a)) for a, b in zip(g1, g2)], UNIFORM):
    return []
  exponent = np.log2(abs(c))
  scale_ = (f"; {c:.4g} is a power of two: also a loss scale the two sides do not share "
            "(Keras's LossScaleOptimizer starts at 2**15, TF1's fp16 recipes at a constant)"
            if abs(exponent - round(exponent)) < 1e-6 and round(exponent) != 0 else "")
  return [f"every gradient is {c:.4g} x TF1's at step 0, one factor for all: the port's loss "
          "is normalized otherwise, e.g. a mean over every example or pixel where TF1's "
          "tf.compat.v1.losses divides by the number of non-zero weights "
          "(SUM_BY_NONZERO_WEIGHTS, its default reduction), a sum against a mean, or a loss "
          f"scaled by a constant; make the port's loss divide as the TF1 loss does{scale_}"]


def loss_only(obs):
  """Only the losses reported differ, by rounding: the gradients (and so the steps) are the
  same bits, the loss's own terms were added in another order. Measured: a text CNN's
  lambda x (l2_loss(W) + l2_loss(b)) against Keras regularizers' per-variable terms, the
  loss 1 ULP apart from step 1, everything else the same bits."""
  if not obs.bad or any(r.kind != "loss" for r in obs.bad) or not all(
      r.diff.max_rel <= obs.bound for r in obs.bad):
    return []
  # Measured where step 0's losses part (the probe's terms): which of those it is.
  terms = loss_terms.said(obs.tf1.facts.get("loss_terms"), obs.tf2.facts.get("loss_terms"))
  how = ("the two losses compute the same value by other operations (a penalty lambda x "
         "(l2_loss(W) + l2_loss(b)) against a regularizer per variable, Keras's Huber "
         "against tf.losses.huber_loss, terms added in another order)")
  if terms is not None:
    how = f"measured at step 0, {terms.text}"
  return [f"only the losses differ, by rounding (up to {obs.worst(obs.bad):.2g} relative), "
          f"with every output, gradient, weight and slot within the tolerance: {how}; the "
          "steps are the same. The port is not at fault; compare with a tolerance of that size"]


def regularization(obs):
  """The TF2 gradients off TF1's by (N - 1) x, -1 x or, where the replicas' gradients are
  averaged, (1/N - 1) x the regularization's gradient."""
  reg, n = obs.first1.regularization, obs.n
  if not reg or obs.scaled:
    return []
  regularized = [k for k in obs.names if k in reg]
  # The lines below read the TF1 update as holding the collection once (each tower's loss
  # with it, averaged; model_deploy's first clone, summed): where the graph shows otherwise,
  # they would blame the port for the script's own count.
  count = combination_causes.regularization_count(obs)
  if count is not None and abs(count - 1) > 1e-6:
    return _uncounted(obs, count, regularized)

  def delta_against(factor):
    return ((flat(obs.first2.gradients[obs.to2[k]]) - flat(obs.first1.gradients[k]),
             factor * flat(reg[k])) for k in regularized)
  if n > 1 and _close(delta_against(n - 1)):
    if obs.combination is not None and obs.combination.regularization == "first_tower":
      return [f"the regularization is counted {n} times: each replica adds the whole "
              "regularization loss, where TF1 adds it to tower 0's loss only "
              f"({obs.combination.name}): add it as the script does, on replica 0 only "
              "(where tf.distribute.get_replica_context().replica_id_in_sync_group == 0), "
              "or 1/N of it on each (tf.nn.scale_regularization_loss: the same update, the "
              "loss rows then apart by the shares)"]
    return [f"the regularization is counted {n} times: each replica adds the whole "
            "regularization loss (add tf.nn.scale_regularization_loss(...) of it, 1/N on "
            f"each replica), or the port adds it {n} times (model.losses twice)"]
  averaged = obs.reduction == "mean"
  if _close(delta_against(-1)):
    return ["the regularization is missing from the TF2 loss (its gradient is all "
            "that differs): " + (
                "add the model's losses as they are (tf.add_n(model.losses)): the replicas' "
                "gradients are averaged (gradient_reduction='mean'), so each replica's loss "
                "carries the whole regularization, as each tower's did" if averaged else
                "add the model's losses (model.losses), scaled by "
                "tf.nn.scale_regularization_loss")]
  if n > 1 and averaged and _close(delta_against((1 - n) / n)):
    return [f"the regularization is 1/{n} of the towers' in the TF2 loss: it is scaled by 1/N "
            "(tf.nn.scale_regularization_loss) and the replicas' gradients are averaged "
            "(gradient_reduction='mean'), which divides by N again; add the model's losses "
            "as they are (tf.add_n(model.losses))"]
  return []


def _uncounted(obs, count, regularized):
  """The TF1 update holds the collection `count` x (0: no tower's loss reaches it)."""
  def delta_against(factor):
    return ((flat(obs.first2.gradients[obs.to2[k]]) - flat(obs.first1.gradients[k]),
             factor * flat(obs.first1.regularization[k])) for k in regularized)
  if count == 0 and _close(delta_against(1.0)):
    return ["the TF1 towers' losses hold no regularization (no tower's loss reaches the "
            "REGULARIZATION_LOSSES collection, read from the graph) and the port adds it once: "
            "its gradient is all that differs. Where the script adds the collection to the "
            "towers' losses itself (model_deploy adds it to the first clone's), say so in "
            "Port(tf1_towers=...: porting.MODEL_DEPLOY, or a TowerCombination with "
            f"regularization='first_tower'); else the port adds a term the script does not "
            f"(tf1_towers: {obs.combination.describe(obs.n)})"]
  return []


def penalty_by_hand(obs):
  """Every differing gradient c x its starting weight: a penalty in one side's loss only."""
  fitted = obs.tf1.facts.get("penalty")
  if not fitted or obs.scaled or obs.fired(regularization, towers.later_towers):
    return []
  return penalties.causes(fitted, obs.tf1.facts.get("penalty_frameworks"))


def not_a_power_of_two(obs):
  """Dividing by N x B and by N rounds where N is not a power of two."""
  n = obs.n
  if not (n & (n - 1)) or obs.reduction != "sum" or obs.scaled or not all(
      r.diff.max_rel <= obs.bound for r in obs.early):
    return []
  towers_ = ("each tower's mean over B averaged over N" if obs.combination.gradients == "mean"
             else f"the towers' arithmetic ({obs.combination.describe(n)})")
  return [f"N = {n} is not a power of two: a replica's loss, divided by the global "
          f"batch N x B (and its share of the regularization by N) and summed over the "
          f"replicas, rounds differently from {towers_}; only a power of two divides without "
          "rounding (every difference of the "
          "first two steps that differ is of rounding size). gradient_reduction='mean', "
          "with each replica's loss the tower's own, does the towers' divisions (up to "
          f"{obs.worst(obs.early):.2g} relative here)"]
