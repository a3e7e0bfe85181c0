r"""Trains the two-branch model of examples.two_branch: one model split over two devices.

  python -m examples.model_parallel --num_gpus=2 --dataset=synthetic --steps=100 \
      [--log_device_placement]

Branch 0 runs on the first device, branch 1 on the second (GPUs, or logical CPU devices on a
machine without GPUs), the head and the weights on the host CPU. With --log_device_placement
TensorFlow logs the device of every op (`branch_1/...: (Conv2D): .../device:GPU:1`).
"""

from absl import flags

from cifar10.errors import UsageError
from harness.command_line import cli
from harness.command_line import flag_ranges
from harness.command_line import options


def define_flags(fv):
  options.define_example_flags(fv, steps=100, batch_help="Images per step (both branches see "
                               "all of them).")
  flag_ranges.number("learning_rate", 0.05, "SGD learning rate.", flag_values=fv)
  flag_ranges.integer("log_frequency", 10, "Log the loss every this many steps.",
                      flag_values=fv)


def main(values):
  device_config = options.example_configs(values)
  if device_config.num_gpus != 2:
    raise UsageError(f"the two-branch model runs on 2 devices; got --num_gpus="
                     f"{device_config.num_gpus}")
  from cifar10 import data_sources  # pylint: disable=g-import-not-at-top
  from examples import two_branch  # pylint: disable=g-import-not-at-top
  from strategies import devices  # pylint: disable=g-import-not-at-top
  branch_devices = devices.setup(device_config)
  source = data_sources.load_source(values.dataset, "train", seed=values.seed,
                                      data_dir=values.data_dir, download=values.download)
  two_branch.train(branch_devices, source, seed=values.seed, steps=values.steps,
                   batch_size=values.batch_size, learning_rate=values.learning_rate,
                   log_frequency=values.log_frequency)


if __name__ == "__main__":
  cli.app_run(flags.FLAGS, define_flags, main)
