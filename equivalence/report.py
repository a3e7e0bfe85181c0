"""The comparisons `python -m equivalence` prints, as one library function tests can call.

The step-by-step comparison of the towers and the replicas is the porting kit's, run on this
project's pair (equivalence.cifar10_port); the rest drives the real loops."""

from cifar10 import schedule
from equivalence import cifar10_port
from equivalence import compare
from equivalence import runs
import porting
from porting import screen


# One device computing the whole batch against N towers averaging their slices: float32
# summation order, not the bit contract. Max |diff| / max |gradient| of a variable, measured
# over seeds 0 and 4 at N = 2..8 (per-replica batch 8): 1.7e-6 with oneDNN's default kernels,
# 2.7e-6 with oneDNN's AVX2 code (its convolution gradients block their sums otherwise),
# 1.6e-6 with oneDNN off, the largest at N = 5..8 and in conv1 and conv2 (2e-6, set from
# N <= 4 on the default kernels alone, failed at N = 6 under AVX2). About 2x the largest.
SINGLE_DEVICE_TOLERANCE = 5e-6


def run(n, seed, steps, per_replica_batch, decay_steps, single_device_tolerance,
        multi_worker=False):
  """(report text, every row ok) for n replicas/towers; with multi_worker, also n worker
  processes of MultiWorkerMirroredStrategy (1 replica each) against n v1 towers."""
  batches = cifar10_port.batches(seed, per_replica_batch * n, steps)
  kit = porting.compare(cifar10_port.port(seed, decay_steps), batches, replicas=n, steps=steps)
  v1_grads = kit.tf1.steps[0].gradients
  sections = []
  images, labels = batches[0]
  rows = compare.compare(runs.single_device_gradients(seed, images, labels), v1_grads,
                         single_device_tolerance)
  sections.append((f"Gradients: one device, whole batch vs v1 {n} towers", rows,
                   single_device_tolerance))
  a = runs.v1_train(n, seed, steps, per_replica_batch, decay_steps)
  b = runs.tf2_train(n, seed, steps, per_replica_batch, decay_steps)
  sections.append((f"Weights and EMA after {steps} steps (decay every {decay_steps}): v1 vs "
                   "TF2", compare.compare(a.variables, b.variables), 0.0))
  # The original's layout in TF2 (--strategy=central_storage): one copy of the variables.
  central = runs.tf2_train(n, seed, steps, per_replica_batch, decay_steps,
                           strategy="central_storage")
  sections.append((f"Weights and EMA after {steps} steps: v1 vs TF2 --strategy=central_storage",
                   compare.compare(a.variables, central.variables), 0.0))
  lr_ok = a.learning_rates == b.learning_rates == central.learning_rates
  step_ok = a.global_step == b.global_step == central.global_step == steps
  if multi_worker:
    c = runs.multi_worker_train(n, seed, steps, per_replica_batch)
    d = runs.v1_train(n, seed, steps, per_replica_batch,
                      schedule.decay_steps(per_replica_batch, n))
    step_ok = step_ok and c.global_step == d.global_step == steps
    sections.append((f"Weights and EMA after {steps} steps: v1 {n} towers vs "
                     f"MultiWorkerMirroredStrategy {n} workers x 1 replica (processes on "
                     "127.0.0.1)", compare.compare(d.variables, c.variables), 0.0))
  # The kit's report as its own command prints it, in at most 100 columns (its verdict line
  # left out: this command's own ends the report).
  text = [kit.text(width=screen.WIDTH).rsplit("\n", 1)[0]] + [
      compare.table(*s) for s in sections]
  text.append(f"Learning rate per step: v1 {a.learning_rates}\n"
              f"                        TF2 {b.learning_rates}  "
              f"{'ok' if lr_ok else 'FAIL'}")
  text.append(f"Global step: v1 {a.global_step}, TF2 {b.global_step}  "
              f"{'ok' if step_ok else 'FAIL'}")
  ok = kit.equal and lr_ok and step_ok and all(r.ok for _, rows, _ in sections for r in rows)
  return "\n\n".join(text), ok
