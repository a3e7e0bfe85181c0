"""The comparisons `python -m equivalence` prints, as one library function tests can call."""

from equivalence import compare
from equivalence import runs


def run(n, seed, steps, per_replica_batch, decay_steps, single_device_tolerance):
  """(report text, every row ok) for n replicas/towers."""
  images, labels = runs.global_batch(seed, per_replica_batch * n)
  v1_grads = runs.v1_gradients(n, seed, images, labels)
  sections = []
  rows = compare.compare(v1_grads, runs.tf2_gradients(n, seed, images, labels))
  sections.append((f"Gradients of one global batch: v1 {n} towers vs TF2 {n} replicas", rows,
                   0.0))
  rows = compare.compare(runs.single_device_gradients(seed, images, labels), v1_grads,
                         single_device_tolerance)
  sections.append((f"Gradients: one device, whole batch vs v1 {n} towers", rows,
                   single_device_tolerance))
  a = runs.v1_train(n, seed, steps, per_replica_batch, decay_steps)
  b = runs.tf2_train(n, seed, steps, per_replica_batch, decay_steps)
  sections.append((f"Weights and EMA after {steps} steps (decay every {decay_steps}): v1 vs "
                   "TF2", compare.compare(a.variables, b.variables), 0.0))
  lr_ok = a.learning_rates == b.learning_rates
  step_ok = a.global_step == b.global_step == steps
  text = [compare.table(*s) for s in sections]
  text.append(f"Learning rate per step: v1 {a.learning_rates}\n"
              f"                        TF2 {b.learning_rates}  "
              f"{'ok' if lr_ok else 'FAIL'}")
  text.append(f"Global step: v1 {a.global_step}, TF2 {b.global_step}  "
              f"{'ok' if step_ok else 'FAIL'}")
  ok = lr_ok and step_ok and all(r.ok for _, rows, _ in sections for r in rows)
  return "\n\n".join(text), ok
