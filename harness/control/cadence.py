"""When a thing counted in steps is due: the one rule behind every schedule of a run.

A thing done "every N steps" (a log line, summaries, a checkpoint) is due at a step whose
count of N-step blocks differs from the last step's: `due(every, step, last)`. In a
synchronous run `last` is step - 1, and that is "step is a multiple of N"; asynchronous
workers move the global step by more than one, and a block entered counts. `call_length` is
how far a call of several steps may go before something is due.
"""


def due(every, step, last=None):
  """Whether a multiple of `every` lies in (last, step]; `last` defaults to step - 1."""
  return step // every > (step - 1 if last is None else last) // every


def steps_to_next(every, step):
  """Steps from `step` to the next multiple of `every` after it (every, at a multiple)."""
  return every - step % every


def summarises(step, config, last=None):
  """Whether 0-based `step` writes summaries: every save_summaries_steps steps (a block
  entered since step `last`, for asynchronous workers), as the original's `step % 100 == 0`.
  Not the run's last step as well: a run stopped at --max_steps=200 and resumed to 400 then
  charted a point at 199 that the same run uninterrupted has not, and TensorBoard's smoothing
  parted the two curves from there."""
  return due(config.save_summaries_steps, step, last)


def call_length(step, config, most):
  """How many steps the call starting at 0-based `step` runs: at most `most` (the backend's
  max_steps_per_call), and no more than lets every step that logs be the first or last step
  of a call, every step that writes summaries a call of its own, and every checkpoint come
  after a call's last step. Log lines, summaries and checkpoints are then those of one step
  per call."""
  if summarises(step, config):
    return 1  # its summaries hold the weights after this step, so it runs alone
  k = min(most, config.max_steps - step, steps_to_next(config.save_checkpoint_steps, step))
  for every in (config.log_frequency, config.save_summaries_steps):
    k = min(k, steps_to_next(every, step))  # no multiple of `every` strictly inside the call
  profile = config.profile_steps or ()
  for edge in profile[:1] + tuple(s + 1 for s in profile[1:]):
    if step < edge:  # the profile starts and ends between calls
      k = min(k, edge - step)
  return max(k, 1)
