"""A kill at any step of a replacement, for the tests that stop one at every step: a module's
`Ops` (its filesystem steps, one method each) wrapped so that its `at`-th step and every later
one raise `Killed`, as a SIGKILL ends a process: nothing after it runs, cleanup included."""


class Killed(BaseException):
  """A SIGKILL: not an error any handler of the code under test catches."""


class Stopping:
  """`ops` (a class of static filesystem steps) stopping at its `at`-th step (None: never);
  `steps` counts the steps taken."""

  def __init__(self, ops, at):
    self.ops, self.at, self.steps = ops, at, 0

  def __getattr__(self, name):
    real = getattr(self.ops, name)

    def step(*args):
      self.steps += 1
      if self.at is not None and self.steps > self.at:
        raise Killed()
      return real(*args)
    return step
