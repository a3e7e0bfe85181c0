"""The training input pipeline alone, on the classic `.bin` path: examples/sec per host core.

  python -m benchmarks.input_pipeline --threads=1,2 --batch_size=128 --examples=20000

On a GPU this model's step takes about a millisecond, so the host's input pipeline decides
how fast it trains. This writes the five classic training files (50,000 random records of
the CIFAR-10 binary format) into a temporary --data_dir, loads them as `--dataset=cifar10_bin`
does (read and decoded once, into memory), and then times cifar10.input_pipeline's train
stream alone: per example, the shuffled index, the gather, the original's distortions
(crop, flip, brightness, contrast) and the standardisation; then the batch. Each thread
count runs in its own child process pinned to that many cores (sched_setaffinity), with
tf.data's thread pool and TensorFlow's op pools of that size. Prints examples/sec, per core,
and the cores it takes to feed a GPU at --target examples/sec (BENCHMARKS.md).
"""

import json
import os
import sys
import tempfile
import time

from absl import flags

from benchmarks import children
from cifar10 import config
from cifar10.errors import UsageError
from harness.command_line import cli
from harness.command_line import flag_ranges


def define_flags(fv):
  flag_ranges.integers("threads", ["1", "2"], "Thread (and core) counts to measure.",
                       flag_values=fv, bounds=(1, config.MAX_THREADS),
                       applies="at most this machine's cores")
  flag_ranges.integer("batch_size", 128, "Examples per batch (a global batch).",
                      flag_values=fv)
  flag_ranges.integer("examples", 20000, "Examples timed, after --warmup_examples.",
                      flag_values=fv, bounds=(1, 2 ** 31 - 1))
  flag_ranges.integer("warmup_examples", 2560, "Examples made first, untimed.",
                      flag_values=fv, bounds=(0, 2 ** 31 - 1))
  flag_ranges.integer("target", 50000, "The GPU's appetite, examples/sec.", flag_values=fv,
                      bounds=(1, 2 ** 31 - 1))
  flag_ranges.integer("child_threads", 0, "Internal: measure with this many threads.",
                      flag_values=fv, bounds=(0, config.MAX_THREADS),  # 0: not a child
                      applies="internal (a measurement's own process)")


def measure(threads, batch_size, examples, warmup_examples):
  """Examples/sec of the train stream over freshly written .bin files, on `threads` cores."""
  cores = sorted(os.sched_getaffinity(0))[:threads]
  os.sched_setaffinity(0, cores)
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from cifar10 import data_sources, input_pipeline  # pylint: disable=g-import-not-at-top,g-multiple-import
  tf.config.threading.set_intra_op_parallelism_threads(threads)
  tf.config.threading.set_inter_op_parallelism_threads(threads)
  with tempfile.TemporaryDirectory(prefix="benchmark-input-") as data_dir:
    rng = np.random.default_rng(0)
    per_file = 10000
    for name in data_sources.BIN_FILES["train"]:
      records = rng.integers(0, 256, (per_file, data_sources.RECORD_BYTES), dtype=np.uint8)
      records[:, 0] %= 10  # a label byte
      records.tofile(os.path.join(data_dir, name))
    begin = time.perf_counter()
    source = data_sources.load_source("cifar10_bin", "train", seed=0, data_dir=data_dir)
    load_seconds = time.perf_counter() - begin
  dataset = input_pipeline.train_dataset(source, seed=0, global_batch_size=batch_size)
  options = tf.data.Options()
  options.threading.private_threadpool_size = threads
  options.threading.max_intra_op_parallelism = 1
  batches = iter(dataset.with_options(options))
  for _ in range(max(1, warmup_examples // batch_size)):
    next(batches)
  count = max(1, examples // batch_size)
  begin = time.perf_counter()
  for _ in range(count):
    images, _ = next(batches)
  images.numpy()
  seconds = time.perf_counter() - begin
  return {"threads": threads, "cores": len(cores), "load_seconds": load_seconds,
          "examples_per_sec": count * batch_size / seconds}


def main(values):
  available = len(os.sched_getaffinity(0))
  counts = [values.child_threads] if values.child_threads else values.threads
  if max(counts) > available:
    raise UsageError(f"--threads must lie in 1..{available} (this machine's cores), got "
                     f"{max(counts)}")
  if values.child_threads:
    print(json.dumps(measure(values.child_threads, values.batch_size, values.examples,
                             values.warmup_examples)))
    return
  print(f"train stream of the .bin path, batch {values.batch_size}, {values.examples} "
        "examples timed")
  print(f"{'threads':>7} {'ex/s':>9} {'ex/s/core':>10} {'cores for ' + str(values.target):>16}")
  for threads in counts:
    args = [sys.executable, "-m", "benchmarks.input_pipeline", f"--child_threads={threads}",
            f"--batch_size={values.batch_size}", f"--examples={values.examples}",
            f"--warmup_examples={values.warmup_examples}"]
    out = children.run(args)
    if out.returncode:
      last = (out.stderr.strip().splitlines() or ["no output"])[-1]
      raise UsageError(f"the {threads}-thread measurement failed: {last}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    per_core = result["examples_per_sec"] / result["cores"]
    print(f"{threads:>7} {result['examples_per_sec']:>9.0f} {per_core:>10.0f} "
          f"{values.target / per_core:>16.1f}", flush=True)


if __name__ == "__main__":
  cli.app_run(flags.FLAGS, define_flags, main)
