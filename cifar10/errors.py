"""The exceptions entry points turn into one line and a non-zero exit (no traceback).

UsageError: something is wrong (exit status 2). Stopped: the run was asked to stop (SIGTERM,
a preemption notice) and saved a checkpoint first; the same command continues it (exit status
STOPPED_EXIT_STATUS, 42, TensorFlow's own restart code for PreemptionCheckpointHandler, so a
cluster manager can tell "restart me" from a failure).
"""

STOPPED_EXIT_STATUS = 42


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


class Stopped(Exception):
  """The run stopped on request after saving a checkpoint; the message says where."""


def stopped(step, path):
  return Stopped(f"SIGTERM after step {step}; saved {path}; run the same command again to "
                 "continue")
