r"""Trains the CIFAR-10 CNN with Keras `fit` under MirroredStrategy (replaces multi_gpu_model).

  python -m examples.keras_fit --num_gpus=2 --dataset=synthetic --max_steps=200 \
      --save_checkpoint_steps=50 --train_dir=/tmp/cifar10_keras

The model is examples.keras_model.Cifar10Model: the shared network, initial weights, input
stream and learning-rate schedule, so one `fit` step equals one strategies.train step, and
examples.keras_loop keeps the moving averages and writes the checkpoints strategies.train
writes (`ckpt-N`, bit for bit the same): both evaluators and both trainers' --init_from read
them. An epoch is --save_checkpoint_steps steps (the last one ends at --max_steps); the
TensorBoard callback writes loss and accuracy every --save_summaries_steps steps, and the
progress bar shows them. SIGTERM and Ctrl-C finish the step and save; restarted with the same
--train_dir, it resumes from the newest complete checkpoint and the input stream goes on from
that step.
"""

from absl import flags

from cifar10.errors import UsageError

from harness.command_line import cli
from harness.command_line import options


def define_flags(fv):
  options.define_train_flags(fv)


def main(values):
  device_config = options.device_config(values)
  train_config = options.train_config(values)
  if train_config.loss_scale is not None:
    raise UsageError("--loss_scale is not supported by keras_fit (its float16 runs without "
                     "loss scaling, as the original's --use_fp16 did); use strategies.train")
  if train_config.profile_steps:
    raise UsageError("--profile_steps is not supported by keras_fit (use Keras's "
                     "TensorBoard(profile_batch=...)); use strategies.train")
  if train_config.ema_reads != "updated":
    raise UsageError("--ema_reads=previous is not supported by keras_fit (its moving "
                     "averages follow each step's update); use strategies.train")
  # TensorFlow is imported only now, so bad flags are answered in milliseconds.
  from examples import keras_loop  # pylint: disable=g-import-not-at-top
  from strategies import devices  # pylint: disable=g-import-not-at-top
  keras_loop.fit(train_config, devices.get_strategy("mirrored", devices.setup(device_config)))


if __name__ == "__main__":
  cli.app_run(flags.FLAGS, define_flags, main)
