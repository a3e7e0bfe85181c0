"""The exception the shared core raises for what a user must fix, shown as one line.

UsageError: bad flags, missing or corrupt data, impossible device requests (exit status 2,
no traceback: harness.command_line.cli). The errors of a run's control (a stop after saving, a
non-finite loss or state, a checkpoint that does not restore) are harness.control.run_errors'.
"""

from tfbits.errors import OneLineError

# The message of the loss check both training steps run (losses.check_finite); TensorFlow
# reports a failed check as an InvalidArgumentError carrying it; harness.control.run_errors finds
# it.
NON_FINITE_CHECK = "loss is not finite"


class UsageError(OneLineError):
  """Bad flags, missing or corrupt data, impossible device requests, NaN loss.

  The message is shown to the user as it is, on one line, with no traceback; it must name the
  problem and, where there is one, the way out.
  """
