"""The run driver: every training loop's control, decided once (orbit's Controller, for us).

  backend = strategies.loop.Backend(config, strategy)      # or any loop's backend
  harness.control.driver.train(config, backend, replicas=n,
  global_batch=config.global_batch_size(n))

A training loop is a backend: it restores, runs k steps, writes a step's summaries, checks
its state for finiteness and saves. The driver owns the rest, for all five loops (TF2
mirrored/MWMS, TF2 parameter server, v1 towers, v1 ps/worker, the Keras path):

- the run folder: the lock and the run record (harness.folders.ownership), the newest complete
  checkpoint (harness.folders.recovery.recover), resume from it or else start from --init_from;
- "already at --max_steps";
- the schedule (harness.control.cadence): how many steps a call runs, which steps log, summarise,
  save and profile; the finiteness check before every save;
- SIGTERM and Ctrl-C (harness.control.signals), the `stopped:` and `Done:` lines, exit statuses;
- the chief's lines kept in <train_dir>/log.txt (harness.control.run_log).

Each loop is a subclass of harness.control.backend.Backend (what it must do and may override: its
docstring), handed to `train` with the run's config. Only a chief (`chief=True`) owns the
folder, summarises (and writes the progress lines' rates as `examples_per_second` and
`steps_per_second`) and repairs the index; every process saves when a save is due (MWMS saves
collectively), the backend decides where.
"""

import contextlib
from typing import Callable, Optional

from absl import logging

from cifar10 import checkpoints
from cifar10 import data_sources
from harness.control import cadence
from harness.folders import ownership
from harness.control import profiling
from harness.control import progress
from harness.control import run_errors
from harness.control import run_log
from harness.folders import recovery
from harness.folders import run_folder
from harness.folders import run_record
from harness.control import run_summaries
from harness.control import signals
# The loops subclass Backend here.
from harness.control.backend import Backend  # pylint: disable=unused-import
from harness.control.backend import Call
from harness.control.backend import Steps  # pylint: disable=unused-import
from tfbits import machine


def last_checkpoint(config):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.train.latest_checkpoint(config.train_dir)


def check_inputs(config):
  """UsageError if what a new run reads is not there: the training data, and --init_from
  where train_dir has no checkpoint of its own (then it is ignored). Before the run folder is
  owned: a start that fails on its input writes nothing (no lock, record or flags.txt that
  the corrected command would then meet)."""
  data_sources.check_available(config.dataset, "train", data_dir=config.data_dir,
                               download=config.download)
  if config.init_from and not recovery.has_checkpoint(config.train_dir):
    checkpoints.keys(checkpoints.resolve(config.init_from))


def train(config, backend, *, replicas, global_batch, chief=True,
          on_step: Optional[Callable] = None):
  """Trains `backend` to config.max_steps; returns the final global step.

  replicas: what the run record keeps (replicas of a synchronous job, workers x towers of an
  asynchronous one); global_batch: the examples one global step consumes (for the progress
  line). on_step(step, loss, lr) after each step (with k > 1 after a call's first and last).
  Raises UsageError (one line), run_errors.NonFiniteLoss / NonFiniteState (nothing non-finite
  saved) and run_errors.Stopped after saving on SIGTERM or Ctrl-C.
  """
  if chief:
    check_inputs(config)
  owner = ownership.own_train_dir(config, replicas) if chief else contextlib.nullcontext()
  # The chief's lines, in the folder it owns: what a screen lost (`| tee` ended by Ctrl-C).
  log = run_log.writing(config.train_dir) if chief else contextlib.nullcontext()
  control = Control(config, backend, global_batch, chief, on_step)
  try:
    with owner, log:
      start = control.begin()
      if start >= config.max_steps:
        logging.info("Step %d already reached --max_steps=%d; nothing to do", start,
                     config.max_steps)
        return start
      with signals.stop_on_signals(backend.stop_soon) as control.stop_requested, control.profile:
        backend.drive(control, start)
      return control.finish()
  finally:
    control.close()
    backend.close()


def trainer_name(backend):
  """The command whose loop `backend` is, as a user typed it: `strategies.train`,
  `compat_v1.train`, `examples.keras_fit` (the HParams tab's column that tells them apart)."""
  module = type(backend).__module__
  return {"strategies.loop": "strategies.train", "strategies.cluster_loop": "strategies.train",
          "compat_v1.loop": "compat_v1.train", "compat_v1.cluster_loop": "compat_v1.train",
          "examples.keras_loop": "examples.keras_fit"}.get(module, module)


class Control:
  """One job's control between its first and last step. `call(step)` runs the call that
  starts at `step` through the backend; a backend that owns its iteration (`drive`) calls
  `before(step)` and `after(step, k, steps)` around each of its own steps instead."""

  def __init__(self, config, backend, global_batch, chief, on_step):
    self.config, self.backend, self.chief = config, backend, chief
    self.global_batch, self.on_step = global_batch, on_step
    self.profile = profiling.Window(config.train_dir, config.profile_steps if chief else None)
    self.stop_requested = signals.StopRequest()
    self.logger, self.last_step = None, -1
    self.summaries = run_summaries.Writer(config.train_dir)  # the driver's own: every loop's

  def begin(self):
    """Resume from train_dir's newest complete checkpoint, else --init_from, else the seed;
    then the backend's start. Returns the global step to start at."""
    config, backend = self.config, self.backend
    # The kernels this process's bits come from (docs/determinism.md: the contract holds on
    # one kind of machine with the same settings).
    # Without the CPU's instruction sets (a hundred columns of flags): run_config.json has them.
    progress.log_machine(machine.describe())
    resume_from, keep = recovery.recover(config.train_dir, repair=self.chief,
                                           max_to_keep=config.max_checkpoints_to_keep)
    if resume_from:
      start = backend.resume(resume_from, keep)
      logging.info("Resumed from %s at step %d", resume_from, start)
    elif config.init_from:
      start = backend.initialize(checkpoints.read(config.init_from))
      logging.info("Initialized from %s at step %d", config.init_from, start)
    else:
      start = backend.initialize(None)
    self.last_step = start - 1  # the last step run
    if self.chief and config.profile_steps and config.profile_steps[1] < start:
      logging.warning("--profile_steps=%d,%d lie before step %d, where this run resumes: "
                      "nothing is profiled", *config.profile_steps, start)
    if start < config.max_steps:
      backend.start(start)
      if self.chief:  # after start: a v1 Session makes its devices before the eager runtime
        self.summaries.settings(start, run_record.read(config.train_dir), config.flagfile,
                                trainer=trainer_name(backend))
      self.logger = progress.StepLogger(start, config.max_steps, self.global_batch,
                                        config.log_frequency)
    return start

  def summarises(self, step):
    """Whether the step from `step` writes summaries (on the chief): it starts a block of
    save_summaries_steps steps (asynchronous workers may jump over the block's first)."""
    return self.chief and cadence.summarises(step, self.config, self.last_step)

  def call(self, step):
    """Runs the call of k steps that starts at 0-based `step`; returns the step after it."""
    config = self.config
    k = cadence.call_length(step, config, self.backend.max_steps_per_call)
    last = step + k - 1
    # A multiple of log_frequency can only be the call's first or last step (call_length).
    logs = cadence.due(config.log_frequency, last, step - 1) or last + 1 == config.max_steps
    saves = cadence.due(config.save_checkpoint_steps, step + k, step)
    summarise = self.summarises(step)  # then k is 1
    stop = bool(self.stop_requested)
    self.before(step)
    # With k > 1 the failing step is the first not applied: the global step after the call.
    failed_step = (lambda: step) if k == 1 else self.backend.global_step
    with run_errors.loss_checked(failed_step, lambda: last_checkpoint(config)):
      out = self.backend.train(Call(step, k, record=summarise, stop=stop,
                                  sync=summarise or logs or saves or stop or last + 1 ==
                                  config.max_steps))
    return self.after(step, k, out)

  def before(self, step):
    self.profile.before(step)

  def after(self, step, k, out):
    """Everything due after the call of `k` steps from `step` that returned Steps `out`:
    summaries, log lines, the finiteness check and the save, the profile, the stop. Returns
    the global step after the call; raises run_errors.Stopped after saving on a stop request."""
    config, backend = self.config, self.backend
    k = out.ran or k
    next_step = out.next_step if out.next_step is not None else step + k
    if self.summarises(step):
      backend.write_summaries(step, out)
    # `step`, unless workers moved it.
    self._log(next_step - k, lambda: out.loss, lambda: out.lr, out.precision)
    if k > 1:
      self._log(next_step - 1, lambda: out.last_loss, lambda: out.last_lr, out.last_precision)
    # A backend that agrees a stop with its peers answers for the job: every process sees the
    # same `stop` at the same step, so all of them take part in a collective save.
    stop = bool(self.stop_requested) if out.stop is None else out.stop
    stopping = stop and next_step < config.max_steps
    if cadence.due(config.save_checkpoint_steps, next_step, step) or next_step >= config.max_steps \
        or stopping:
      if not backend.all_finite():
        raise run_errors.NonFiniteState(next_step - 1, last_checkpoint(config))
      if self.chief:  # TensorFlow writes a checkpoint's files through any link at their names
        run_folder.unlink_links(config.train_dir)
      path = backend.save(next_step)
      if self.chief:
        logging.info("Saved %s", path)
    self.profile.after(next_step - 1)
    self.last_step = next_step - 1
    if self.on_step:
      self.on_step(step, out.loss, out.lr)
      if k > 1:
        self.on_step(next_step - 1, out.last_loss, out.last_lr)
    if stopping:
      # The step saved: asynchronous workers may have moved the shared step past `next_step`.
      raise run_errors.stopped(backend.global_step(), path or last_checkpoint(config),
                               self.stop_requested.signal, config.preemption_exit_code)
    return next_step

  def _log(self, step, loss_fn, lr_fn, precision):
    """The progress line when due; on the chief, its rates as TensorBoard scalars too."""
    precision_fn = None if precision is None else lambda: precision
    if self.logger.after_step(step, loss_fn, lr_fn, precision_fn) is None or not self.chief:
      return
    if self.logger.rates:
      self.summaries.rates(step, self.logger.rates)

  def close(self):
    self.summaries.close()

  def finish(self):
    final = self.backend.global_step()
    saved = last_checkpoint(self.config)
    # A worker that is not the chief saves nothing: "checkpoint None" was a Python None in a
    # user's line.
    if saved:
      logging.info("Done: step %d, checkpoint %s", final, saved)
    else:
      logging.info("Done: step %d (the chief saves the checkpoints)", final)
    return final
