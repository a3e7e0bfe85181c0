"""Compares the two trainers over the same weights and batches, variable by variable.

  python -m equivalence --num_gpus=2 --steps=10

Tables: (1) the porting kit's step-by-step report of the towers against the replicas over the
same --steps batches (losses, logits, gradients, weights: bit-identical); (2) the v1 towers against
one device computing the whole batch (float32 summation order, 5e-6 of each variable's largest
gradient); (3) weights and EMA shadows after --steps steps of both trainers (bit-identical), with
the learning rate of every step. Exits 1 when any row is outside its tolerance.
"""

import os

from absl import flags

from cifar10.errors import UsageError
from harness.command_line import cli
from harness.command_line import flag_ranges
from tfbits import process_end


def define_flags(fv):
  flag_ranges.integer("num_gpus", 2, "Replicas / towers (logical CPU devices here).",
                      flag_values=fv)
  flag_ranges.integer("steps", 10, "Training steps to compare.", flag_values=fv)
  flag_ranges.integer("batch_size", 8, "Images per replica / tower.", flag_values=fv)
  flag_ranges.integer("decay_steps", 4, "Small, so the comparison crosses decay boundaries.",
                      flag_values=fv)
  flag_ranges.integer("seed", 0, "Seed of weights and data.", flag_values=fv)
  flags.DEFINE_bool("multi_worker", False, "Also run --num_gpus worker processes of "
                    "MultiWorkerMirroredStrategy on 127.0.0.1 and compare them with the "
                    "towers.", flag_values=fv)


def main(values):
  if values.decay_steps < 1:  # 0, the trainers' "the original's formula", is no small number
    raise UsageError(f"--decay_steps must be a positive integer, got {values.decay_steps}")
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  n = values.num_gpus
  from cifar10 import config  # pylint: disable=g-import-not-at-top
  from strategies import devices  # pylint: disable=g-import-not-at-top
  # The trainers' own set-up of --num_gpus=n (before TensorFlow runs anything): the first n
  # GPUs or n logical CPU devices, and the bit contract's settings (--deterministic).
  devices.setup(config.DeviceConfig(num_gpus=n))
  from absl import logging  # pylint: disable=g-import-not-at-top
  logging.set_verbosity(logging.WARNING)  # the tables are the output, not TF's progress notes
  from equivalence import report  # pylint: disable=g-import-not-at-top
  text, ok = report.run(n, values.seed, values.steps, values.batch_size, values.decay_steps,
                        report.SINGLE_DEVICE_TOLERANCE, values.multi_worker)
  # A reader gone (`| head`) reads nothing more; the status is still the verdict.
  process_end.write_out(f"{text}\n{'EQUIVALENT' if ok else 'NOT EQUIVALENT'}\n")
  return 0 if ok else 1


def run():
  """The console script (pyproject.toml), as `python -m equivalence`."""
  cli.app_run(flags.FLAGS, define_flags, main)


if __name__ == "__main__":
  run()
