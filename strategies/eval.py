"""Evaluates checkpoints of `strategies.train`: precision @ 1 with the EMA weights.

  python -m strategies.eval --checkpoint_dir=/tmp/cifar10_train --dataset=synthetic --run_once

Without --run_once it waits for new checkpoints and scores each, like `cifar10_eval.py`.
"""

from absl import app
from absl import flags

from cifar10 import config
from strategies import flags as common

common.define_data_flags()
flags.DEFINE_string("eval_dir", "/tmp/cifar10_eval", "Where the eval summaries go.")
flags.DEFINE_string("eval_data", "test", "'test' or 'train_eval'.")
flags.DEFINE_string("checkpoint_dir", "/tmp/cifar10_train", "Where training checkpoints are.")
flags.DEFINE_integer("eval_interval_secs", 60 * 5, "How often to look for a new checkpoint.")
flags.DEFINE_integer("num_examples", 10000, "Number of examples to run.")
flags.DEFINE_integer("batch_size", 128, "Eval batch size.")
flags.DEFINE_bool("run_once", False, "Whether to run eval only once.")
FLAGS = flags.FLAGS


def main():
  eval_config = config.EvalConfig(
      checkpoint_dir=FLAGS.checkpoint_dir, eval_dir=FLAGS.eval_dir, eval_data=FLAGS.eval_data,
      num_examples=FLAGS.num_examples, batch_size=FLAGS.batch_size, run_once=FLAGS.run_once,
      eval_interval_secs=FLAGS.eval_interval_secs, dataset=FLAGS.dataset,
      data_dir=FLAGS.data_dir, download=FLAGS.download, seed=FLAGS.seed)
  from strategies import evaluator  # pylint: disable=g-import-not-at-top
  evaluator.run(eval_config)


if __name__ == "__main__":
  app.run(common.run_main(main))
