"""The evaluators' outer loop: the newest checkpoint once, or each new one as it appears.

`evaluate_each(evaluate, config)` calls evaluate(path) the way `cifar10_eval.py` did: on the
newest checkpoint of config.checkpoint_dir (config.run_once), or on every new one, checking
every eval_interval_secs, until it is stopped. Both evaluators hand it their `evaluate`.

A trainer deletes its checkpoints beyond --max_checkpoints_to_keep while the evaluator may be
reading one: a checkpoint that is gone by the time it fails to read is skipped with a log
line (the next one is evaluated), not an error.
"""

import time

from absl import logging
import tensorflow as tf

from cifar10 import checkpoints


def _deleted(path, error):
  """Whether `error` from reading `path` came from the trainer deleting it meanwhile."""
  if tf.io.gfile.exists(path + ".index"):  # still there: damaged, not deleted
    return False
  logging.warning("Skipped %s: the trainer deleted it while it was read (%s); it keeps "
                  "--max_checkpoints_to_keep checkpoints", path, str(error).splitlines()[0])
  return True


def _new_checkpoints(folder, interval_secs):
  """Each new newest checkpoint of `folder` as it appears, looking every interval_secs: what
  tf.train.checkpoints_iterator does, over checkpoints.newest, so that an empty or damaged
  index (which the trainer repairs at its next start) is not an error here."""
  last = None
  while True:
    path = checkpoints.newest(folder)
    if path is not None and path != last:
      last = path
      yield path
    else:
      time.sleep(interval_secs)


def evaluate_each(evaluate, config):
  """Returns the last evaluate(path) result, a (precision, global step) pair. Continuous
  evaluation ends once a checkpoint of config.last_step or later is scored (a managed
  cluster's evaluator task: the chief's final step), or never."""
  if config.run_once:
    tried = None
    while True:  # the newest checkpoint, even if the one found first is deleted meanwhile
      path = checkpoints.resolve(config.checkpoint_dir)
      try:
        return evaluate(path)
      except Exception as e:  # pylint: disable=broad-except  # TF and UsageError alike
        if path == tried or not _deleted(path, e):
          raise
        tried = path
  result = None
  for path in _new_checkpoints(config.checkpoint_dir, config.eval_interval_secs):
    try:
      result = evaluate(path)
    except Exception as e:  # pylint: disable=broad-except
      if not _deleted(path, e):
        raise
      continue
    if config.last_step is not None and result[1] >= config.last_step:
      logging.info("Scored the final step %d of --max_steps=%d; the evaluator is done",
                   result[1], config.last_step)
      return result
  return result
