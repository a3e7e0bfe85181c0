"""A measuring child that dies with its parent.

The benchmarks measure each kind in a process of its own (a fresh TensorFlow). A scheduler or
`timeout` that stops the parent signals the parent alone: a child started by plain
subprocess.run ran on, a core busy, until killed by hand. `run` starts the child with Linux's
parent-death signal (prctl PR_SET_PDEATHSIG: SIGKILL when the parent ends, by SIGTERM, SIGKILL
or anything else), and the child checks that its parent is still the one that started it (a
parent that died before the prctl). Elsewhere than Linux, the child runs as subprocess.run's.
"""

import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
import time

_PR_SET_PDEATHSIG = 1


def _die_with(parent):
  def arm():
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent was gone before the signal was armed
      os._exit(1)  # pylint: disable=protected-access
  return arm


def run(args, **kwargs):
  """subprocess.run(args, capture_output=True, text=True, check=False, **kwargs), the child
  ending with this process."""
  arm = _die_with(os.getpid()) if sys.platform.startswith("linux") else None
  return subprocess.run(args, capture_output=True, text=True, check=False, preexec_fn=arm,
                        **kwargs)


class Progress:
  """One line on standard error as each of `total` measurements ends: which, how long it
  took, and the time left at the mean so far (the table on standard output stays the
  results alone). Before, a run of several children printed nothing for minutes."""

  def __init__(self, total, clock=None):
    self.total, self.done, self.clock = total, 0, clock or time.monotonic
    self.start = self.clock()

  def ran(self, what, seconds):
    self.done += 1
    spent = self.clock() - self.start
    left = (self.total - self.done) * spent / self.done
    tail = f"; about {left:.0f} s left" if self.done < self.total else ""
    print(f"[{self.done}/{self.total}] {what}: {seconds:.0f} s{tail}", file=sys.stderr,
          flush=True)

  def measured(self, what, call):
    """`call()`'s result, with its line."""
    begun = self.clock()
    result = call()
    self.ran(what, self.clock() - begun)
    return result
