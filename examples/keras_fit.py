"""Trains the CIFAR-10 CNN with Keras `fit` under MirroredStrategy (replaces multi_gpu_model).

  python -m examples.keras_fit --num_gpus=2 --dataset=synthetic --max_steps=200 \
      --save_checkpoint_steps=50 --train_dir=/tmp/cifar10_keras

The model is examples.keras_model.Cifar10Model: the shared network, initial weights, input
stream and learning-rate schedule, so one `fit` step equals one strategies.train step.
An epoch here is --save_checkpoint_steps steps: ModelCheckpoint saves the weights with the
optimizer's step count after each (keras-EPOCH.weights.h5, the newest
--max_checkpoints_to_keep kept), the TensorBoard callback writes loss and accuracy every
--save_summaries_steps steps, and the progress bar shows them. Restarted with the same
--train_dir, it loads the newest complete checkpoint and the input stream goes on from that
step.
"""

from absl import flags

from cifar10 import errors
from cifar10.errors import UsageError

from harness import cli
from harness import options


def define_flags(fv):
  options.define_train_flags(fv)


def main(values):
  device_config = options.device_config(values)
  train_config = options.train_config(values)
  if train_config.init_from:
    raise UsageError("--init_from is not supported by keras_fit; use strategies.train")
  if train_config.loss_scale is not None:
    raise UsageError("--loss_scale is not supported by keras_fit (its float16 runs without "
                     "loss scaling, as the original's --use_fp16 did); use strategies.train")
  if train_config.profile_steps:
    raise UsageError("--profile_steps is not supported by keras_fit (use Keras's "
                     "TensorBoard(profile_batch=...)); use strategies.train")
  if train_config.preemption_exit_code != errors.PREEMPTED_EXIT_STATUS:
    raise UsageError("--preemption_exit_code is not supported by keras_fit (SIGTERM ends "
                     "`fit` at once, status 143, keeping the last epoch's checkpoint); use "
                     "strategies.train")
  if train_config.ema_reads != "updated":
    raise UsageError("--ema_reads is not supported by keras_fit (it keeps no moving "
                     "averages); use strategies.train")
  if train_config.max_steps % train_config.save_checkpoint_steps:
    raise UsageError(
        f"--max_steps={train_config.max_steps} must be a multiple of --save_checkpoint_steps="
        f"{train_config.save_checkpoint_steps} (an epoch of keras_fit is that many steps)")
  # TensorFlow is imported only now, so bad flags are answered in milliseconds.
  from examples import keras_loop  # pylint: disable=g-import-not-at-top
  from strategies import devices  # pylint: disable=g-import-not-at-top
  keras_loop.fit(train_config, devices.get_strategy("mirrored", devices.setup(device_config)))


if __name__ == "__main__":
  cli.app_run(flags.FLAGS, define_flags, main)
