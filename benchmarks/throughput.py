"""Training throughput of the TF2 trainer and the v1 towers, side by side, in one run.

  python -m benchmarks.throughput --num_gpus=1,2 --steps=50 --warmup=10 --steps_per_loop=10

Each (trainer, N) runs the trainer's real loop (benchmarks.measure) in its own child process
(devices are fixed when TensorFlow starts) on the shared synthetic stream, with what a user's
run does around the step (loss check, log lines, summaries every 100 steps, the final
checkpoint). After --warmup steps, --steps steps are timed. Prints examples/sec of TF2 (one
step per call, and --steps_per_loop steps per call) and v1, and the ratios to v1, per N. On a
machine without GPUs N means N logical CPU devices that share the same cores.
"""

import json
import os
import subprocess
import sys

from absl import flags

from cifar10.errors import UsageError
from harness import cli


def define_flags(fv):
  flags.DEFINE_list("num_gpus", ["1", "2"], "Replica / tower counts to measure.",
                    flag_values=fv)
  flags.DEFINE_integer("batch_size", 128, "Images per replica per step.", flag_values=fv)
  flags.DEFINE_integer("steps", 50, "Timed steps.", flag_values=fv)
  flags.DEFINE_integer("warmup", 10, "Untimed steps first (tracing, graph optimisation).",
                       flag_values=fv)
  flags.DEFINE_integer("steps_per_loop", 10, "Steps per call of the second TF2 run "
                       "(--steps and --warmup must be multiples of it).", flag_values=fv)
  flags.DEFINE_integer("intra_op_threads", 0, "Threads inside one op (0: TF decides).",
                       flag_values=fv)
  flags.DEFINE_string("child", None, "Internal: 'tf2:N', 'tf2:N:K' or 'v1:N', run one "
                      "measurement.",
                      flag_values=fv)


def _child(spec, batch, steps, warmup, threads):
  from benchmarks import measure  # pylint: disable=g-import-not-at-top
  kind, n, *k = spec.split(":")
  extra = {"steps_per_loop": int(k[0])} if k else {}
  seconds = getattr(measure, kind)(int(n), batch, warmup, steps, threads, **extra)
  print(json.dumps({"examples_per_sec": steps * batch * int(n) / seconds}))


def _run_child(kind, n, batch, steps, warmup, threads):
  args = [sys.executable, "-m", "benchmarks.throughput", f"--child={kind}:{n}",
          f"--batch_size={batch}", f"--steps={steps}", f"--warmup={warmup}",
          f"--intra_op_threads={threads}"]
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))
  out = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
  if out.returncode:
    raise UsageError(f"{kind} with N={n} failed: {out.stderr.strip().splitlines()[-1]}")
  return json.loads(out.stdout.strip().splitlines()[-1])["examples_per_sec"]


def main(values):
  batch, steps, warmup = values.batch_size, values.steps, values.warmup
  run = (batch, steps, warmup, values.intra_op_threads)
  k = values.steps_per_loop
  if values.child:
    return _child(values.child, *run)
  counts = [int(n) for n in values.num_gpus]
  if min(counts) < 1 or steps < 1 or batch < 1 or warmup < 1 or k < 1:
    raise UsageError("--num_gpus, --steps, --warmup, --batch_size and --steps_per_loop must "
                     "be positive")
  if steps % k or warmup % k:
    raise UsageError(f"--steps={steps} and --warmup={warmup} must be multiples of "
                     f"--steps_per_loop={k}, so the clock reads at call boundaries")
  print(f"global batch = {batch} x N, {steps} timed steps after {warmup} warm-up steps, "
        "synthetic data")
  print(f"{'N':>3} {'TF2 ex/s':>10} {f'TF2 K={k}':>10} {'v1 ex/s':>10} {'TF2 / v1':>9} "
        f"{'K / v1':>7}")
  for n in counts:
    tf2, tf2_k = _run_child("tf2", n, *run), _run_child("tf2", f"{n}:{k}", *run)
    v1 = _run_child("v1", n, *run)
    print(f"{n:>3} {tf2:>10.1f} {tf2_k:>10.1f} {v1:>10.1f} {tf2 / v1:>9.2f} {tf2_k / v1:>7.2f}",
          flush=True)


if __name__ == "__main__":
  cli.app_run(flags.FLAGS, define_flags, main)
