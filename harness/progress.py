"""The original's progress lines, printed the same way by both trainers and both evaluators.

`<time>: step N, loss = X (Y examples/sec; Z sec/batch; S steps/sec; ETA h:mm:ss)`, numbered
as the original numbered them: N is the 0-based index of the step just run (the global step
before it), and a line is printed for N = 0, log_frequency, 2 * log_frequency, ... and for the
last step. X is that step's loss; examples/sec counts the global batch, sec/batch and
steps/sec are one global step, averaged since the previous line (the first line, like the
original's, times the first step alone, graph building and tracing included). The original's
part comes first, so what parsed its lines still does; the ETA, the steps left to
--max_steps at the rate since the previous line, is left out of the first line (its rate is
the tracing's) and of the last.
"""

import datetime
import time

from absl import logging

from harness import cadence


class StepLogger:
  """Call `after_step(step, loss_fn)` once per step; loss_fn is only called on log steps."""

  def __init__(self, start_step, max_steps, global_batch_size, log_frequency):
    self.max_steps = max_steps
    self.global_batch_size, self.log_frequency = global_batch_size, log_frequency
    self.tick, self.last = time.time(), start_step - 1  # time and index of the last line
    self.first = True
    # (examples/sec, steps/sec) of the last line, None for the first (it times tracing).
    self.rates = None

  def after_step(self, step, loss_fn):
    """Logs for 0-based `step` when due; returns the loss value if it was fetched."""
    last_step = step + 1 == self.max_steps
    # Asynchronous workers see the global step jump: a line is due when `step` enters a new
    # block of log_frequency steps, which in a synchronous run is exactly at the multiples.
    if step <= self.last or not (cadence.due(self.log_frequency, step, self.last)
                                 or last_step):
      return None
    loss = float(loss_fn())  # waits for the device, so the time below is honest
    elapsed, steps = time.time() - self.tick, step - self.last
    left = self.max_steps - step - 1
    eta = "" if self.first or not left else "; ETA %s" % eta_text(left * elapsed / steps)
    logging.info("%s: step %d, loss = %.2f (%.1f examples/sec; %.3f sec/batch; %.2f "
                 "steps/sec%s)", datetime.datetime.now(), step, loss,
                 steps * self.global_batch_size / elapsed, elapsed / steps, steps / elapsed,
                 eta)
    self.rates = None if self.first else (steps * self.global_batch_size / elapsed,
                                          steps / elapsed)
    self.tick, self.last, self.first = time.time(), step, False
    return loss


def eta_text(seconds):
  """h:mm:ss of a duration, days spelled out past 24 hours (a 1M-step run takes days; a
  --max_steps near 2**62 takes more days than datetime can count)."""
  days, rest = divmod(int(round(seconds)), 86400)
  clock = str(datetime.timedelta(seconds=rest))
  return f"{days} day{'s' if days != 1 else ''}, {clock}" if days else clock


def print_scores(precision, loss, examples, step, path):
  """The evaluators' result, on standard output (their logs go to standard error, so
  `... > scores.txt` or `| grep precision` gets exactly these lines):
  `step S: precision @ 1 = P, loss = L (N examples, <checkpoint>)`."""
  print(f"step {step}: precision @ 1 = {precision:.3f}, loss = {loss:.3f} "
        f"({examples} examples, {path})", flush=True)
