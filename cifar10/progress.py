"""The original's progress lines, printed the same way by both trainers and both evaluators.

`<time>: step N, loss = X (Y examples/sec; Z sec/batch)` every log_frequency steps, where
examples/sec counts the global batch and sec/batch is one global step, averaged since the
previous line. The first step (tracing, graph optimisation) is kept out of the averages.
"""

import datetime
import time

from absl import logging


class StepLogger:
  """Call `after_step(step, loss_fn)` once per step; loss_fn is only called on log steps."""

  def __init__(self, start_step, max_steps, global_batch_size, log_frequency):
    self.start, self.max_steps = start_step, max_steps
    self.global_batch_size, self.log_frequency = global_batch_size, log_frequency
    self.tick, self.tick_step = time.time(), start_step

  def after_step(self, step, loss_fn):
    """Logs for 0-based `step` when due; returns the loss value if it was fetched."""
    done = step + 1
    if step <= self.start:
      self.tick, self.tick_step = time.time(), done
      return None
    # Under asynchronous workers the global step jumps; a line needs a new multiple.
    if done <= self.tick_step or (done % self.log_frequency and done != self.max_steps):
      return None
    loss = float(loss_fn())  # waits for the device, so the time below is honest
    elapsed, steps = time.time() - self.tick, done - self.tick_step
    logging.info("%s: step %d, loss = %.2f (%.1f examples/sec; %.3f sec/batch)",
                 datetime.datetime.now(), step, loss,
                 steps * self.global_batch_size / elapsed, elapsed / steps)
    self.tick, self.tick_step = time.time(), done
    return loss


def log_precision(correct, count, step, path):
  """The evaluators' line, `<time>: precision @ 1 = X (N examples, step S, checkpoint)`, for
  `correct` of `count` examples scored; returns the precision."""
  precision = correct / count
  logging.info("%s: precision @ 1 = %.3f (%d examples, step %d, %s)", datetime.datetime.now(),
               precision, count, step, path)
  return precision
