"""Trains the CIFAR-10 CNN the TF1 way: towers, average_gradients, Session, Saver.

  python -m compat_v1.train --num_gpus=2 --dataset=synthetic --max_steps=1000 \
      --train_dir=/tmp/cifar10_train_v1

Same flags and defaults as `strategies.train` (without --strategy); with the same --seed,
--dataset, --num_gpus, --batch_size and --max_steps both write the same weights.
"""

from absl import app
from absl import flags

import cifar10_flags as common

common.define_data_flags()
common.define_device_flags()
common.define_train_flags()
FLAGS = flags.FLAGS


def main():
  devices_config = common.device_config(FLAGS)
  train_config = common.train_config(FLAGS)
  from compat_v1 import loop  # pylint: disable=g-import-not-at-top
  loop.run(train_config, devices_config)


if __name__ == "__main__":
  app.run(common.run_main(main))
