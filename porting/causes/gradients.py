"""Causes in the backward pass with the forward pass the same bits: bias gradients oneDNN
fuses under a tape, and a tensor used k times whose k gradient terms the two sides add in
another order (named from where the bits part: porting.parting)."""

import numpy as np

from porting.causes import averages
from porting.causes import machines



def _first_gradients(obs):
  """(step, rows) of the first step whose gradients differ, or (None, [])."""
  rows = [r for r in obs.bad if r.kind == "gradient"]
  if not rows:
    return None, []
  s = min(r.step for r in rows)
  return s, [r for r in rows if r.step == s]


def _rounding(obs, rows):
  # Against the step's largest gradient: a bias followed by batch norm has a gradient of 0
  # up to rounding, and there the difference is all there is.
  return all(r.diff.max_abs <= obs.bound * obs.largest for r in rows)


def _forward_same(obs, s):
  return not [r for r in obs.bad if r.kind in ("loss", "outputs") and r.step <= s]


def fused_bias(obs):
  """Only rank-1 gradients apart, by rounding, with oneDNN on. Measured: with oneDNN off the
  same ports give the same bits, and a tf.nn.bias_add instead of `+` changes nothing."""
  s, at = _first_gradients(obs)
  # A convolution's bias, as the TF1 graph adds it: an attention key's bias is rank 1 too,
  # and its gradient, 0 up to rounding, differs by rounding without any convolution.
  convs = set((obs.tf1.facts.get("structure") or {}).get("conv_biases", ()))
  if not at or not obs.onednn or not all(
      np.ndim(obs.first1.gradients[r.tf1]) == 1 and r.tf1 in convs for r in at) or not (
          _rounding(obs, at)):
    return []
  return [f"only bias gradients differ, by rounding, from step {s} "
          f"({', '.join(r.tf1 for r in at)}): under a GradientTape oneDNN fuses a "
          "convolution's filter gradient with its bias gradient into one kernel that "
          "sums the bias gradient in another order, where TF1's compute_gradients "
          "gates them (GATE_OP) and never fuses; add the port's convolution bias with "
          "porting.gated_bias_add, or compare both sides with "
          f"TF_ENABLE_ONEDNN_OPTS=0 (up to {obs.worst(at):.2g} relative here)"]


def gradient_sums(obs):
  """The forward pass the same bits, gradients apart by rounding: with grappler's arithmetic
  optimizer off, any tensor used twice; with it as by default, where the numbers show it: the
  first gradient from the loss down that parts sits below a tensor used k times."""
  s, at = _first_gradients(obs)
  if not at or not _forward_same(obs, s) or not _rounding(obs, at) or obs.fired(
      fused_bias):
    return []
  if machines.elsewhere(obs):
    # A record from another TensorFlow: its gradient kernels round otherwise too (a text
    # CNN recorded on 1.15 parted at the embedding with one conv, no sum, as with two), and
    # other_runtime names that; naming the sums' order here would be a guess.
    return []
  rewrites = obs.tf1.facts.get("graph_rewrites", {})
  if rewrites.get("arithmetic_optimization") is False or rewrites.get(
      "disable_meta_optimizer") is True:
    return [f"gradients differ by rounding from step {s} with the same forward pass "
            f"({', '.join(r.tf1 for r in at)}): a tensor used more than once (a "
            "residual connection, batch norm's input) gets its gradient terms summed "
            "in one order by TF1's tf.gradients and in another by the tape; grappler's "
            "arithmetic optimizer, on by default, is off here (or grappler's whole meta "
            "optimizer) "
            "(tf.config.optimizer.set_experimental_options), and with it on the two sums "
            "may be rewritten alike or not: compare with it on to see "
            f"(up to {obs.worst(at):.2g} relative here)"]
  parting = obs.parting
  if parting is None or parting.kind != "gradient" or parting.step != s:
    return []
  used = [(tensor, k, types) for tensor, k, types in parting.shared if k > 1]
  if not used:
    return []
  tensor, k, types = max(used, key=lambda u: u[1])
  line = (f"gradient sums: from the loss down, every gradient is the same bits down to "
          f"{parting.variable}'s, which parts by rounding ({parting.rel:.2g} relative; "
          f"{len(at) - 1} gradient(s) below it too, up to {obs.worst(at):.2g}), with the forward "
          f"pass the same bits; just above its layer TF1's tower 0 uses {tensor} {k} times "
          f"({', '.join(types)}): its gradient is the sum of {k} terms, which the two graphs "
          "add in another order (TF1's tf.gradients' AddN and the tape's, each as grappler's "
          "arithmetic optimizer rewrote it: with it off both sides may agree, or part where "
          "they agreed).")
  # What it explains is that step's rounding; later rows past rounding may be more (a
  # decay of the weights on one side, hidden behind it at N = 2 in a tiny BERT).
  # Averages a cause before this one named (their EMA read at another point) are not left
  # for it.
  named = obs.fired(averages.read_order)
  later = [r for r in obs.bad if r.step > s and r.diff.max_rel > obs.bound and
           not obs.rounding([r]) and not (named and r.kind == "average")]
  if later:
    first = min(later, key=lambda r: (r.step, -r.diff.max_rel))
    return [f"{line} That rounding is not the port's fault, but from step {first.step} "
            f"{first.kind} {first.tf1} is {first.diff.max_rel:.2g} relative apart, past "
            "rounding, which it need not explain: compare over fewer steps and with one "
            "tower to see whether anything else differs"]
  return [f"{line} The port is not at fault; compare with a tolerance of that size (grappler "
          "as by default here)"]


def vanishing_only(obs):
  """Every row apart is a gradient 0 up to rounding on both sides (a bias before a batch
  norm, an attention key's bias: softmax ignores a shift of the scores), or what it moved."""
  if not obs.bad or not obs.vanishing or not all(obs.rounding([r], 0) for r in obs.bad):
    return []
  names = sorted(obs.vanishing)
  return [f"only gradients within rounding of 0 differ: {', '.join(names[:3])}"
          f"{', ...' if len(names) > 3 else ''} (with the weights and slots they move), 0 up "
          "to rounding on both sides, as a bias's before a batch norm, or an attention key's "
          "bias's, is; every other row is within the tolerance. The port is not at fault "
          "there; their relative figures say nothing, and no tolerance covers them"]
