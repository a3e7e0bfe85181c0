"""The errors of a run's control, each one line and a meaningful exit status (harness.command_line.cli).

Stopped: the run was asked to stop (SIGTERM, a preemption notice, Ctrl-C) and saved a
checkpoint first; the same command continues it. Its exit status is --preemption_exit_code,
by default cifar10.config.PREEMPTED_EXIT_STATUS: 143, what a process killed by SIGTERM reports
(128 + 15). Restart policies read that range as "retry": Kubeflow's TFJob `restartPolicy:
ExitCode` restarts a pod on 128-255 and gives up on 1-127, so the 42 of TensorFlow's
PreemptionCheckpointHandler would end a preempted job for good there. NonFiniteLoss and
NonFiniteState: a step went NaN or Inf, and nothing of it was saved (exit 2). Pure Python:
the entry points import this before TensorFlow.
"""

import contextlib

from cifar10.config import PREEMPTED_EXIT_STATUS
from cifar10.errors import NON_FINITE_CHECK
from cifar10.errors import UsageError


class NonFiniteLoss(UsageError):
  """The loss of a step was NaN or Inf; the check runs before any update of that step."""

  def __init__(self, step, last_checkpoint):
    super().__init__(f"loss is NaN or Inf at step {step}; nothing of this step was applied or "
                     f"saved (last checkpoint: {last_checkpoint}). Lower --learning_rate or "
                     "check the data")
    self.step = step


class NonFiniteState(UsageError):
  """A step's update left a weight or moving average NaN or Inf (its loss was finite); the
  trainers check before every save, so such a state never reaches a checkpoint."""

  def __init__(self, step, last_checkpoint):
    super().__init__(f"weights or moving averages are NaN or Inf after step {step}; not saved "
                     f"(last checkpoint: {last_checkpoint}). Lower --learning_rate or check "
                     "the data")
    self.step = step


# TensorFlow's words when a histogram summary meets a non-finite weight (the v1 summary op).
_NON_FINITE_HISTOGRAM = ("Infinity in Histogram", "Nan in Histogram",
                         "Infinity in summary histogram", "Nan in summary histogram")


@contextlib.contextmanager
def loss_checked(failed_step, last_checkpoint):
  """Around a training step: TensorFlow's failed loss check (an InvalidArgumentError carrying
  NON_FINITE_CHECK, matched by class name: this module does not import TensorFlow) becomes
  NonFiniteLoss, and a summary histogram of a non-finite weight NonFiniteState;
  failed_step() is the step that failed, last_checkpoint() the newest checkpoint (both only
  called on a failure)."""
  try:
    yield
  except Exception as e:  # pylint: disable=broad-except
    if type(e).__name__ != "InvalidArgumentError":
      raise
    at = failed_step()
    if NON_FINITE_CHECK in str(e):
      raise NonFiniteLoss(at, last_checkpoint()) from None
    if any(words in str(e) for words in _NON_FINITE_HISTOGRAM):
      raise NonFiniteState(at, last_checkpoint()) from None
    raise


def cannot_resume(path, error):
  """The error both trainers raise when the newest checkpoint of --train_dir does not restore
  (damaged, or written by the other trainer or by the original tutorial)."""
  return UsageError(f"cannot restore {path}: {str(error).splitlines()[0][:200]}; if another "
                    "trainer or the original tutorial wrote it, continue it in a new "
                    f"--train_dir with --init_from={path}; otherwise move it away to start "
                    "afresh")


class Stopped(Exception):
  """The run stopped on request after saving a checkpoint; the message says where. `status`:
  the exit status (the run's preemption_exit_code after SIGTERM, 130 after Ctrl-C)."""

  def __init__(self, message, status=PREEMPTED_EXIT_STATUS):
    super().__init__(message)
    self.status = status


def stopped(step, path, by="SIGTERM", status=PREEMPTED_EXIT_STATUS):
  """Stopped after signal `by` ("SIGTERM", "SIGINT" or None), with the checkpoint of `step`
  at `path`; `status`: the exit status unless by Ctrl-C (130)."""
  # by None: a worker stopped with its peers, whose request it learned in the all-reduce.
  what = {"SIGINT": "Ctrl-C", None: "a peer's stop request"}.get(by, by)
  return Stopped(f"{what} after step {step}; saved {path}; run the same command again to "
                 "continue", 130 if by == "SIGINT" else status)
