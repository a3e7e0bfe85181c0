"""The same update, its loss shared out otherwise over the towers and the replicas: a penalty
the script adds to one tower (tf_cnn_benchmarks' weight decay, N x on the last tower) and its
port spreads over the replicas (TF2's tf.nn.scale_regularization_loss), or the other way."""

import numpy as np

from porting import combination as combination_lib
from porting.causes import combination as combination_causes
from porting.causes import scale


def loss_shares(obs):
  """At the first step that differs: the towers' losses apart from the replicas' past
  rounding, every other row of the step within it, and the two losses the updates are the
  gradients of (the script's combination of its towers', the port's reduction of its
  replicas') within rounding of each other."""
  s, n = obs.start, obs.n
  # The collection's placement is named with each tower's share where the kit reads it.
  if n < 2 or s >= min(len(obs.tf1.steps), len(obs.tf2.steps)) or obs.fired(
      combination_causes.regularization_placement, scale.loss_only):
    return []
  at = [r for r in obs.table if r.step == s]
  losses = [r for r in at if r.kind == "loss"]
  if not any(r.diff.max_rel > obs.bound for r in losses) or not obs.rounding(
      [r for r in at if r.kind != "loss"]):
    return []
  l1 = [float(np.float64(x)) for x in obs.tf1.steps[s].losses]
  l2 = [float(np.float64(x)) for x in obs.tf2.steps[s].losses]
  if len(l1) != n or len(l2) != n:
    return []
  total1 = obs.combination.towers_share(n) * sum(l1)
  total2 = combination_lib.replicas_share(n, obs.reduction) * sum(l2)
  if abs(total1 - total2) > obs.bound * max(abs(total1), abs(total2), 1e-30):
    return []
  apart = ", ".join(f"tower_{i} {a - obs.loss_factor * b:+.4g}" for i, (a, b) in
                    enumerate(zip(l1, l2)))
  return [f"the towers' losses part from the replicas' at step {s} (TF1 - TF2 on the towers' "
          f"scale: {apart}) while the losses the two updates are the gradients of agree "
          f"(TF1's combination of its towers' {total1:.8g}, TF2's of its replicas' "
          f"{total2:.8g}) and every output, gradient, weight and slot of the step is within "
          "rounding: the two sides share one loss out otherwise over towers and replicas (a "
          "penalty the script adds to one tower, which the port spreads over its replicas "
          "with tf.nn.scale_regularization_loss, or the other way); the update is the same, "
          "and the loss rows compare each tower's share with its replica's. The port is not "
          "at fault"]
