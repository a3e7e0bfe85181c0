"""Causes in how the TF1 towers count their losses: tower 0 the port's, the towers after it
not, with every tower's outputs the same bits. A collection read inside a tower holds what
the towers built so far made: read by the tower's scope, the regularization losses only
tower 0 made (`get_total_loss(scope=...)`, deeplab's `get_regularization_loss(scope)`:
tower k > 0 carries none); read whole, every earlier tower's losses too."""

import numpy as np



def later_towers(obs):
  """Step 0's tower losses: tower 0 within rounding of replica 0, every later tower apart,
  outputs the same; the line says which way (TF1 less: a term only tower 0 has; more: the
  earlier towers' losses counted again)."""
  if obs.n < 2:
    return []
  if obs.combination is not None and obs.combination.regularization == "first_tower":
    # The script adds the collection to tower 0's loss alone (model_deploy), and the kit runs
    # that arithmetic: later towers without it are the script as written, never its fault
    # (causes.scale.regularization and causes.combination name the port's placement).
    return []
  l1, l2 = obs.first1.losses, obs.first2.losses
  if len(l1) != obs.n or len(l2) != obs.n:
    return []
  # A replica's loss on its tower's scale, as the report's rows compare them.
  d = [float(np.float64(a) - obs.loss_factor * np.float64(b)) for a, b in zip(l1, l2)]
  size = lambda i: obs.bound * max(abs(float(l1[i])), 1e-30)
  outputs = [r for r in obs.table if r.step == 0 and r.kind == "outputs"]
  if abs(d[0]) > size(0) or not all(abs(x) > size(i) for i, x in enumerate(d) if i) or any(
      r.diff.max_rel > obs.bound for r in outputs):
    return []
  apart = ", ".join(f"tower_{i} {x:+.4g}" for i, x in enumerate(d) if i)
  head = (f"the TF1 towers after the first count their losses otherwise: at step 0 tower_0's "
          f"loss is replica_0's (within rounding) and the later towers' are apart (TF1 - "
          f"TF2: {apart}), with every tower's outputs the same")
  port = " (or a port that adds a term on replica 0 only)"
  if all(x < 0 for x in d[1:]):
    return [f"{head}: TF1's later towers count less than the port's replicas, as where a "
            "collection is read in the tower by its scope: it holds only what that tower "
            "made, and the regularization losses are made once, in tower 0's scope "
            "(get_total_loss(scope=scope), get_regularization_loss(scope)); add the "
            "regularization read without the scope (tf.compat.v1.losses."
            "get_regularization_loss()) to the tower's own losses read with it. The TF1 code "
            "differs by tower, not the port" + port]
  if all(x > 0 for x in d[1:]):
    return [f"{head}: TF1's later towers count more than the port's replicas, as where a "
            "collection is read whole in a tower (tf.get_collection('losses'), "
            "get_total_loss() without the scope): it holds every earlier tower's losses too; "
            "read it by the tower's scope, as the original tower_loss(scope) does. The TF1 "
            "code differs by tower, not the port" + port]
  return [f"{head}. The TF1 code differs by tower, not the port" + port]
