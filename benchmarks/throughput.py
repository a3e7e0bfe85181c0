r"""Training throughput of the TF2 trainer against the v1 towers and its peers, in one run.

  python -m benchmarks.throughput --num_gpus=1,2 --steps=50 --warmup=10 --steps_per_loop=10 \
      --precisions=fp32 --out=/tmp/benchmark

For each precision, batch size and N, each kind of benchmarks.measure runs in its own child
process (devices are fixed when TensorFlow starts) on the shared synthetic stream, each of
--batch_sizes per replica (--steps: one count for all, or one per batch size, as a cheap
step needs more of them to time): the real TF2 loop with one step per call (under
--strategy=mirrored, and central_storage: the kind tf2_central) and with --steps_per_loop
steps per call, the real v1 tower loop, the project's Keras path, an
idiomatic Keras `fit` of the same CNN (benchmarks.keras_peer), and (N = 1) a bare tf.function
step, the ceiling of the model's step here. After --warmup steps, --steps steps are timed.
With --repeats=R each kind runs R times in rotating order: the median rate counts, and the
ratio to v1 is the median of each round's ratio (a round runs every kind once).
Prints the machine (tfbits.machine: CPU, ISA, oneDNN, versions, GPUs), then examples/sec,
the ratio to v1 (a precision this CPU's kernels are refused, harness.devices.cpu_kernels, is not
measured: one line says why), the model's FLOP rate as a share of this machine's
float32 matmul peak (measured in the same run), the process's CPU milliseconds per example
(every thread's: the same work at a lower rate means idle cores, more of it means more work),
the milliseconds of a global step and, at
N = 1, what each kind's step costs over the bare step (its fixed per-step cost; `-` at N > 1,
where there is no bare step, and without v1 in --kinds for the ratio). With --out, writes
results.json (the machine as an object; null for each `-`) and, if matplotlib is installed (`pip
install -e '.[bench]'`), chart.png there. On a machine without GPUs N means N logical CPU devices
that share the same cores.
"""

import json
import os
import statistics
import sys

from absl import flags

from benchmarks import children
from benchmarks import results
from cifar10 import config
from cifar10 import settings
from cifar10.errors import UsageError
from harness.command_line import cli
from harness.command_line import flag_ranges
from tfbits import filesystems

KINDS = ("tf2", "tf2_central", "tf2_loop", "v1", "keras_path", "keras_peer", "bare_step")


def define_flags(fv):
  flag_ranges.integers("num_gpus", ["1", "2"], "Replica / tower counts to measure.",
                       flag_values=fv)
  flag_ranges.choices("precisions", ["fp32"], config.PRECISIONS, "Precisions to measure "
                      f"({', '.join(config.PRECISIONS)}).", flag_values=fv)
  flag_ranges.choices("kinds", list(KINDS), KINDS, f"What to measure, of {', '.join(KINDS)}.",
                      flag_values=fv)
  flag_ranges.integers("batch_sizes", ["128"], "Images per replica per step: each is "
                       "measured.", flag_values=fv, bounds=flag_ranges.bounds_of("batch_size"))
  flag_ranges.integers("steps", ["50"], "Timed steps: one count for every batch size, or one "
                       "per --batch_sizes, in its order.", flag_values=fv)
  flag_ranges.integer("warmup", 10, "Untimed steps first (tracing, graph optimisation).",
                      flag_values=fv, bounds=(1, config.MAX_STEPS))
  flag_ranges.integer("steps_per_loop", 10, "Steps per call of the tf2_loop kind "
                      "(--steps and --warmup must be multiples of it).", flag_values=fv,
                      bounds=(1, 100000), applies="the tf2_loop kind", subject=settings.DEVICES)
  flag_ranges.integer("repeats", 1, "Measure each kind this many times, in rotating order, "
                      "and report the median: on a shared machine the speed drifts by 10% "
                      "and more between minutes.", flag_values=fv, bounds=(1, 1000))
  flag_ranges.integer("intra_op_threads", 0, "Threads inside one op (0: TF decides).",
                      flag_values=fv)
  flag_ranges.boolean("deterministic", True, "Measure under the bit contract's GPU settings, "
                      "as the trainers run by default (--nodeterministic: without them; on a "
                      "GPU the difference is what they cost; on CPUs nothing is set either "
                      "way).", flag_values=fv)
  flags.DEFINE_string("out", None, "Local folder for results.json and chart.png.",
                      flag_values=fv)
  flags.DEFINE_string("child", None, "Internal: 'kind:N:precision', run one measurement.",
                      flag_values=fv)


def _child_spec(spec):
  """(kind, N, precision) of --child, which _run_child writes; a user can reach it too."""
  kind, n, precision = (spec.split(":") + ["", "", ""])[:3]
  lowest, most = flag_ranges.bounds_of("num_gpus")
  if kind not in (*KINDS, "peak") or not n.isdigit() or not lowest <= int(n) <= most \
      or precision not in config.PRECISIONS or spec.count(":") != 2:
    raise UsageError(f"--child={spec}: it is internal, 'kind:N:precision' (kind of "
                     f"{', '.join(KINDS)} or peak, N in 1..{most}); give --kinds, --num_gpus "
                     "and --precisions instead")
  return kind, n, precision


def _child(spec, values):
  kind, n, precision = _child_spec(spec)
  from benchmarks import measure  # pylint: disable=g-import-not-at-top
  measure.configure(deterministic=values.deterministic)
  batch, steps = values.batch_sizes[0], values.steps[0]  # _run_child gives one of each
  run = (int(n), batch, values.warmup, steps, values.intra_op_threads)
  if kind == "peak":  # and the machine the children measure on
    from tfbits import machine  # pylint: disable=g-import-not-at-top
    result = {"gflops": measure.peak_gflops(values.intra_op_threads),
              "machine": machine.describe().as_dict()}
  else:
    extra = ({"steps_per_loop": values.steps_per_loop} if kind == "tf2_loop" else
             {"strategy": "central_storage"} if kind == "tf2_central" else {})
    seconds, cpu = getattr(measure, "tf2" if kind.startswith("tf2") else kind)(
        *run, precision=precision, **extra)
    examples = steps * batch * (1 if kind == "bare_step" else int(n))
    result = {"examples_per_sec": examples / seconds,
              "cpu_ms_per_example": 1000 * cpu / examples}
  print(json.dumps(result))


def _run_child(spec, values, batch=None):
  """The result of measurement `spec` at `batch` images per replica (the first of
  --batch_sizes without), in a child process."""
  batch = batch or values.batch_sizes[0]
  args = [sys.executable, "-m", "benchmarks.throughput", f"--child={spec}",
          f"--batch_sizes={batch}", f"--steps={_steps(values)[batch]}",
          f"--warmup={values.warmup}", f"--steps_per_loop={values.steps_per_loop}",
          f"--intra_op_threads={values.intra_op_threads}",
          "--deterministic" if values.deterministic else "--nodeterministic"]
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))
  out = children.run(args, env=env)
  if out.returncode:
    last = (out.stderr.strip().splitlines() or ["no output"])[-1]
    raise UsageError(f"{spec} failed: {last}")
  return json.loads(out.stdout.strip().splitlines()[-1])


def _steps(values):
  """{batch size: timed steps}, from --steps: one count for all, or one each."""
  counts = values.steps * len(values.batch_sizes) if len(values.steps) == 1 else values.steps
  return dict(zip(values.batch_sizes, counts))


def _check(values):
  k, steps = values.steps_per_loop, ",".join(map(str, values.steps))
  if len(set(values.batch_sizes)) != len(values.batch_sizes):
    raise UsageError(f"--batch_sizes={','.join(map(str, values.batch_sizes))}: each once")
  if len(values.steps) not in (1, len(values.batch_sizes)):
    raise UsageError(f"--steps={steps}: give one count, or one per --batch_sizes "
                     f"({len(values.batch_sizes)})")
  if any(s % k for s in values.steps) or values.warmup % k:
    raise UsageError(f"--steps={steps} and --warmup={values.warmup} must be multiples "
                     f"of --steps_per_loop={k}, so the clock reads at call boundaries")
  if values.out and filesystems.is_url(values.out):  # os.makedirs would make a folder "gs:"
    raise UsageError(f"--out={values.out}: give a local folder (matplotlib writes the chart "
                     "there); copy the results to object storage afterwards")
  if values.out:
    try:
      os.makedirs(values.out, exist_ok=True)
    except OSError as e:
      raise UsageError(f"cannot use --out={values.out}: {e.strerror or e}") from None
  return values.num_gpus


def main(values):
  if values.child:
    return _child(values.child, values)
  counts = _check(values)
  from benchmarks import measure  # pylint: disable=g-import-not-at-top
  flops = measure.training_flops_per_example()
  peaks = [_run_child("peak:1:fp32", values) for _ in range(values.repeats)]
  peak, where = statistics.median(p["gflops"] for p in peaks), peaks[0]["machine"]
  from harness.devices import cpu_kernels  # pylint: disable=g-import-not-at-top
  from tfbits import machine  # pylint: disable=g-import-not-at-top
  here = machine.Machine.from_dict(where)
  print(f"machine: {here.line()}")
  refused = {p: None if here.gpus else cpu_kernels.refusal(p, here) for p in values.precisions}
  for precision, reason in refused.items():
    if reason:  # what the trainers would say, instead of a run that dies or crawls
      print(f"{precision}: not measured: {reason}")
  steps = _steps(values)
  timed = ", ".join(f"{s} at batch {b}" for b, s in steps.items())
  print(f"global batch = batch x N, timed steps: {timed}, after {values.warmup} warm-up steps, "
        f"synthetic data; K = {values.steps_per_loop}; matmul peak {peak:.0f} GFLOP/s; "
        f"{flops / 1e6:.1f} MFLOP per example")
  print(results.HEADER)
  rows = []
  measured = [p for p in values.precisions if not refused[p]]
  groups = [(p, b, n) for p in measured for b in values.batch_sizes for n in counts]
  progress = children.Progress(values.repeats * sum(
      len([k for k in values.kinds if k != "bare_step" or n == 1]) for _, _, n in groups))
  bare_ms = {}  # (precision, batch): the bare step's milliseconds, the N = 1 yardstick
  for precision, batch, n in groups:
    kinds = [k for k in values.kinds if k != "bare_step" or n == 1]
    rates, cpu = {kind: [] for kind in kinds}, {kind: [] for kind in kinds}
    for r in range(values.repeats):  # rotated, so no kind always runs first or last
      for kind in kinds[r % len(kinds):] + kinds[:r % len(kinds)]:
        spec = f"{kind}:{n}:{precision}"
        result = progress.measured(f"{spec} batch {batch}",
                                   lambda spec=spec: _run_child(spec, values, batch))
        rates[kind].append(result["examples_per_sec"])
        cpu[kind].append(result.get("cpu_ms_per_example"))
    for row in results.group_rows(precision, batch, n, rates, flops, peak, bare_ms, cpu):
      rows.append(row)
      print(results.line(row), flush=True)
  if values.out:
    results.write(values.out, {
        "machine": where, "peak_gflops": peak, "flops_per_example": flops,
        "batch_sizes": values.batch_sizes, "steps": {str(b): s for b, s in steps.items()},
        "warmup": values.warmup, "steps_per_loop": values.steps_per_loop,
        "repeats": values.repeats}, rows)
    results.chart(rows, os.path.join(values.out, "chart.png"))

if __name__ == "__main__":
  cli.app_run(flags.FLAGS, define_flags, main)
