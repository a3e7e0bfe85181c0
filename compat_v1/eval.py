"""Evaluates checkpoints the TF1 way: precision @ 1 with variables_to_restore() of the EMA.

  python -m compat_v1.eval --checkpoint_dir=/tmp/cifar10_train_v1 --dataset=synthetic --run_once

Scores checkpoints of compat_v1.train and of strategies.train alike. Without --run_once it
waits for new checkpoints and scores each, like `cifar10_eval.py`.
"""

from absl import flags

import cifar10_flags as common

common.define_data_flags()
common.define_eval_flags()
FLAGS = flags.FLAGS


def main():
  eval_config = common.eval_config(FLAGS)
  from compat_v1 import evaluator  # pylint: disable=g-import-not-at-top
  evaluator.run(eval_config)


if __name__ == "__main__":
  common.app_run(main)
