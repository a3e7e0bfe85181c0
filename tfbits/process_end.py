"""How a binary's process ends once its last line is out: at once, with its status.

When `main` returns or fails, everything a run writes is closed already: the driver closes
its summary writers, its checkpoint files and `log.txt`, and the exporters and the kit close
what they write. What Python would still do is finalize the interpreter: free TensorFlow's and
Keras' modules object by object and run TensorFlow's C++ destructors, with the last line on
the screen and no prompt. Measured on a 2-core AVX2 box (`strategies.train`, 30 steps):
1.0 s from the atexit handlers to the end of the process on a quiet box, 1.4 s with two busy
processes beside it; the more the load, the longer the wait.

So a binary waits for its own threads (as Python does), runs the atexit handlers (the stderr
filter's end, absl's, TensorFlow's), flushes stdout and stderr, and ends with os._exit: no
finalization. Only for `python -m` binaries (harness.command_line.cli's and the porting kit's
command line): `cli.call` runs a binary inside a process that goes on.
"""

import atexit
import os
import sys
import threading


def end_process(status):
  """Ends this process with `status` after its threads and atexit handlers, skipping the
  interpreter's finalization. Never returns."""
  try:
    for thread in threading.enumerate():
      if thread is not threading.main_thread() and not thread.daemon:
        thread.join()  # as Python's own exit waits for them
  except KeyboardInterrupt:  # a thread that never ends, and a user who will not wait
    pass
  atexit._run_exitfuncs()  # pylint: disable=protected-access  # the handlers Python would run
  for stream in (sys.stdout, sys.stderr):
    try:
      stream.flush()
    except (OSError, ValueError):  # a reader gone, a stream closed: nothing left to say there
      pass
  os._exit(status)  # pylint: disable=protected-access


def write_out(text):
  """Writes `text` to stdout; False where its reader is gone (`--help | head -3`, a report
  into `| head`), and from then on stdout goes nowhere: output nobody reads is no failure, and
  the command ends with its own status (a verdict stays a verdict). Python ignores SIGPIPE, so
  the write raised BrokenPipeError: a traceback, or the kit's "the kit failed" line."""
  try:
    sys.stdout.write(text)
    sys.stdout.flush()
    return True
  except BrokenPipeError:
    # What is still buffered, and the flush at exit, would raise again.
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return False
