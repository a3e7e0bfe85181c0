"""Causes in what the two sides return as their outputs: other structures, which the
outputs rows compare flattened in tf.nest's order (a dict by its sorted keys), so that those
rows say nothing of the forward pass."""


def structure(obs):
  """Both sides' outputs as [[path, shape]] (spec._parts), where they differ in number or in
  shape, in order."""
  a, b = obs.tf1.facts.get("outputs_parts"), obs.tf2.facts.get("outputs_parts")
  if not a or not b:
    return []
  shapes = lambda parts: [s[1:] if s else s for _, s in parts]  # the batch may differ
  if len(a) == len(b) and shapes(a) == shapes(b):
    return []
  said = lambda parts: ", ".join(f"{p} {s}" for p, s in parts[:4]) + (
      ", ..." if len(parts) > 4 else "")
  return [f"the two sides return other outputs: TF1 {len(a)} tensor(s) ({said(a)}), TF2 "
          f"{len(b)} ({said(b)}); the outputs rows compare them flattened in that order (a "
          "dict in its keys' sorted order), so they say nothing of the forward pass: return "
          "the same structure on both sides; the losses, gradients and weights compare as "
          "they are"]
