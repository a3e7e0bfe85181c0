"""What a training loop is to the run driver: a `Backend` (orbit's AbstractTrainer, for us).

The driver (harness.control.driver) decides every run-control question once: resume or --init_from,
how many steps a call runs, which steps log, summarise and save, the finiteness check before
a save, stops. A backend does what it is told, in its own terms (a tf.function under a
strategy, a Session over towers, a coordinator's schedule, Keras `fit`):

  resume(path, keep) / initialize(state)  restore; each returns the global step to start at
  start(step)                             its input from `step` on, its opening log line
  train(call) -> Steps                    the `Call`'s steps
  write_summaries(step, steps)            the summaries of the call's first step
  all_finite()                            whether weights and moving averages are finite
  save(step) -> path                      a checkpoint holding `step` (None: not this process)
  global_step()                           the step the state holds

and may override `max_steps_per_call` (more than 1: the driver hands it calls of up to that
many steps, ending where a line, summaries or a save are due), `stop_soon()` (called from
another thread the moment SIGTERM or Ctrl-C arrives: end a running call after the step in
hand), `drive(control, start)` (for a loop that owns its iteration, Keras `fit`: it calls the
driver's `control.before(step)` and `control.after(step, k, steps)` around each of its own
steps) and
`close()` (called on every exit). tests/test_driver.py drives the driver with a backend of
plain numbers.
"""

import abc
import dataclasses
from typing import Any, Optional


@dataclasses.dataclass(frozen=True)
class Call:
  """What the driver asks of one call of `Backend.train`."""
  step: int  # the call's first step, 0-based
  k: int  # steps to run: 1 unless the backend's max_steps_per_call is more
  record: bool  # the first step's summaries are due: return what write_summaries needs
  stop: bool  # this process was asked to stop: a collective backend tells its peers
  sync: bool  # results are due now (a line, summaries, a save, a stop, the last step): an
  # asynchronous backend may return before its steps finish otherwise


@dataclasses.dataclass
class Steps:
  """What a call returns. loss/lr/precision: the first step's (tensors or numbers, read only
  when a line is due; precision: the global batch's precision @ 1, None where a backend has
  none); last_loss/last_lr/last_precision: the last step's; record: what write_summaries
  needs."""
  loss: Any
  lr: Any
  last_loss: Any = None
  last_lr: Any = None
  record: Any = None
  precision: Any = None
  last_precision: Any = None
  # A job-wide answer to "stop?", where the backend agrees one with its peers (any worker's
  # request stops all of them at the same step); None: this process's own request.
  stop: Optional[bool] = None
  # The global step after the call, when it is not step + k (asynchronous workers).
  next_step: Optional[int] = None
  # Steps run, when a stop request ended a call of several before k.
  ran: Optional[int] = None


class Backend(abc.ABC):
  """A training loop under the driver (see the module docstring)."""

  max_steps_per_call = 1

  @abc.abstractmethod
  def resume(self, path, keep):
    """Restores checkpoint `path`; `keep`: the complete checkpoints, oldest first, that count
    against --max_checkpoints_to_keep. Returns the global step."""

  @abc.abstractmethod
  def initialize(self, state):
    """The seed's values, then checkpoints.State `state` (--init_from) if not None. Returns
    the global step."""

  @abc.abstractmethod
  def start(self, step):
    """Its input from `step` on."""

  def train(self, call):
    """Runs Call `call`; returns Steps. Every backend has it but one that overrides `drive`
    (its own loop calls the driver instead)."""
    raise NotImplementedError(f"{type(self).__name__} drives its own steps")

  @abc.abstractmethod
  def write_summaries(self, step, steps):
    """The summaries of step `step` from Steps `steps` (whose record was asked for)."""

  @abc.abstractmethod
  def all_finite(self):
    """Whether every weight and moving average is finite."""

  @abc.abstractmethod
  def save(self, step):
    """Saves a checkpoint of global step `step`; returns its path (None: another process
    writes it)."""

  @abc.abstractmethod
  def global_step(self):
    """The global step the state holds."""

  def stop_soon(self):
    """SIGTERM or Ctrl-C arrived (called from another thread): a backend that runs several
    steps per call ends the running one after the step in hand."""

  def drive(self, control, start):
    """Runs steps from `start` to the end: the driver's calls, one after another."""
    step = start
    while step < control.config.max_steps:
      step = control.call(step)

  def close(self):
    """Releases what the run held (writers, sessions); called on every exit."""
