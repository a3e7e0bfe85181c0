"""TF1 tower code that makes its weights with `tf.Variable`, shared across towers.

`get_variable` (and `tf.layers`, tf_slim) share a tower's weights through the variable
scope's reuse flag, which the kit sets after tower 0. `tf.Variable` ignores it: each tower
would make its own weights, and N towers would train N models. While the towers build, a
variable creator gives tower i > 0 tower 0's `tf.Variable`s, in the order tower 0 made them,
as reuse gives `get_variable`'s (a variable scope's custom getter marks the creations that come
through `get_variable`, which the creator leaves alone). A tower that makes more `tf.Variable`s
than tower 0, or one of another shape, is one PortError.

A `tf.Variable`'s initial value is an argument, built before the variable: a draw there
(`tf.Variable(tf.truncated_normal(...))`) is made while the kit aligns the towers' random
draws. The creator takes such draws off the tower's count (`random_ops.Source.forget`), so
that the forward pass's draws keep the numbers the TF2 replica gives its own; so does the
getter for `get_variable(initializer=<a tensor drawn in the tower>)`, in every tower.
"""

import contextlib
import re

import tensorflow as tf

from porting.errors import PortError

v1 = tf.compat.v1


def _outside_tower_scope():
  """The name scope of the tower's code without the kit's `tower_0/`: a tf.Variable is named
  as the script's own single tower (and its Saver's checkpoint) names it, `embedding/W`, not
  `tower_0/embedding/W`, as get_variable's are (they ignore name scopes)."""
  graph = v1.get_default_graph()
  first, _, rest = graph.get_name_scope().partition("/")
  if not re.fullmatch(r"tower_\d+", first):
    return contextlib.nullcontext()
  return graph.name_scope(rest + "/" if rest else "")


class Shared:
  """Tower 0's tf.Variables, handed to the other towers in creation order."""

  def __init__(self, source=None):
    self.source = source  # the aligned draws (random_ops.Source), or None
    self.made = []
    self.tower = 0
    self.taken = 0
    self.inside_get_variable = 0

  def _getter(self, getter, *args, **kwargs):
    # get_variable(initializer=<a tensor>): a draw there is built in every tower, reused or
    # not, before the step's draws: off the count, as a tf.Variable's initial value.
    initializer = kwargs.get("initializer")
    if self.source is not None and tf.is_tensor(initializer):
      self.source.forget(initializer)
    self.inside_get_variable += 1
    try:
      return getter(*args, **kwargs)
    finally:
      self.inside_get_variable -= 1

  def _creator(self, next_creator, **kwargs):
    if self.inside_get_variable:
      return next_creator(**kwargs)
    initial = kwargs.get("initial_value")
    if self.source is not None and tf.is_tensor(initial):
      self.source.forget(initial)
    if self.tower == 0:
      with _outside_tower_scope():
        variable = next_creator(**kwargs)
      self.made.append(variable)
      return variable
    if self.taken >= len(self.made):
      raise PortError(f"tower {self.tower} makes more tf.Variables than tower 0 "
                      f"({len(self.made)}): tower_loss must build the same weights each call")
    variable = self.made[self.taken]
    self.taken += 1
    shape = initial.shape if tf.is_tensor(initial) else None
    if shape is not None and shape.is_fully_defined() and shape != variable.shape:
      raise PortError(f"tower {self.tower}'s tf.Variable number {self.taken} is "
                      f"{shape.as_list()}, tower 0's ({variable.op.name}) "
                      f"{variable.shape.as_list()}: tower_loss must build the same weights "
                      "each call")
    return variable

  @contextlib.contextmanager
  def tower_scope(self, tower):
    """Builds tower `tower` inside: the variable scope (reused after tower 0) and the
    creator."""
    self.tower, self.taken = tower, 0
    with v1.variable_scope(v1.get_variable_scope(), reuse=tower > 0,
                           custom_getter=self._getter), \
        v1.variable_creator_scope(self._creator):
      yield
    if tower > 0 and self.taken != len(self.made):
      raise PortError(f"tower {tower} makes {self.taken} tf.Variable(s), tower 0 "
                      f"{len(self.made)}: tower_loss must build the same weights each call")
