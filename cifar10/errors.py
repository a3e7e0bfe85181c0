"""The exceptions entry points turn into one line and a non-zero exit (no traceback).

UsageError: something is wrong (exit status 2). Stopped: the run was asked to stop (SIGTERM,
a preemption notice) and saved a checkpoint first; the same command continues it (exit status
STOPPED_EXIT_STATUS, 42, TensorFlow's own restart code for PreemptionCheckpointHandler, so a
cluster manager can tell "restart me" from a failure).
"""

import re

STOPPED_EXIT_STATUS = 42

# TensorFlow's words for "this op cannot go where it was asked" (eager, tf.function, Session).
_PLACEMENT = (r"Could not satisfy device specification '(?P<device>[^']+)'",
              r"Unable to find any devices for spec (?P<device>\S+)",
              r"Cannot assign a device for operation (?P<op>[^:]+):.*?explicitly assigned to "
              r"(?P<device>\S+)")


class UsageError(Exception):
  """Bad flags, missing or corrupt data, impossible device requests, NaN loss.

  The message is shown to the user as it is, on one line, with no traceback; it must name the
  problem and, where there is one, the way out.
  """


def nan_loss(step, last_checkpoint):
  """The error both trainers raise when the loss of `step` is NaN or Inf."""
  return UsageError(f"loss is NaN or Inf at step {step}; nothing of this step was applied or "
                    f"saved (last checkpoint: {last_checkpoint}). Lower --learning_rate or "
                    "check the data")


def cannot_resume(path, error):
  """The error both trainers raise when the newest checkpoint of --train_dir does not restore
  (damaged, or written by the other trainer or by the original tutorial)."""
  return UsageError(f"cannot restore {path}: {str(error).splitlines()[0][:200]}; if another "
                    "trainer or the original tutorial wrote it, continue it in a new "
                    f"--train_dir with --init_from={path}; otherwise move it away to start "
                    "afresh")


class Stopped(Exception):
  """The run stopped on request after saving a checkpoint; the message says where."""


def stopped(step, path):
  return Stopped(f"SIGTERM after step {step}; saved {path}; run the same command again to "
                 "continue")


def placement(message):
  """The UsageError for TensorFlow's placement failure `message`, or None if it is not one.

  With soft placement off, an op pinned to a device that does not exist (a GPU on a machine
  without one) or that has no kernel for it (the TF1 guides' int32 variable on a GPU) fails
  with a long graph dump; this says what happened and what to do in one line.
  """
  for pattern in _PLACEMENT:
    match = re.search(pattern, message, re.DOTALL)
    if match:
      op = match.groupdict().get("op")
      what = f"op {op}" if op else "an op"
      return UsageError(f"{what} cannot run on {match['device']}: no such device here, or no "
                        "kernel for it there, and --allow_soft_placement is off; turn it on to "
                        "let TensorFlow fall back to another device (the CPU)")
  return None
