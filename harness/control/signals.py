"""SIGTERM and Ctrl-C as requests to stop at the next step boundary, for every trainer loop.

Cluster managers (and strategies.launch / compat_v1.launch when the job is stopped) send
SIGTERM before they kill a task; a user at a terminal presses Ctrl-C. Instead of dying
mid-step, a trainer notes the request, finishes the step, saves a checkpoint and exits with
one `stopped:` line: status --preemption_exit_code (143) after SIGTERM, 130 after Ctrl-C.
Launched again, it resumes from that checkpoint with nothing lost. A second Ctrl-C quits at
once (exit 130, `error: interrupted`), losing only the steps since the last checkpoint.

Python runs a signal handler only between bytecodes of the main thread, so not while that
thread is inside a compiled call of many steps (--steps_per_loop). `on_request` reaches such a
call: a thread woken by the signal itself (`signal.set_wakeup_fd`) calls it at once, and the
loop reads what it sets between two steps of the call.
"""

import contextlib
import os
import signal
import threading

from harness.control import run_log


class StopRequest:
  """Truthy once SIGTERM or SIGINT has arrived; `signal` names the first of them."""

  def __init__(self):
    self.signal = None

  def __bool__(self):
    return self.signal is not None


@contextlib.contextmanager
def stop_on_signals(on_request=None):
  """Yields a StopRequest; SIGTERM and the first SIGINT set it instead of ending the process,
  and call `on_request()` (if given) from another thread as soon as the signal arrives.

  The SIGTERM handler stays installed after the block, until the process exits: a loop
  leaves the block to save and exit with the preemption exit code, and a second SIGTERM then
  (schedulers repeat theirs) must not meet the default handler, which ends the process with
  143. SIGINT gets its previous handler back when the block ends without a request (Ctrl-C
  then interrupts as usual). Python signal handlers can only be installed from the main
  thread; elsewhere (a loop run from a test thread) signals keep their usual effect and the
  request never becomes true.
  """
  request = StopRequest()
  if threading.current_thread() is not threading.main_thread():
    yield request
    return

  def handler(signum, frame):  # pylint: disable=unused-argument
    if signum == signal.SIGINT and request:
      raise KeyboardInterrupt  # a second request, from a user: quit now
    if not request:
      request.signal = signal.Signals(signum).name
      # From the first request on, SIGTERM is ignored by the OS, not by a Python handler:
      # Python sets its handlers back to the default as it finalizes, and TensorFlow's
      # teardown after that took long enough for a repeated SIGTERM to end the process by
      # the signal (-15) instead of --preemption_exit_code. An ignored signal stays ignored.
      signal.signal(signal.SIGTERM, signal.SIG_IGN)
      if signum == signal.SIGINT:  # said, never raising: a stderr without reader drops it
        run_log.say("Ctrl-C: finishing this step and saving a checkpoint (Ctrl-C again to "
                    "quit at once)", after_key=True)

  previous_sigint = signal.signal(signal.SIGINT, handler)
  signal.signal(signal.SIGTERM, handler)
  wakeup = _Wakeup(on_request) if on_request else contextlib.nullcontext()
  try:
    with wakeup:
      yield request
  finally:
    if not request:
      signal.signal(signal.SIGINT, previous_sigint)


class _Wakeup:
  """While entered, the C-level handler of every signal writes its number to a pipe (the
  handler Python runs later is unchanged); a thread blocked on the pipe calls `callback`
  once, at the first SIGTERM or SIGINT, whatever the main thread is doing."""

  def __init__(self, callback):
    self.callback = callback

  def __enter__(self):
    self.read_end, self.write_end = os.pipe()
    os.set_blocking(self.write_end, False)  # set_wakeup_fd requires it
    self.previous = signal.set_wakeup_fd(self.write_end, warn_on_full_buffer=False)
    self.thread = threading.Thread(target=self._watch, name="stop-request", daemon=True)
    self.thread.start()
    return self

  def _watch(self):
    while True:
      try:
        data = os.read(self.read_end, 64)
      except OSError:
        return
      if not data:  # the write end closed: the block is over
        return
      if signal.SIGTERM in data or signal.SIGINT in data:
        self.callback()
        return

  def __exit__(self, *exc):
    signal.set_wakeup_fd(self.previous)
    os.close(self.write_end)
    self.thread.join(timeout=5)
    os.close(self.read_end)
