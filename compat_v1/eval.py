r"""Scores checkpoints of either trainer (or the original's), the TF1 way.

  python -m compat_v1.eval --checkpoint_dir=/tmp/cifar10_train_v1 \
      --dataset=synthetic --run_once

Precision @ 1 and the loss of the moving averages (variables_to_restore()) on
the test split: one line per checkpoint on standard output, and summaries in
--eval_dir (by default <checkpoint_dir>/eval, beside the training curves).
Without --run_once it scores each new checkpoint as the trainer writes it, until
Ctrl-C or the trainer's last step.
"""

from absl import flags

from harness.command_line import cli
from harness.command_line import options


def define_flags(fv):
  options.define_eval_flags(fv)


def main(values):
  eval_config = options.eval_config(values)
  from compat_v1 import evaluator  # pylint: disable=g-import-not-at-top
  evaluator.run(eval_config)


def run():
  """The console script (pyproject.toml), as `python -m compat_v1.eval`."""
  cli.app_run(flags.FLAGS, define_flags, main)


if __name__ == "__main__":
  run()
