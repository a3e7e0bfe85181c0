"""The TF1 towers' variables read and written by name (porting.tf1_towers.Towers is one):
the model's, the slots, the EMA's shadows and the global step, set from arrays, read whole, and
saved under their TF1 names. `setters`, `all_variables`, `model_variables`, `slots`,
`averages`, `saver`, `sess` and `graph` are the Towers' own, made before its graph is
finalized."""

import numpy as np


class State:
  """What the towers' Session holds, by TF1 name."""

  def variables(self):
    return [(_name(v), tuple(v.shape.as_list())) for v in self.model_variables]

  def assign(self, values):
    """Sets the variables named in `values` ({TF1 name: array}, cast to each variable's
    dtype: a float32 global step, float16 weights)."""
    # One run for all: a Session run of a new set of fetches costs ~30 ms (its graph pruned
    # and optimized); an Inception-sized model assigned one variable a run took 3 s.
    assigns, feed = [], {}
    for name, array in values.items():
      value, assign = self.setters[name]
      assigns.append(assign)
      feed[value] = np.asarray(array).astype(value.dtype.as_numpy_dtype)
    if assigns:
      self.sess.run(assigns, feed)

  def assign_averages(self, values):
    """Sets the moving average (EMA shadow) of each trainable variable named in `values`
    ({TF1 name: array}): an EMA starts where its variable starts."""
    self.assign({_name(self.averages[n]): v for n, v in values.items() if n in self.averages})

  def values(self):
    """{TF1 name: value} of every variable (model, slots, global step)."""
    return self.sess.run({_name(v): v for v in self.all_variables})

  def save(self, prefix):
    """Saves every variable under its TF1 name (no meta graph: the team builds its own; no
    `checkpoint` index: the folder's own latest checkpoint stays its latest)."""
    with self.graph.as_default():
      return self.saver.save(self.sess, prefix, write_meta_graph=False, write_state=False)

  def slot_names(self):
    """{(model variable, slot kind): the slot variable's TF1 name}."""
    return {key: _name(slot) for key, slot in self.slots.items()}


def _name(variable):
  return variable.op.name  # 'conv1/kernel', without ':0'
