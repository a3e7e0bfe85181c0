"""Evaluates checkpoints of `strategies.train`: precision @ 1 with the EMA weights.

  python -m strategies.eval --checkpoint_dir=/tmp/cifar10_train --dataset=synthetic --run_once

Without --run_once it waits for new checkpoints and scores each, like `cifar10_eval.py`.
"""

from absl import flags

import cifar10_flags as common

common.define_data_flags()
common.define_eval_flags()
FLAGS = flags.FLAGS


def main():
  eval_config = common.eval_config(FLAGS)
  from strategies import evaluator  # pylint: disable=g-import-not-at-top
  evaluator.run(eval_config)


if __name__ == "__main__":
  common.app_run(main)
