"""A two-output Keras model under MirroredStrategy: named losses, loss weights and metrics.

  python -m examples.keras_two_outputs --num_gpus=2 --dataset=synthetic --steps=50

The shared CIFAR-10 network with a second head (`vehicle`: airplane, automobile, ship or
truck), compiled with a loss, a loss weight and a metric per output name, and fitted under
the strategy. The log keeps the names (`label_loss`, `vehicle_accuracy`, ...); TF1's
multi_gpu_model renamed the outputs of the replicated model (`concatenate_1`, ...), so
per-output losses and metrics keyed by name broke.
"""

from absl import flags
from absl import logging

from harness.command_line import cli
from harness.command_line import flag_ranges
from harness.command_line import options


def define_flags(fv):
  options.define_example_flags(fv, steps=50, batch_help="Images per replica per step.")
  flag_ranges.number("vehicle_weight", 0.5, "Loss weight of the vehicle output.",
                     flag_values=fv, bounds=(0.0, 1000.0, False))


def main(values):
  device_config = options.example_configs(values)
  from cifar10 import data_sources  # pylint: disable=g-import-not-at-top
  from examples import keras_model  # pylint: disable=g-import-not-at-top
  from strategies import devices  # pylint: disable=g-import-not-at-top
  strategy = devices.get_strategy("mirrored", devices.setup(device_config))
  source = data_sources.load_source(values.dataset, "train", seed=values.seed,
                                      data_dir=values.data_dir, download=values.download)
  history = keras_model.fit_two_outputs(strategy, source, seed=values.seed, steps=values.steps,
                                        batch_size=values.batch_size,
                                        vehicle_weight=values.vehicle_weight)
  for name, history_values in sorted(history.items()):
    logging.info("%s = %.4f", name, history_values[-1])


if __name__ == "__main__":
  cli.app_run(flags.FLAGS, define_flags, main)
