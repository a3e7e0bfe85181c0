"""SIGTERM and Ctrl-C as requests to stop at the next step boundary, for every trainer loop.

Cluster managers (and strategies.launch / compat_v1.launch when the job is stopped) send
SIGTERM before they kill a task; a user at a terminal presses Ctrl-C. Instead of dying
mid-step, a trainer notes the request, finishes the step, saves a checkpoint and exits with
one `stopped:` line: status --preemption_exit_code (143) after SIGTERM, 130 after Ctrl-C.
Launched again, it resumes from that checkpoint with nothing lost. A second Ctrl-C quits at
once (exit 130, `error: interrupted`), losing only the steps since the last checkpoint.
"""

import contextlib
import signal
import sys
import threading


class StopRequest:
  """Truthy once SIGTERM or SIGINT has arrived; `signal` names the first of them."""

  def __init__(self):
    self.signal = None

  def __bool__(self):
    return self.signal is not None


@contextlib.contextmanager
def stop_on_signals():
  """Yields a StopRequest; SIGTERM and the first SIGINT set it instead of ending the process.

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
      if signum == signal.SIGINT:
        print("Ctrl-C: finishing this step and saving a checkpoint (Ctrl-C again to quit at "
              "once)", file=sys.stderr, flush=True)

  previous_sigint = signal.signal(signal.SIGINT, handler)
  signal.signal(signal.SIGTERM, handler)
  try:
    yield request
  finally:
    if not request:
      signal.signal(signal.SIGINT, previous_sigint)
