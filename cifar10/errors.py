"""The one exception type that entry points turn into a one-line error and a non-zero exit."""


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
