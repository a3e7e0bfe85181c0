"""SIGTERM as a request to stop at the next step boundary, for both trainers' loops.

Cluster managers (and strategies.launch / compat_v1.launch when the job is stopped) send
SIGTERM before they kill a task. Instead of dying mid-step, a trainer notes the request,
finishes the step, saves a checkpoint and exits with errors.STOPPED_EXIT_STATUS; launched
again, it resumes from that checkpoint with nothing lost.
"""

import contextlib
import signal
import threading


class StopRequest:
  """Truthy once SIGTERM has arrived."""

  def __init__(self):
    self.signalled = False

  def __bool__(self):
    return self.signalled


@contextlib.contextmanager
def stop_on_sigterm():
  """Yields a StopRequest; SIGTERM sets it instead of ending the process.

  The handler stays installed after the block, until the process exits: a loop leaves the
  block to save and exit with STOPPED_EXIT_STATUS, and a second SIGTERM then (schedulers
  repeat theirs) must not meet the default handler, which ends the process with 143.
  Python signal handlers can only be installed from the main thread; elsewhere (a loop run
  from a test thread) SIGTERM keeps its usual effect and the request never becomes true.
  """
  request = StopRequest()
  if threading.current_thread() is not threading.main_thread():
    yield request
    return

  def handler(signum, frame):  # pylint: disable=unused-argument
    request.signalled = True

  signal.signal(signal.SIGTERM, handler)
  yield request
