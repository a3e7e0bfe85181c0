"""What a run says: on stderr, where a reader that is gone never fails the run, and in
<train_dir>/log.txt, where the lines that matter outlive the screen.

A run's stderr can lose its reader while the run goes on: `... 2>&1 | tee log` whose tee ends
at the Ctrl-C that asks the run to stop, a closed terminal, a killed stderr filter
(tfbits.quiet). Python ignores SIGPIPE, so a write there raises BrokenPipeError: the
`stopped:` line after a stop's save turned exit 143 into 1, and the Ctrl-C handler's own line
ended the run where it was, without its save.

- `say(line)`: the lines a binary prints itself on a stop's path (the Ctrl-C line, `stopped:`,
  `error:`): on stderr, and appended to the open run logs. It never raises.
- `keep_stderr_writable()`: a binary's own process (harness.command_line.cli) makes sys.stderr
  drop what it cannot write, for every writer (absl's log lines, tracebacks, warnings), and
  points descriptor 2 at /dev/null at the first write refused: later writes (TensorFlow's
  native ones; Python's flush as it exits, whose failure makes the exit status 120) succeed.
- `writing(train_dir)`: the driver, on the chief, while it owns the folder: the log lines (as
  the screen shows them, with the date) and the said lines are appended to log.txt there,
  through tf.io.gfile (any filesystem). Inside `binary()`, which the cli holds around main,
  the log stays open to the binary's last line (`stopped:`, `error:`), said after the run,
  and takes the lines the binary logged before it opened (the device set-up's).
"""

import contextlib
import logging
import os
import sys
import termios
import time

from absl import logging as absl_logging

from harness.control import progress

LOG_FILE = "log.txt"
_FLUSH_SECS = 30  # object storage uploads the whole file at every flush: not at every line
_DATE = "%Y-%m-%d %H:%M:%S"  # a run's log holds all of its starts, days apart

_logs = []  # the run logs open in this process; say() appends to each
_binaries = []  # one list per binary() block running: the logs it closes at its end
_early = []  # one _Early per binary() block running: its lines from before a run log opened


def say(line, after_key=False):
  """Prints `line` on stderr and appends it to the open run logs; never raises. `after_key`:
  the line answers a key that the terminal has just echoed (Ctrl-C's `^C`), so it starts a
  line of its own there."""
  for log in list(_logs):
    log.append(line)
  # Tolerant here too where the process's own stderr is not (a test's, through cli.call).
  screen = sys.stderr if isinstance(sys.stderr, _Tolerant) else _Tolerant(sys.stderr)
  try:
    print(("\n" if after_key and _echoes_keys() else "") + line, file=screen, flush=True)
  except RuntimeError:  # "reentrant call": said from a signal handler amid a write of stderr
    pass


def _echoes_keys():
  """Whether this process's terminal echoes control keys (Ctrl-C as `^C`, ECHOCTL), which
  leave the cursor after them: under `2>&1 | tee` too, where stderr is a pipe to the screen."""
  try:
    fd = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY)
  except OSError:  # no terminal: a job of a scheduler, nohup, setsid
    return False
  try:
    return bool(termios.tcgetattr(fd)[3] & termios.ECHOCTL)
  except termios.error:
    return False
  finally:
    os.close(fd)


class _Tolerant:
  """A text stream (sys.stderr) whose write and flush never raise OSError: what its reader is
  no longer there to take is dropped."""

  def __init__(self, stream):
    self._stream = stream

  def write(self, text):
    try:
      return self._stream.write(text)
    except OSError as e:
      self._refused(e)
      return len(text)

  def flush(self):
    try:
      self._stream.flush()
    except OSError as e:
      self._refused(e)

  def __getattr__(self, name):  # fileno, isatty, encoding, buffer...
    return getattr(self._stream, name)

  def _refused(self, error):
    if isinstance(error, BlockingIOError):  # full for now, not gone: only this text is lost
      return
    try:
      fd = self._stream.fileno()
    except (OSError, ValueError):  # no descriptor under it (a test's StringIO)
      return
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, fd)  # every later write succeeds, native ones too
    os.close(null)
    with contextlib.suppress(OSError, ValueError):
      self._stream.flush()  # what it still holds goes there: nothing left to fail at exit


def keep_stderr_writable():
  """For the rest of this process (a binary's own), writes to sys.stderr never raise."""
  if isinstance(sys.stderr, _Tolerant):
    return
  sys.stderr = _Tolerant(sys.stderr)
  handler = absl_logging.get_absl_handler().python_handler
  if handler.stream is sys.stderr._stream:  # pylint: disable=protected-access
    handler.setStream(sys.stderr)  # absl's handler kept the stream it was made with


class _Dated(progress.ShortPrefix):
  """The screen's lines with the date before the time."""

  def formatTime(self, record, datefmt=None):
    return super().formatTime(record, _DATE)


class RunLog(logging.Handler):
  """Appends the lines of this process's log records, as the screen shows them, and the said
  lines to `path`. A log that cannot be written never fails the run: it stops, with a
  warning."""

  def __init__(self, path):
    super().__init__()
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    from harness.folders import run_folder  # pylint: disable=g-import-not-at-top
    self.path, self.ended, self.broken = path, False, False
    self.local, self.flushed = run_folder.is_local(path), 0.0
    self.setFormatter(_Dated())
    for f in absl_logging.get_absl_handler().filters:  # the screen's (tfbits.quiet's)
      self.addFilter(f)
    self.file = tf.io.gfile.GFile(path, "a")
    self.append(f"started: {' '.join(sys.argv)}")  # where each start of the run begins

  def emit(self, record):
    self._write(self.format(record), urgent=record.levelno >= logging.WARNING)

  def append(self, line):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    # After the run, a refused start's folder may be gone (harness.folders.ownership): a write
    # to object storage would make its log again.
    if self.ended and not tf.io.gfile.exists(self.path):
      return
    self._write(f"{time.strftime(_DATE)} {line}", urgent=True)

  def _write(self, text, urgent):
    with self.lock:  # also taken around emit; a line said from a signal handler comes whole
      if self.broken:
        return
      try:
        self.file.write(text + "\n")
        if urgent or self.local or time.time() - self.flushed > _FLUSH_SECS:
          self.file.flush()
          self.flushed = time.time()
      except Exception as e:  # pylint: disable=broad-except  # any filesystem's error
        self.broken = True
        absl_logging.warning("%s is not written from here on (%s); the run goes on",
                             self.path, str(e).splitlines()[0] if str(e) else type(e).__name__)

  def close(self):
    with self.lock, contextlib.suppress(Exception):
      if not self.broken:
        self.file.close()
    super().close()


class _Early(logging.Handler):
  """The log records of a binary before its run log opens: the device set-up's line (`No GPU
  in use: ...`), logged before TensorFlow starts and the run folder is owned. The binary's
  first run log writes them after its `started:` line, so that log.txt holds the screen's
  lines from the first; at most LIMIT (a binary that never opens one, an evaluator, logs on)."""

  LIMIT = 200

  def __init__(self):
    super().__init__()
    self.records = []

  def emit(self, record):
    if len(self.records) < self.LIMIT:
      self.records.append(record)

  def hand_to(self, log):
    """Writes the records kept to `log` (through its filters, as the screen's) and stops
    keeping any."""
    logging.getLogger().removeHandler(self)
    records, self.records = self.records, []
    for record in records:
      log.handle(record)


@contextlib.contextmanager
def writing(train_dir):
  """For the block (the run of the driver on the chief, in the folder it owns), this process's
  log lines and said lines are appended to train_dir/log.txt; inside binary() to its end,
  from the binary's first line."""
  log = RunLog(os.path.join(train_dir, LOG_FILE))
  if _early:
    _early[-1].hand_to(log)
  _logs.append(log)
  logging.getLogger().addHandler(log)
  try:
    yield
  finally:
    logging.getLogger().removeHandler(log)
    log.ended = True
    if _binaries:
      _binaries[-1].append(log)  # its last line comes after the run
    else:
      _close(log)


@contextlib.contextmanager
def binary():
  """Around a binary's main: the run logs opened inside stay open until the block ends, for
  the line the binary says after the run."""
  kept, early = [], _Early()
  _binaries.append(kept)
  _early.append(early)
  logging.getLogger().addHandler(early)
  try:
    yield
  finally:
    logging.getLogger().removeHandler(early)
    _early.remove(early)
    _binaries.remove(kept)
    for log in kept:
      _close(log)


def _close(log):
  _logs.remove(log)
  log.close()
