"""Variable pairing by the model's structure: the order each side's forward pass uses its
variables, not the names a process numbers (porting.matching, porting.use_order).

  auto_numbered(name)  whether a name holds a layer name Keras or tf.layers gave by a counter
  ordered(...)         what is left after the names, paired in the order of use, else of
                       creation; a line said where the two differ, or where variables of one
                       shape pair by creation order alone although a graph was read
"""

import re

# The names Keras (and tf.layers, the same snake case) gives a layer that holds variables
# when it is given none, numbered _1, _2, ... after the first: a counter of the process in
# Keras 3, of the variable scope in tf.layers, so the same number names other layers.
_DEFAULTS = (
    "dense", "einsum_dense", "embedding", "conv1d", "conv2d", "conv3d", "conv1d_transpose",
    "conv2d_transpose", "conv3d_transpose", "separable_conv1d", "separable_conv2d",
    "depthwise_conv1d", "depthwise_conv2d", "batch_normalization", "layer_normalization",
    "group_normalization", "unit_normalization", "spectral_normalization", "normalization",
    "lstm", "gru", "simple_rnn", "lstm_cell", "gru_cell", "simple_rnn_cell", "conv_lstm1d",
    "conv_lstm2d", "conv_lstm3d", "bidirectional", "time_distributed", "multi_head_attention",
    "p_re_lu", "prelu", "locally_connected1d", "locally_connected2d")
_NUMBERED = re.compile(rf"^(?:{'|'.join(_DEFAULTS)})(?:_\d+)?$")
SAID = 3  # pairs named in a line


def auto_numbered(name):
  """Whether a scope of `name` (not its last part, the variable's own) is a default name."""
  return any(_NUMBERED.match(part) for part in name.split("/")[:-1])


def ordered(left1, left2, shapes1, shapes2, use, in_order, notes):
  """{TF1 name: TF2 name} of what is left, or None: in the order of use where `use` (TF1
  names, TF2 names) pairs them, else in creation order (`in_order`, matching's rule for one
  order). Appends to `notes` where the orders disagree or where creation order alone paired
  variables of one shape."""
  created = in_order(left1, left2, shapes1, shapes2)
  used = None
  if use is not None:
    used = in_order(_by_use(left1, use[0]), _by_use(left2, use[1]), shapes1, shapes2)
  if used is not None:
    differ = [(a, used[a], created[a]) for a in left1 if created and created[a] != used[a]]
    if differ:
      notes.append("paired by the order of use in the forward pass, not of creation: " +
                   ", ".join(f"TF1 {a} with TF2 {b} (creation order: {c})"
                             for a, b, c in differ[:SAID]) + (", ..." if len(differ) > SAID
                                                              else ""))
    return used
  alike = _one_shape(created, shapes1) if created is not None and use is not None else []
  if alike:  # (a record has no graph to read the order of use from: nothing to say there)
    notes.append("paired by creation order alone (their order of use does not pair them): "
                 f"{', '.join(alike[:SAID])}{', ...' if len(alike) > SAID else ''} share a "
                 "shape with another variable so paired; a port that creates them in another "
                 "order would swap them: a variable_map names them")
  return created


def _by_use(names, use):
  """`names` in the order of `use`; those it does not list after them, as they were."""
  place = {name: i for i, name in enumerate(use)}
  return sorted(names, key=lambda n: (place.get(n, len(place)), names.index(n)))


def _one_shape(pairs, shapes1):
  """The TF1 names paired in `pairs` whose shape another of them has too."""
  shapes = [shapes1[a] for a in pairs]
  return [a for a in pairs if shapes.count(shapes1[a]) > 1]
