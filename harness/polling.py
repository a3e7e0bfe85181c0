"""The evaluators' outer loop: the newest checkpoint once, or each new one as it appears.

`evaluate_each(evaluate, config)` calls evaluate(path) the way `cifar10_eval.py` did: on the
newest checkpoint of config.checkpoint_dir (config.run_once), or on every new one, checking
every eval_interval_secs, until it is stopped. Both evaluators hand it their `evaluate`.
"""

import tensorflow as tf

from cifar10 import checkpoints


def evaluate_each(evaluate, config):
  """Returns the last evaluate(path) result."""
  if config.run_once:
    return evaluate(checkpoints.resolve(config.checkpoint_dir))
  result = None
  for path in tf.train.checkpoints_iterator(config.checkpoint_dir,
                                            min_interval_secs=config.eval_interval_secs):
    result = evaluate(path)
  return result
