"""The progress lines of both trainers, and the evaluators' result lines.

`step N, loss = X (Y examples/sec; Z sec/batch; acc A; lr R; ETA h:mm:ss)`, after the time
of the binaries' log prefix (harness.command_line.cli: `HH:MM:SS `), so that a line fits in 100
columns: N is the 0-based index of the step just run (the global step before it), as the original
numbered it, and a line is printed for N = 0, log_frequency, 2 * log_frequency, ... and for the
last step. X is that step's loss, A the precision @ 1 of its global batch (Keras's
`accuracy`; the `precision` summary) and R its learning rate, said on a start's first line and
wherever it changed since the line before (the width: a rate on every line and a 6-digit step
pass 100 columns); examples/sec counts the global batch and sec/batch is one global step,
averaged since the previous line, as the original's were. The first line of a
start (re)traces the step: it says how long that took instead of a rate, so no rate a person
reads includes tracing. The ETA, the steps left to --max_steps at the rate since the first
line (a steady rate: one slow stretch moves it little), is left out of the first line and of
the last. What parsed the original's lines (`step N, loss = X (Y examples/sec; Z
sec/batch`) still parses every line but the first.
"""

import datetime
import logging as std_logging
import time

from absl import logging

from harness.control import cadence


WIDTH = 100  # columns of a log line, its `HH:MM:SS ` prefix included (docs/training.md)
PREFIX = len("00:00:00 ")


def log_machine(described):
  """The start's `Machine: ...` line (tfbits.machine's, without the instruction sets),
  broken at its commas into indented lines where a long CPU name or GPU list would pass
  WIDTH."""
  lines, line = [], "Machine: "
  for part in described.parts(isa=False):
    piece = part if line.endswith(": ") else ", " + part
    if PREFIX + len(line) + len(piece) > WIDTH and not line.endswith(": "):
      lines.append(line + ",")
      line, piece = "  ", part
    line += piece
  for text in lines + [line]:
    logging.info("%s", text)


class StepLogger:
  """Call `after_step(step, loss_fn)` once per step; loss_fn is only called on log steps."""

  def __init__(self, start_step, max_steps, global_batch_size, log_frequency):
    self.max_steps = max_steps
    self.global_batch_size, self.log_frequency = global_batch_size, log_frequency
    self.tick, self.last = time.time(), start_step - 1  # time and index of the last line
    self.lr = None  # the learning rate the last line said
    self.steady = None  # (time, step) of the first line: the ETA's rate is measured from it
    # (examples/sec, steps/sec) of the last line, None for the first (it times tracing).
    self.rates = None

  def after_step(self, step, loss_fn, lr_fn=None, precision_fn=None):
    """Logs for 0-based `step` when due, with the batch precision and the learning rate of that
    step where `precision_fn` and `lr_fn` give them; returns the loss value if it was
    fetched."""
    last_step = step + 1 == self.max_steps
    # Asynchronous workers see the global step jump: a line is due when `step` enters a new
    # block of log_frequency steps, which in a synchronous run is exactly at the multiples.
    if step <= self.last or not (cadence.due(self.log_frequency, step, self.last)
                                 or last_step):
      return None
    loss = float(loss_fn())  # waits for the device, so the time below is honest
    now = time.time()
    elapsed, steps = now - self.tick, step - self.last
    # Inside the parentheses, after the original's fields: what parsed its lines still does.
    rate = f"; acc {float(precision_fn()):.2f}" if precision_fn is not None else ""
    lr = lr_fn() if lr_fn is not None else None
    lr = None if lr is None else float(lr)  # a backend without one (Keras fit) gives None
    if lr is not None and (self.steady is None or lr != self.lr):
      rate += f"; lr {lr:.3g}"
    self.lr = lr
    if self.steady is None:
      logging.info("step %d, loss = %.2f (first step: %.1f s, tracing included%s)", step, loss,
                   elapsed, rate)
      self.steady, self.rates = (now, step), None
    else:
      left = self.max_steps - step - 1
      since, at = self.steady
      eta = "; ETA " + eta_text(left * (now - since) / (step - at)) if left else ""
      logging.info("step %d, loss = %.2f (%.1f examples/sec; %.3f sec/batch%s%s)", step, loss,
                   steps * self.global_batch_size / elapsed, elapsed / steps, rate, eta)
      self.rates = (steps * self.global_batch_size / elapsed, steps / elapsed)
    self.tick, self.last = time.time(), step
    return loss


def device_list(names):
  """Device names for a line: runs of one kind's consecutive indices as a range
  (`GPU:0-7`, `CPU:0-1`), so that 8 GPUs fit a line as 2 CPUs do."""
  runs = []  # [kind, first, last]
  for name in names:
    kind, _, index = name.rpartition(":")
    if index.isdigit() and runs and runs[-1][0] == kind and runs[-1][2] + 1 == int(index):
      runs[-1][2] = int(index)
    elif index.isdigit():
      runs.append([kind, int(index), int(index)])
    else:
      runs.append([name, None, None])
  return ", ".join(kind if first is None else f"{kind}:{first}" if first == last else
                   f"{kind}:{first}-{last}" for kind, first, last in runs)


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


class ShortPrefix(std_logging.Formatter):
  """`HH:MM:SS message`, with absl's letter first for warnings and errors (`W`, `E`): absl's
  own prefix (`I1125 18:46:03.133764 140500600138624 progress.py:45] `, 55 characters) made
  every progress line wrap twice at 80 columns."""

  def format(self, record):
    line = f"{self.formatTime(record, '%H:%M:%S')} {record.getMessage()}"
    if record.levelno >= std_logging.WARNING:
      line = f"{record.levelname[0]} {line}"
    if record.exc_info:
      line += "\n" + self.formatException(record.exc_info)
    return line


def use_short_prefix():
  """The binaries' log lines, on standard error, with ShortPrefix (harness.command_line.cli)."""
  logging.get_absl_handler().setFormatter(ShortPrefix())
