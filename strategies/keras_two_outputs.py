"""A two-output Keras model under MirroredStrategy: named losses, loss weights and metrics.

  python -m strategies.keras_two_outputs --num_gpus=2 --dataset=synthetic --steps=50

The shared CIFAR-10 network with a second head (`vehicle`: airplane, automobile, ship or
truck), compiled with a loss, a loss weight and a metric per output name, and fitted under
the strategy. The log keeps the names (`label_loss`, `vehicle_accuracy`, ...); TF1's
multi_gpu_model renamed the outputs of the replicated model (`concatenate_1`, ...), so
per-output losses and metrics keyed by name broke.
"""

from absl import flags
from absl import logging

import cifar10_flags as common

common.define_example_flags(steps=50, batch_help="Images per replica per step.")
flags.DEFINE_float("vehicle_weight", 0.5, "Loss weight of the vehicle output.")
FLAGS = flags.FLAGS


def main():
  devices_config = common.example_configs(FLAGS)
  if FLAGS.vehicle_weight < 0:
    raise common.UsageError(f"--vehicle_weight must be >= 0, got {FLAGS.vehicle_weight}")
  from cifar10 import devices  # pylint: disable=g-import-not-at-top
  from cifar10 import input_pipeline  # pylint: disable=g-import-not-at-top
  from strategies import distribute  # pylint: disable=g-import-not-at-top
  from strategies import keras_model  # pylint: disable=g-import-not-at-top
  strategy = distribute.get_strategy("mirrored", devices.setup(devices_config))
  source = input_pipeline.load_source(FLAGS.dataset, "train", seed=FLAGS.seed,
                                      data_dir=FLAGS.data_dir, download=FLAGS.download)
  history = keras_model.fit_two_outputs(strategy, source, seed=FLAGS.seed, steps=FLAGS.steps,
                                        batch_size=FLAGS.batch_size,
                                        vehicle_weight=FLAGS.vehicle_weight)
  for name, values in sorted(history.items()):
    logging.info("%s = %.4f", name, values[-1])


if __name__ == "__main__":
  common.app_run(main)
