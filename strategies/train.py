"""Trains the CIFAR-10 CNN with tf.distribute (the TF2 form of cifar10_multi_gpu_train.py).

  python -m strategies.train --num_gpus=2 --dataset=synthetic --max_steps=1000 \
      --train_dir=/tmp/cifar10_train

Kept short on purpose: flags become cifar10.config objects here, the work is in
strategies.loop. Restarting with the same --train_dir resumes from the newest checkpoint.
"""

from absl import app
from absl import flags

from cifar10 import config
from strategies import flags as common

common.define_data_flags()
common.define_device_flags()
flags.DEFINE_string("train_dir", "/tmp/cifar10_train", "Where checkpoints and summaries go.")
flags.DEFINE_integer("max_steps", 1000000, "Train until the global step reaches this.")
flags.DEFINE_integer("batch_size", 128, "Images per replica per step (global batch = "
                     "batch_size * num_gpus).")
flags.DEFINE_bool("use_fp16", False, "Compute in float16 (variables and updates stay float32).")
flags.DEFINE_string("strategy", "mirrored", "mirrored | one_device")
flags.DEFINE_float("learning_rate", 0.1, "Initial learning rate.")
flags.DEFINE_bool("decay_steps_per_global_batch", False, "Count decay epochs in global batches "
                  "(the original counts per-GPU batches, so N GPUs decay N times later).")
flags.DEFINE_integer("log_frequency", 10, "Log the loss line every this many steps.")
flags.DEFINE_integer("save_summaries_steps", 100, "Write summaries every this many steps.")
flags.DEFINE_integer("save_checkpoint_steps", 1000, "Checkpoint every this many steps.")
flags.DEFINE_integer("max_checkpoints_to_keep", 5, "Older checkpoints are deleted.")
FLAGS = flags.FLAGS


def main():
  devices_config = common.device_config(FLAGS)
  train_config = config.TrainConfig(
      train_dir=FLAGS.train_dir, max_steps=FLAGS.max_steps, batch_size=FLAGS.batch_size,
      seed=FLAGS.seed, dataset=FLAGS.dataset, data_dir=FLAGS.data_dir, download=FLAGS.download,
      learning_rate=FLAGS.learning_rate,
      decay_steps_per_global_batch=FLAGS.decay_steps_per_global_batch,
      use_fp16=FLAGS.use_fp16, log_frequency=FLAGS.log_frequency,
      save_summaries_steps=FLAGS.save_summaries_steps,
      save_checkpoint_steps=FLAGS.save_checkpoint_steps,
      max_checkpoints_to_keep=FLAGS.max_checkpoints_to_keep)
  # TensorFlow is imported only now, so bad flags are answered in milliseconds.
  from cifar10 import devices  # pylint: disable=g-import-not-at-top
  from strategies import loop  # pylint: disable=g-import-not-at-top
  loop.run(train_config, devices.setup(devices_config), FLAGS.strategy)


if __name__ == "__main__":
  app.run(common.run_main(main))
