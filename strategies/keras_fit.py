"""Trains the CIFAR-10 CNN with Keras `fit` under MirroredStrategy (replaces multi_gpu_model).

  python -m strategies.keras_fit --num_gpus=2 --dataset=synthetic --max_steps=200 \
      --save_checkpoint_steps=50 --train_dir=/tmp/cifar10_keras

The model is strategies.keras_model.Cifar10Model: the shared network, initial weights, input
stream and learning-rate schedule, so one `fit` step equals one strategies.train step.
An epoch here is --save_checkpoint_steps steps: ModelCheckpoint saves the weights with the
optimizer's step count after each (keras-EPOCH.weights.h5, the newest
--max_checkpoints_to_keep kept), the TensorBoard callback writes loss and accuracy every
--save_summaries_steps steps, and the progress bar shows them. Restarted with the same
--train_dir, it loads the newest complete checkpoint and the input stream goes on from that
step.
"""

from absl import flags

import cifar10_flags as common

common.define_data_flags()
common.define_device_flags()
common.define_train_flags()
FLAGS = flags.FLAGS


def main():
  devices_config = common.device_config(FLAGS)
  train_config = common.train_config(FLAGS)
  if train_config.init_from:
    raise common.UsageError("--init_from is not supported by keras_fit; use strategies.train")
  if train_config.ema_reads != "updated":
    raise common.UsageError("--ema_reads is not supported by keras_fit (it keeps no moving "
                            "averages); use strategies.train")
  if train_config.max_steps % train_config.save_checkpoint_steps:
    raise common.UsageError(
        f"--max_steps={train_config.max_steps} must be a multiple of --save_checkpoint_steps="
        f"{train_config.save_checkpoint_steps} (an epoch of keras_fit is that many steps)")
  # TensorFlow is imported only now, so bad flags are answered in milliseconds.
  from cifar10 import devices  # pylint: disable=g-import-not-at-top
  from strategies import keras_loop  # pylint: disable=g-import-not-at-top
  keras_loop.fit(train_config, devices.setup(devices_config))


if __name__ == "__main__":
  common.app_run(main)
