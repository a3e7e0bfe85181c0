"""Trains the CIFAR-10 CNN with tf.distribute (the TF2 form of cifar10_multi_gpu_train.py).

  python -m strategies.train --num_gpus=2 --dataset=synthetic --max_steps=1000 \
      --train_dir=/tmp/cifar10_train

Kept short on purpose: flags become cifar10.config objects here, the work is in
strategies.loop. Restarting with the same --train_dir resumes from the newest checkpoint.
"""

from absl import flags

import cifar10_flags as common

common.define_data_flags()
common.define_device_flags()
common.define_train_flags()
flags.DEFINE_string("strategy", "mirrored", "mirrored | one_device | multi_worker_mirrored | "
                    "parameter_server")
flags.DEFINE_integer("peer_timeout_secs", 300, "multi_worker_mirrored: how long to wait for "
                     "the other workers, at start and in every all-reduce.")
flags.DEFINE_integer("ps_partition_min_bytes", 0, "parameter_server: split each weight of at "
                     "least twice this many bytes into row blocks of at least this size over "
                     "the ps tasks (0: no partitioning).")
FLAGS = flags.FLAGS


def main():
  devices_config = common.device_config(FLAGS)
  train_config = common.train_config(FLAGS)
  # TensorFlow is imported only now, so bad flags are answered in milliseconds.
  from cifar10 import devices  # pylint: disable=g-import-not-at-top
  from strategies import distribute  # pylint: disable=g-import-not-at-top
  from strategies import loop  # pylint: disable=g-import-not-at-top
  if FLAGS.strategy == "parameter_server" and distribute.worker_identity()[0] in ("worker",
                                                                                   "ps"):
    distribute.serve()  # workers and ps tasks only serve; the chief runs the loop
    return
  if FLAGS.peer_timeout_secs < 1:
    raise common.UsageError("--peer_timeout_secs must be a positive integer")
  loop.run(train_config, devices.setup(devices_config), FLAGS.strategy,
           FLAGS.peer_timeout_secs, FLAGS.ps_partition_min_bytes)


if __name__ == "__main__":
  common.app_run(main)
