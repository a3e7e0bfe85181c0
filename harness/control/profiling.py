"""--profile_steps=A,B: a TensorBoard profile of training steps A..B, for both trainers.

`Window(logdir, steps)`, a context manager around the loop: the loop calls `before(step)`
before running 0-based step `step` and `after(step)` after it; TensorFlow's profiler runs from
before step A to after step B and writes `logdir/plugins/profile/<run>/*.xplane.pb`, which
TensorBoard's Profile tab (the tensorboard-plugin-profile package) shows as a trace viewer and op
statistics. The profiler traces the whole process, so it sees a tf.function step and a Session.run
alike.
"""

from absl import logging

from cifar10.errors import UsageError


def parse(value):
  """(A, B) of a --profile_steps value ("A,B", 0-based step numbers), or None for ""/None;
  the range is checked by cifar10.config.TrainConfig."""
  if not value:
    return None
  try:
    first, last = (int(v) for v in str(value).split(","))
  except ValueError:
    raise UsageError(f"--profile_steps must be two step numbers A,B, got {value!r}") from None
  return first, last


class Window:
  """Starts and stops the profiler around steps (A, B) of `steps` (None: never)."""

  def __init__(self, logdir, steps):
    self.logdir, self.steps, self.running = logdir, steps, False

  def before(self, step):
    if self.steps and step == self.steps[0] and not self.running:
      import tensorflow as tf  # pylint: disable=g-import-not-at-top
      tf.profiler.experimental.start(self.logdir)
      self.running = True
      logging.info("Profiling steps %d..%d into %s/plugins/profile", *self.steps, self.logdir)

  def after(self, step):
    if self.running and step >= self.steps[1]:
      self.stop()

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.stop()  # a run that ends (or fails) inside the window still writes its profile

  def stop(self):
    """Ends a profile still running (the run ended before step B)."""
    if self.running:
      import tensorflow as tf  # pylint: disable=g-import-not-at-top
      tf.profiler.experimental.stop()
      self.running = False
      logging.info("Profile written to %s/plugins/profile", self.logdir)
