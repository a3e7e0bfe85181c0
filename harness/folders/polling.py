"""The evaluators' outer loop: the newest checkpoint once, or each new one as it appears.

`evaluate_each(evaluate, config)` calls evaluate(path) the way `cifar10_eval.py` did: on the
newest checkpoint of config.checkpoint_dir (config.run_once), or on every new one, checking
every eval_interval_secs, until it is stopped. Both evaluators hand it their `evaluate`.

A trainer deletes its checkpoints beyond --max_checkpoints_to_keep while the evaluator may be
reading one: a checkpoint that is gone by the time it fails to read is skipped with a log
line (the next one is evaluated), not an error.
"""

import socket
import time

from absl import logging
import tensorflow as tf

from cifar10 import checkpoints
from cifar10 import data_sources
from cifar10.errors import UsageError
from harness.folders import ownership
from harness.control import progress
from harness.folders import run_folder
from tfbits import machine


def open_eval_dir(config):
  """Checks what an evaluation reads (the split's data; with run_once, a checkpoint of the
  model), then makes the eval dir (ownership.usable_eval_dir): a start that fails on its input
  writes nothing, not even --eval_dir or the --checkpoint_dir it lies in. Continuous
  evaluation may start before the trainer's first checkpoint. An eval dir that is there
  already is checked first (a file, a planted link: refused before anything is read)."""
  if tf.io.gfile.exists(config.eval_dir) or run_folder.is_link(config.eval_dir):
    ownership.usable_eval_dir(config)
  split = "test" if config.eval_data == "test" else "train"
  data_sources.check_available(config.dataset, split, data_dir=config.data_dir,
                               download=config.download)
  if config.run_once:
    checkpoints.keys(checkpoints.resolve(config.checkpoint_dir), kinds=("ema", "step"))
  ownership.usable_eval_dir(config)


def _deleted(path, error):
  """Whether `error` from reading `path` came from the trainer deleting it meanwhile."""
  if tf.io.gfile.exists(path + ".index"):  # still there: damaged, not deleted
    return False
  logging.warning("Skipped %s: the trainer deleted it while it was read (%s); it keeps "
                  "--max_checkpoints_to_keep checkpoints", path, str(error).splitlines()[0])
  return True


def _answers(address):
  """Whether something listens at host:port (a cluster task's gRPC server)."""
  host, _, port = address.rpartition(":")
  try:
    with socket.create_connection((host, int(port)), timeout=2):
      return True
  except (OSError, ValueError):
    return False


def _new_checkpoints(config):
  """Each new newest checkpoint of config.checkpoint_dir as it appears, looking every
  eval_interval_secs: what tf.train.checkpoints_iterator does, over checkpoints.newest, so
  that an empty or damaged index (which the trainer repairs at its next start) is not an error
  here. With config.chief, a chief that has not answered for chief_timeout_secs ends the wait
  in one line: a killed chief writes no more checkpoints, and the wait was for ever."""
  last, silent_since, waiting = None, None, False
  while True:
    path = checkpoints.newest(config.checkpoint_dir)
    if path is not None and path != last:
      last, waiting = path, False
      yield path
      continue
    if not waiting:  # once per wait: the evaluator is alive, and says what it waits for
      waiting = True
      logging.info("Waiting for a new checkpoint in %s (looking every %d s; Ctrl-C ends the "
                   "wait)", config.checkpoint_dir, config.eval_interval_secs)
    if config.chief:
      if _answers(config.chief):
        silent_since = None
      else:
        silent_since = silent_since or time.time()
        if time.time() - silent_since >= config.chief_timeout_secs:
          raise UsageError(f"the chief ({config.chief}) has not answered for "
                           f"{config.chief_timeout_secs} s (--peer_timeout_secs) and the "
                           f"checkpoint of step {config.last_step} has not come: the job "
                           "seems gone; the evaluator stops")
    try:
      time.sleep(config.eval_interval_secs)
    except KeyboardInterrupt:  # between checkpoints nothing is lost: an end, not an error
      logging.info("Ctrl-C: stopped waiting for checkpoints; every score is written")
      return


def evaluate_each(evaluate, config):
  """Returns the last evaluate(path) result, a (precision, global step) pair. Continuous
  evaluation ends once a checkpoint of config.last_step or later is scored (a managed
  cluster's evaluator task: the chief's final step), or at a Ctrl-C while it waits (exit
  status 0: nothing was interrupted), or never."""
  # The kernels its logits come from, as a training run names them (harness.control.driver).
  progress.log_machine(machine.describe())
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
  for path in _new_checkpoints(config):
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
