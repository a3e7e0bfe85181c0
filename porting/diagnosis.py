"""The known causes of a difference between TF1 towers and their TF2 port, named where the
numbers fit them. `causes(...)` returns one line per cause found; each is tested by a
deliberately wrong port (tests/test_porting.py).

  scale         every gradient N x (the replica's loss divided by its own batch, not the
                global one) or 1/N (a MEAN all-reduce, or the loss divided by N, on top of
                the optimizer's SUM; or, averaging as the towers do, a loss divided by the
                global batch)
  regularization the TF2 gradients differ from TF1's by (N - 1) x (each replica adds the whole
                regularization) or -1 x (it is missing) the regularization's gradient
  learning rate the rates differ (the decay counts steps differently)
  fused batch norm  TF1's FusedBatchNorm rounds its own way and updates moving_variance with
                the unbiased variance n/(n-1); Keras 3's BatchNormalization with the biased one
  moving statistics from towers other than the first (TF1 UPDATE_OPS of the last tower, or
                of all) against replica 0's own (what Keras's mirrored copy saves)
  moving average rounding  TF1 updates v - (v - x)(1 - m), Keras v m + x (1 - m)
  bias gradients  only rank-1 gradients differ, by rounding, with oneDNN on: under a tape
                oneDNN fuses a convolution's filter and bias gradients (TF1's gated
                gradients never fuse); porting.gated_bias_add on the port's side
  momentum      MomentumOptimizer's accumulator against Keras SGD's velocity
  Adam's 1 - beta  TF1's kernel rounds 1 - beta in float32, Keras in Python floats: moments
                that differ at step 0 where their own variable's gradient does not
  N not a power of two  dividing by N x B and by N rounds; the towers' means do not (the
                "sum" gradient reduction only)
  EMA read order  the moving averages differ while the weights they average do not
  Adam's beta powers  Keras's beta ** t against TF1's running products: every moment the same
                bits and the weights apart, from the third step (porting.TF1Adam)
  random ops    a forward output differs at step 0 from the same weights and batch, and a side
                draws randomly where the other does not, or draws as written (random_causes)
  L2 by hand    every differing gradient c x its starting weight: a penalty written into one
                side's loss only (penalties)
  gradient sums  step 0's gradients apart by rounding with the same forward pass, grappler's
                arithmetic optimizer off: TF1's and the tape's sums of a reused tensor's terms
  not explained none of these fits: said, never left blank
"""

import numpy as np

from porting import penalties
from porting import random_causes
from porting.diffs import flat

MOVING = ("moving_mean", "moving_variance")
ROUNDING = 1e-5  # max rel of a difference that is rounding, not a different computation


def _dot(xs, ys):
  """The dot product of two lists of arrays, variable by variable (no concatenated float64
  copy of a 100M-parameter model's gradients: its sums of float32 products decide ratios to
  5%, which float32 carries)."""
  return sum(float(np.dot(flat(x), flat(y))) for x, y in zip(xs, ys))


def _close(parts, rel=0.05):
  """|x - y| <= rel |y| over [(x_k, y_k)] of arrays, variable by variable."""
  error = scale = 0.0
  for x, y in parts:
    x, y = flat(x), flat(y)
    scale += float(np.dot(y, y))
    d = x - y
    error += float(np.dot(d, d))
  return scale > 0 and error <= rel * rel * scale


def causes(pairs, tf1, tf2, table, tolerance, replicas, optimizers, reduction="sum",
           onednn=False):
  """The known causes that fit the differences of `table` (report.Rows), as lines."""
  bad = [r for r in table if not r.diff.within(tolerance)]
  rates = [s.learning_rate for s in tf1.steps], [s.learning_rate for s in tf2.steps]
  if not bad and rates[0] == rates[1]:
    return []
  to2 = dict(pairs)
  hints = []
  # A cause is read where its signature first shows, the first two steps that differ: later
  # steps of a real model diverge for reasons of their own (a max-pool tie that flips turns
  # 8 ULPs into 1e-2), and must not unname it.
  start = min(r.step for r in bad) if bad else 0
  early = [r for r in bad if r.step <= start + 1]
  first1, first2 = tf1.steps[0], tf2.steps[0]
  names = [n for n in tf1.trainable if n in to2]
  g1 = [first1.gradients[k] for k in names]
  g2 = [first2.gradients[to2[k]] for k in names]
  n = replicas
  scaled = False
  if n > 1 and any(np.any(g) for g in g1):
    ratio = _dot(g2, g1) / _dot(g1, g1)
    if reduction == "mean" and abs(ratio - 1 / n) < 0.05 / n:
      scaled = True
      hints.append(f"every gradient is {ratio:.3g} x the towers' average (1/N, N = {n}): "
                   "the replicas' gradients are averaged (gradient_reduction='mean'), so each "
                   "replica's loss must be the tower's own, its mean over the replica's "
                   "examples, not their sum over the global batch")
    elif abs(ratio - n) < 0.05 * n:
      scaled = True
      hints.append(f"every gradient is {ratio:.3g} x the towers' average (N = {n}): the TF2 "
                   "loss is divided by the replica's batch, not the global batch (divide the "
                   "sum of the replica's per-example losses by the global batch, "
                   "tf.nn.compute_average_loss)")
    elif abs(ratio - 1 / n) < 0.05 / n:
      scaled = True
      hints.append(f"every gradient is {ratio:.3g} x the towers' average (1/N, N = {n}): the "
                   "replicas' gradients are averaged twice (a MEAN all-reduce or a division "
                   "by N on top of the optimizer's SUM over replicas)")
  reg = first1.regularization
  if reg and not scaled:
    regularized = [k for k in names if k in reg]
    def delta_against(factor):
      return ((flat(first2.gradients[to2[k]]) - flat(first1.gradients[k]),
               factor * flat(reg[k])) for k in regularized)
    if n > 1 and _close(delta_against(n - 1)):
      hints.append(f"the regularization is counted {n} times: each replica adds the whole "
                   "regularization loss; add tf.nn.scale_regularization_loss(...) of it "
                   "(1/N on each replica)")
    elif _close(delta_against(-1)):
      hints.append("the regularization is missing from the TF2 loss (its gradient is all "
                   "that differs): add the model's losses (model.losses), scaled by "
                   "tf.nn.scale_regularization_loss")
  penalty = tf1.facts.get("penalty")
  if penalty and not scaled and not any("regularization is" in h for h in hints):
    hints += penalties.causes(penalty)
  if rates[0] != rates[1]:
    s = next(i for i, (a, b) in enumerate(zip(*rates)) if a != b)
    hints.append(f"the learning rate differs from step {s} (TF1 {rates[0][s]:.6g}, TF2 "
                 f"{rates[1][s]:.6g}): the decay counts steps differently (TF1's global step "
                 "moves once per step of all towers; decay_steps multiplied or divided by N, "
                 "a step count per replica, or a schedule counted in examples, global_step x "
                 "batch, on one side and in steps on the other, gives this)")
  moving = [r for r in bad if r.kind == "weight" and any(m in r.tf1 for m in MOVING)]
  # Named where the numbers fit it: the fused kernel rounds its forward pass and gradients
  # its own way, it does not move them (a port 0.9 apart has another fault first).
  if tf1.facts.get("fused_batch_norm") and bad and all(
      r.diff.max_rel <= ROUNDING for r in table
      if r.step == 0 and r.kind in ("loss", "outputs", "gradient")):
    hints.append("TF1's batch norm is fused (FusedBatchNorm: its own rounding, and "
                 "moving_variance updated with the unbiased variance n/(n-1)); Keras 3's "
                 "BatchNormalization is not fused and uses the biased variance: pass "
                 "fused=False on the TF1 side to compare the same computation (here step "
                 f"0's forward pass and gradients up to {_worst(table, 0):.2g} relative apart, "
                 f"the moving statistics up to {_worst(moving):.2g})")
  elif moving and n > 1 and tf1.facts.get("update_towers", [0]) != [0] and any(
      r.diff.max_rel > ROUNDING for r in moving):
    towers = tf1.facts["update_towers"]
    which = ("every tower's, with no order between them" if len(towers) == n else
             " and ".join(f"tower {t}'s" + (" (the last)" if t == n - 1 else "")
                          for t in towers))
    hints.append(f"batch-norm moving statistics: the TF1 train op runs the UPDATE_OPS of "
                 f"{which} (read from the ops it runs); the TF2 side's are replica 0's own "
                 "(Keras's BatchNormalization, and porting.TF1BatchNorm's default "
                 "update_from='own_replica', update each replica's copy from its own batch; "
                 "the checkpoint saves replica 0's): " + (
                     "porting.TF1BatchNorm(update_from='last_tower') updates every replica "
                     "from the last tower's batch" if towers == [n - 1] else
                     "no sequence of updates reproduces racing ones; compare with the TF1 "
                     "side running one tower's (update_ops='first_tower' or 'last_tower')") +
                 " (up to "
                 f"{_worst(moving):.2g} relative apart)")
  elif moving and all(r.diff.max_rel <= ROUNDING for r in moving if r in early) and min(
      r.step for r in moving) <= start:
    hints.append("moving statistics differ by rounding: TF1's batch norm updates them as "
                 "v - (v - x)(1 - m), Keras 3's as v m + x (1 - m), up to "
                 f"{_worst([r for r in moving if r in early]):.2g} relative" +
                 (f" (read at steps {start}-{start + 1}; later steps differ more)" if any(
                     r.diff.max_rel > ROUNDING for r in bad if r not in early) else ""))
  first_grads = [r for r in bad if r.kind == "gradient"]
  if first_grads:
    s = min(r.step for r in first_grads)
    at = [r for r in first_grads if r.step == s]
    # Rounding against the step's largest gradient: a bias followed by batch norm has a
    # gradient of 0 up to rounding, and there the difference is all there is.
    largest = max(float(np.abs(g).max()) for g in first1.gradients.values() if np.size(g))
    # Measured: with oneDNN off the same ports give the same bits, and writing the port's
    # bias as tf.nn.bias_add instead of `+` changes nothing; the fusion is the cause.
    if onednn and all(np.ndim(first1.gradients[r.tf1]) == 1 and
                      r.diff.max_abs <= ROUNDING * largest for r in at):
      hints.append(f"only bias gradients differ, by rounding, from step {s} "
                   f"({', '.join(r.tf1 for r in at)}): under a GradientTape oneDNN fuses a "
                   "convolution's filter gradient with its bias gradient into one kernel that "
                   "sums the bias gradient in another order, where TF1's compute_gradients "
                   "gates them (GATE_OP) and never fuses; add the port's convolution bias with "
                   "porting.gated_bias_add, or compare both sides with "
                   f"TF_ENABLE_ONEDNN_OPTS=0 (up to {_worst(at):.2g} relative here)")
    forward = [r for r in bad if r.kind in ("loss", "outputs") and r.step <= s]
    if (tf1.facts.get("graph_rewrites", {}).get("arithmetic_optimization") is False and
        not forward and all(r.diff.max_abs <= ROUNDING * largest for r in at)):
      hints.append(f"gradients differ by rounding from step {s} with the same forward pass "
                   f"({', '.join(r.tf1 for r in at)}): a tensor used more than once (a "
                   "residual connection, batch norm's input) gets its gradient terms summed "
                   "in one order by TF1's tf.gradients and in another by the tape; grappler's "
                   "arithmetic optimizer, on by default, rewrites both sums alike and is off "
                   "here (tf.config.optimizer.set_experimental_options): with it on, the same "
                   f"bits (up to {_worst(at):.2g} relative here)")
  if n & (n - 1) and reduction == "sum" and not scaled and all(
      r.diff.max_rel <= ROUNDING for r in early):
    hints.append(f"N = {n} is not a power of two: a replica's loss, divided by the global "
                 f"batch N x B (and its share of the regularization by N) and summed over the "
                 "replicas, rounds differently from each tower's mean over B averaged over "
                 "N; only a power of two divides without rounding (every difference of the "
                 "first two steps that differ is of rounding size). gradient_reduction='mean', "
                 "with each replica's loss the tower's own, does the towers' divisions (up to "
                 f"{_worst(early):.2g} relative here)")
  averages = [r for r in bad if r.kind == "average"]
  if averages:
    s = min(r.step for r in averages)
    if not [r for r in bad if r.step <= s and r.kind != "average"]:
      hints.append("the moving averages differ while the weights they average do not: the "
                   "EMA reads the weights (and the step) at another point of the step; TF1 "
                   f"applies it {tf1.facts.get('ema_order', 'after_update').replace('_', ' ')}"
                   " (ema_order), TF2 after the optimizer's update; the original tutorial's "
                   "grouped train op read them before, in most of its runs (up to "
                   f"{_worst(averages):.2g} relative apart)")
  if optimizers == ("AdamOptimizer", "Adam"):
    # Read per variable: a slot whose own gradient is the same bits at step 0 (another
    # variable's differing gradient, a conv bias's, does not hide it).
    same = {r.tf1 for r in table if r.kind == "gradient" and r.step == 0 and
            r.diff.within(tolerance)}
    fits = [r for r in bad if r.kind == "slot" and r.step == 0 and
            r.tf1.split(":")[0] in same]
    if fits:
      hints.append("Adam's 1 - beta: TF1's ApplyAdam kernel computes 1 - beta_1 and "
                   "1 - beta_2 in float32 (1 - 0.999 = 0.00099998713), Keras in Python floats "
                   f"and then rounds (0.001): at step 0, {len(fits)} moment(s) differ with "
                   f"the same gradients, by up to {max(r.diff.max_rel for r in fits):.2g} "
                   "relative here")
  if optimizers == ("AdamOptimizer", "Adam"):
    hints += _adam_powers(bad, table)
  if optimizers == ("MomentumOptimizer", "SGD"):
    trainable = {to2[k] for k in names}
    weights = [r for r in bad if r.kind in ("weight", "slot") and r.tf2.split(":")[0] in
               trainable]
    first_weight = min(r.step for r in weights) if weights else 0
    if weights and first_weight >= 1 and all(
        r.diff.max_rel <= ROUNDING for r in weights if r.step <= first_weight + 1):
      hints.append("momentum: MomentumOptimizer keeps accum = m accum + g and steps "
                   "-lr accum, Keras SGD keeps v = m v - lr g and steps +v; the same update, "
                   "rounded differently from the second step on (and a different one "
                   "whenever the rate changes: v is -lr x accum only at a constant rate), up "
                   f"to {_worst([r for r in weights if r.step <= first_weight + 1]):.2g} "
                   "relative")
  hints = random_causes.causes(bad, tf1.facts, tf2.facts) + hints
  nonfinite = [r for r in bad if r.diff.nonfinite]
  if nonfinite:
    first = min(nonfinite, key=lambda r: r.step)
    hints.insert(0, f"not finite: {len(nonfinite)} row(s) hold NaN or Inf, the first at step "
                 f"{first.step}, {first.kind} of {first.tf1}; values that are not finite "
                 "compare as nothing (NaN against NaN is no equality): find where the first "
                 "comes from, tf.debugging.enable_check_numerics() on both sides")
  if bad and not hints:
    first = min(bad, key=lambda r: (r.step, r.kind != "loss"))
    hints.append(f"not explained: no known cause fits (the first difference, step "
                 f"{first.step}, {first.kind} of {first.tf1}, {first.diff.max_rel:.3g} "
                 "relative); compare fewer steps, one tower, or TF_ENABLE_ONEDNN_OPTS=0 on "
                 "both sides to narrow it")
  return hints


def _worst(rows, step=None):
  """The largest max relative difference of `rows` (of step `step`, of the step-0 forward
  pass and gradients where given): the measured size a hint states."""
  if step is not None:
    rows = [r for r in rows if r.step == step and r.kind in ("loss", "outputs", "gradient")]
  return max((r.diff.max_rel for r in rows), default=0.0)


def _adam_powers(bad, table):
  """Keras's Adam computes its bias correction from beta ** t, TF1's from running products
  beta1_power *= beta1: from the third step on they round apart, and the weights move apart
  while the moments (m, v) stay the same bits."""
  s = min(r.step for r in bad) if bad else None
  if s is None or s < 2:
    return []
  at = [r for r in bad if r.step == s]
  moments_same = all(r.diff.within(0) for r in table if r.kind == "slot" and r.step == s)
  if not moments_same or any(r.kind not in ("weight", "average") for r in at):
    return []
  worst = max(r.diff.max_rel for r in at)
  return [f"Adam's beta powers: from step {s} the weights differ (by up to {worst:.2g} "
          "relative) with every moment the same bits: TF1's AdamOptimizer corrects its bias "
          "with running products (beta1_power *= beta1 each step, in float32), Keras's Adam "
          "with beta ** t; porting.TF1Adam keeps TF1's products (and runs TF1's kernel)"]
