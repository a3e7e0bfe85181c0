"""Trains the two-branch model of strategies.two_branch: one model split over two devices.

  python -m strategies.model_parallel --num_gpus=2 --dataset=synthetic --steps=100 \
      [--log_device_placement]

Branch 0 runs on the first device, branch 1 on the second (GPUs, or logical CPU devices on a
machine without GPUs), the head and the weights on the host CPU. With --log_device_placement
TensorFlow logs the device of every op (`branch_1/...: (Conv2D): .../device:GPU:1`).
"""

from absl import flags

import cifar10_flags as common

common.define_example_flags(steps=100, batch_help="Images per step (both branches see all "
                            "of them).")
flags.DEFINE_float("learning_rate", 0.05, "SGD learning rate.")
flags.DEFINE_integer("log_frequency", 10, "Log the loss every this many steps.")
FLAGS = flags.FLAGS


def main():
  devices_config = common.example_configs(FLAGS)
  if devices_config.num_gpus != 2:
    raise common.UsageError(f"the two-branch model runs on 2 devices; got --num_gpus="
                            f"{devices_config.num_gpus}")
  if FLAGS.log_frequency < 1 or not FLAGS.learning_rate > 0:
    raise common.UsageError("--log_frequency and --learning_rate must be positive")
  from cifar10 import devices  # pylint: disable=g-import-not-at-top
  from cifar10 import input_pipeline  # pylint: disable=g-import-not-at-top
  from strategies import two_branch  # pylint: disable=g-import-not-at-top
  branch_devices = devices.setup(devices_config)
  source = input_pipeline.load_source(FLAGS.dataset, "train", seed=FLAGS.seed,
                                      data_dir=FLAGS.data_dir, download=FLAGS.download)
  two_branch.train(branch_devices, source, seed=FLAGS.seed, steps=FLAGS.steps,
                   batch_size=FLAGS.batch_size, learning_rate=FLAGS.learning_rate,
                   log_frequency=FLAGS.log_frequency)


if __name__ == "__main__":
  common.app_run(main)
