"""A process's thread pools as explicit settings: the counts that move a run's bits.

TensorFlow sizes its intra-op pool once per process, from the first device made:
`intra_op_parallelism_threads`, else TF_NUM_INTRAOP_THREADS, else the CPUs the process may be
scheduled on (local_device.cc, port::MaxParallelism(): the affinity mask, not the machine's
count); the inter-op pool likewise (TF_NUM_INTEROP_THREADS). Eigen's convolution gradients
split their sums by the intra-op count, so `taskset -c 0`, a container's or Slurm's CPU binding
trained on other bits than the same command on two CPUs (conv1's filter gradient 12,608 ULPs
apart after one step). So every binary resolves the counts once (`resolve`: 0 is TensorFlow's
own default, computed here as TensorFlow computes it) and sets them explicitly (`apply`)
before anything makes a device; a trainer records them and a resume sets the recorded ones,
whatever CPU set it lands on (fewer cores only slow it).
"""

import os

from tfbits.errors import OneLineError

ENVIRONMENT = {"intra_op": "TF_NUM_INTRAOP_THREADS", "inter_op": "TF_NUM_INTEROP_THREADS"}


def schedulable_cpus():
  """The CPUs this process may run on (its affinity mask), as TensorFlow counts them."""
  try:
    return len(os.sched_getaffinity(0))
  except (AttributeError, OSError):  # not Linux
    return os.cpu_count() or 1


def default(kind, environ=os.environ):
  """TensorFlow's own count for pool `kind` ("intra_op" or "inter_op") in this process."""
  value = environ.get(ENVIRONMENT[kind], "").strip()
  if value.isdigit() and int(value) > 0:
    return int(value)
  return schedulable_cpus()


def resolve(intra_op, inter_op, environ=os.environ):
  """(intra, inter): each count as given, or TensorFlow's default where it is 0."""
  return (intra_op or default("intra_op", environ), inter_op or default("inter_op", environ))


def current():
  """(intra, inter) as this process's TensorFlow holds them set (0: never set explicitly)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return (tf.config.threading.get_intra_op_parallelism_threads(),
          tf.config.threading.get_inter_op_parallelism_threads())


def effective():
  """(intra, inter) this process runs: the counts set, or TensorFlow's defaults for those
  never set."""
  return resolve(*current())


def apply(intra_op, inter_op):
  """Resolves and sets both counts for the process; returns them. A process whose pools are
  already fixed at other counts (an earlier run in a notebook, a test, `cli.call`) is refused
  in one line: its runs would silently train with the first run's pools."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  wanted = resolve(intra_op, inter_op)
  if current() == wanted:
    return wanted
  try:
    tf.config.threading.set_intra_op_parallelism_threads(wanted[0])
    tf.config.threading.set_inter_op_parallelism_threads(wanted[1])
  except RuntimeError:  # the runtime has started: its pools are what it started with
    if effective() == wanted:
      return wanted
    held = current()
    raise OneLineError(
        f"this process's TensorFlow already runs {_said(held)}, fixed when it started; a "
        f"run of intra-op {wanted[0]}, inter-op {wanted[1]} threads would silently train "
        "with those: run it in a process of its own, or give --intra_op_threads and "
        "--inter_op_threads as the process has them") from None
  return wanted


def hold():
  """The counts this process runs, set explicitly where nothing set them yet (a library's
  call, the porting kit's: it takes a process's own counts as they are, and never refuses
  them); () on a TensorFlow without tf.config.threading."""
  try:
    if current() == (0, 0):
      apply(0, 0)
    return effective()
  except (AttributeError, OneLineError):
    return ()


def _said(held):
  intra, inter = resolve(*held)
  return f"intra-op {intra}, inter-op {inter} threads"
