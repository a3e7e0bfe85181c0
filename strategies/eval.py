"""Evaluates checkpoints of either trainer the TF2 way: precision @ 1 with the EMA weights.

  python -m strategies.eval --checkpoint_dir=/tmp/cifar10_train --dataset=synthetic --run_once

Without --run_once it waits for new checkpoints and scores each, like `cifar10_eval.py`.
"""

from absl import flags

from harness import cli
from harness import options


def define_flags(fv):
  options.define_eval_flags(fv)


def main(values):
  eval_config = options.eval_config(values)
  from strategies import evaluator  # pylint: disable=g-import-not-at-top
  evaluator.run(eval_config)


if __name__ == "__main__":
  cli.app_run(flags.FLAGS, define_flags, main)
