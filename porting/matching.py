"""Which TF2 variable is which TF1 variable: by name, then by shape and creation order.

  pairs = match(tf1_variables, tf2_variables, explicit={"bn1/gamma": "bn/gamma"})

Each side is a list of (name, shape) in creation order. A pair is made, in this order:
1. from `explicit` (TF1 name -> TF2 name), for what nothing else can tell apart; a TF1 name
   mapped to None is left out of the comparison (a variable the TF1 code keeps and the port
   has no counterpart of, such as the original's loss averages), never silently;
2. by name: the same name once ":0" and a leading model scope are dropped
   ('sequential/conv2d/kernel' and 'conv2d/kernel');
3. by shape and creation order: what is left on both sides, when both list the same sequence
   of shapes (a port that creates its layers in the TF1 order, as Keras layers do); where the
   sequences differ, only shapes that occur once on each side. Never a pair whose names say
   two different roles (a batch norm's gamma and beta have one shape, and which comes first
   depends on the code path: tf.layers' and tf_slim's default make gamma first,
   tf.contrib.layers.batch_norm's own path and porting.TF1BatchNorm beta): where the order
   would pair them so, each role's variables pair in order among themselves.
Anything left over is a PortError naming every unmatched variable of both sides: a partial
comparison would pass a port that lost a variable.
"""

import numpy as np

from porting import structure
from porting.errors import PortError


def _name(name):
  return name[:-2] if name.endswith(":0") else name


def _suffixes(name):
  """'a/b/c' -> ['a/b/c', 'b/c', 'c'] (longest first)."""
  parts = _name(name).split("/")
  return ["/".join(parts[i:]) for i in range(len(parts))]


def match(tf1, tf2, explicit=None, use=None, notes=None):
  """[(tf1 name, tf2 name)] in TF1 creation order; PortError if any variable is left.

  use: (TF1 names, TF2 names) in the order each side's forward pass first reads them
  (porting.use_order), or None (a record: no graph). With it, names Keras or tf.layers
  numbered themselves pair no variable (structure.auto_numbered), and what is left pairs in
  the order of use before the order of creation. `notes`, a list, gets a line where the two
  orders pair otherwise, or where variables of one shape paired by creation order alone."""
  tf1_shapes = {_name(n): tuple(s) for n, s in tf1}
  tf2_shapes = {_name(n): tuple(s) for n, s in tf2}
  if len(tf2_shapes) < len(tf2):  # a dict of them would keep one: said, not collapsed
    names = [_name(n) for n, _ in tf2]
    repeated = sorted({n for n in names if names.count(n) > 1})
    raise PortError(f"the port's model holds several variables named {', '.join(repeated)} "
                    "(Keras paths repeat where layers built outside the model's own scope share "
                    "a name): give those layers names of their own")
  pairs = {}
  for a, b in (explicit or {}).items():
    if b is None:  # a TF1 variable the port has no counterpart of, left out on purpose
      if _name(a) not in tf1_shapes:
        raise PortError(f"the variable map leaves out TF1 {_name(a)!r}, which the port does "
                        "not create")
      del tf1_shapes[_name(a)]
      continue
    a, b = _name(a), _name(b)
    if a not in tf1_shapes or b not in tf2_shapes:
      missing = [f"TF1 {a!r}"] * (a not in tf1_shapes) + [f"TF2 {b!r}"] * (b not in tf2_shapes)
      raise PortError(f"the variable map names {', '.join(missing)}, which the port does not "
                      "create")
    pairs[a] = b
  _by_name(tf1_shapes, tf2_shapes, pairs, numbered_too=use is None)
  left1 = [n for n in tf1_shapes if n not in pairs]
  taken = set(pairs.values())
  left2 = [n for n in tf2_shapes if n not in taken]
  ordered = structure.ordered(left1, left2, tf1_shapes, tf2_shapes, use, _in_order,
                              [] if notes is None else notes)
  if ordered is not None:
    pairs.update(ordered)
    left1 = left2 = []
  else:  # what differs in number: pair only the shapes that occur once on each side
    shapes1 = [tf1_shapes[n] for n in left1]
    shapes2 = [tf2_shapes[n] for n in left2]
    for a in list(left1):
      shape = tf1_shapes[a]
      if shapes1.count(shape) == 1 and shapes2.count(shape) == 1 and not _apart(
          a, left2[shapes2.index(shape)]):
        b = left2[shapes2.index(shape)]
        pairs[a] = b
        left1.remove(a)
        del shapes2[left2.index(b)]
        left2.remove(b)
  for a, b in pairs.items():
    if tf1_shapes[a] != tf2_shapes[b]:
      raise PortError(f"TF1 {a!r} {list(tf1_shapes[a])} is paired with TF2 {b!r} "
                      f"{list(tf2_shapes[b])}: the shapes differ"
                      + _same_values(tf1_shapes[a], tf2_shapes[b])
                      + _lstm_layout(tf1_shapes, tf2_shapes)
                      + _gru_layout(tf1_shapes, tf2_shapes))
  if left1 or left2:
    raise PortError(
        "variables left unmatched (give the port a variable_map, TF1 name -> TF2 name): "
        f"TF1 {', '.join(f'{n} {list(tf1_shapes[n])}' for n in left1) or 'none'}; "
        f"TF2 {', '.join(f'{n} {list(tf2_shapes[n])}' for n in left2) or 'none'}"
        + _batch_norm_setting(left1, left2) + _debias_state(left1, left2)
        + _lstm_layout(tf1_shapes, tf2_shapes) + _gru_layout(tf1_shapes, tf2_shapes)
        + _sizes(left1, left2, tf1_shapes, tf2_shapes))
  return [(a, pairs[a]) for a in tf1_shapes]


# What a variable is in its layer, by the last part of its name, as TF1 (tf.layers, tf_slim,
# tf.contrib) and Keras name it; other names have no role and pair by shape and order only.
# A kernel is a kernel whatever its kind (Keras 3 names a DepthwiseConv2D's `kernel`, tf_slim
# `depthwise_weights`); their shapes tell the kinds apart.
_ROLES = {"gamma": "scale", "scale": "scale", "beta": "offset", "offset": "offset",
          "moving_mean": "mean", "moving_variance": "variance", "bias": "bias", "biases": "bias",
          **{k: "kernel" for k in ("kernel", "weights", "depthwise_kernel", "depthwise_weights",
                                   "pointwise_kernel", "pointwise_weights")}}


def _role(name):
  return _ROLES.get(name.rsplit("/", 1)[-1])


def _apart(a, b):
  """Whether the two names say different roles (gamma against beta)."""
  return None not in (_role(a), _role(b)) and _role(a) != _role(b)


def _in_order(left1, left2, tf1_shapes, tf2_shapes):
  """What is left, paired in creation order where both sides list the same shapes: each
  position's pair, or where that pairs two roles, each role's variables of a shape in order
  among themselves. None where neither pairs all of them."""
  if [tf1_shapes[n] for n in left1] != [tf2_shapes[n] for n in left2]:
    return None
  if not any(_apart(a, b) for a, b in zip(left1, left2)):
    return dict(zip(left1, left2))
  groups1, groups2 = {}, {}
  for names, shapes, groups in ((left1, tf1_shapes, groups1), (left2, tf2_shapes, groups2)):
    for n in names:
      groups.setdefault((_role(n), shapes[n]), []).append(n)
  if {k: len(v) for k, v in groups1.items()} != {k: len(v) for k, v in groups2.items()}:
    return None
  return {a: b for key, names in groups1.items() for a, b in zip(names, groups2[key])}


def _by_name(tf1_shapes, tf2_shapes, pairs, numbered_too=True):
  """Pairs by the longest name ending both sides share uniquely, with the same shape; not by
  an ending that holds a layer name numbered by Keras or tf.layers unless `numbered_too`."""
  taken = set(pairs.values())
  for a in tf1_shapes:
    if a in pairs:
      continue
    for suffix in _suffixes(a)[:-1] or _suffixes(a):  # never by the last part alone
      if not numbered_too and structure.auto_numbered(suffix):
        continue
      found = [b for b in tf2_shapes if b not in taken and suffix in _suffixes(b)]
      owners = [n for n in tf1_shapes if n not in pairs and suffix in _suffixes(n)]
      if len(found) == 1 and len(owners) == 1 and tf2_shapes[found[0]] == tf1_shapes[a]:
        pairs[a] = found[0]
        taken.add(found[0])
        break


# A batch norm's scale and offset variables, by the names tf.layers, tf_slim and Keras give.
_SCALE, _CENTER = ("gamma", "scale"), ("beta", "offset")


def _sizes(left1, left2, tf1_shapes, tf2_shapes):
  """Where as many are left on each side, of the same ranks, and only their sizes differ: a
  variable map pairs names, not sizes (a hash bucket count off by one)."""
  ranks = lambda names, shapes: sorted(len(shapes[n]) for n in names)
  if not left1 or len(left1) != len(left2) or ranks(left1, tf1_shapes) != ranks(
      left2, tf2_shapes) or sorted(tf1_shapes[n] for n in left1) == sorted(
          tf2_shapes[n] for n in left2):
    return ""
  return (" (as many left on each side, of the same ranks, other sizes: a variable_map pairs "
          "names and cannot pair those; a size set otherwise on one side, as a vocabulary's, "
          "hash buckets' or units' count, is to be set alike)")


def _lstm_layout(tf1_names, tf2_names):
  """Where TF1's LSTM cells (one kernel over [input, h], gates i, j, f, o) meet Keras's LSTM
  (kernel and recurrent_kernel, gates i, f, c, o): no variable map pairs those."""
  if not (any(n.endswith("lstm_cell/kernel") for n in tf1_names) and
          any(n.endswith("recurrent_kernel") for n in tf2_names)):
    return ""
  return (" (TF1's BasicLSTMCell and LSTMCell keep one kernel over [input, h] with the gates "
          "in the order i, j, f, o, and add the forget bias in the step; Keras's LSTM keeps a "
          "kernel and a recurrent_kernel, the gates in the order i, f, c, o: the kit pairs "
          "whole variables, so port the cell as TF1 computes it: one kernel, its gate order "
          "and forget bias (MIGRATION.md, TF1's RNN cells))")


def _same_values(shape1, shape2):
  """Where two paired shapes hold as many values, differing only by dimensions of 1 (a Keras
  Conv1D's [k, in, out] for conv2d's [k, in, 1, out] over an expanded input)."""
  squeezed = lambda shape: [d for d in shape if d != 1]
  if squeezed(shape1) == squeezed(shape2):
    return (" (the same values but for dimensions of 1, as a Keras Conv1D's kernel [k, in, "
            "out] against conv2d's [k, in, 1, out] over an expanded input: the kit pairs "
            "variables of one shape, so give the port's layer the TF1 variable's shape, e.g. "
            "a Conv2D over the same expanded input)")
  if int(np.prod(shape1)) == int(np.prod(shape2)):
    return (" (as many values in another layout, as Keras's MultiHeadAttention keeps its "
            "query, key and value kernels [in, heads, head size] where TF1's dense layers "
            "keep [in, heads x head size]: the kit pairs variables of one shape, so write "
            "the port's layer with the TF1 variable's shape, e.g. Dense layers and the heads "
            "split as the TF1 code splits them)")
  return ""


def _gru_layout(tf1_names, tf2_names):
  """Where TF1's GRUCell (gates/kernel over [input, h] for r and u, candidate/kernel) meets
  Keras's GRU (kernel, recurrent_kernel, bias [2, 3h]; gates z, r, h): no map pairs those,
  and Keras's default reset_after=True is another formula."""
  if not (any(n.endswith("gates/kernel") for n in tf1_names) and
          any(n.endswith("candidate/kernel") for n in tf1_names) and
          any(n.endswith("recurrent_kernel") for n in tf2_names)):
    return ""
  return (" (TF1's GRUCell keeps gates/kernel over [input, h] for the reset and update gates "
          "(r, u; their bias starts at 1.0) and candidate/kernel, and applies the reset gate "
          "to h before the candidate's matmul; Keras's GRU keeps a kernel, a recurrent_kernel "
          "and a bias in the order z, r, h, and by default (reset_after=True) applies the "
          "reset gate after the recurrent matmul, another formula: the kit pairs whole "
          "variables, so port the cell as TF1 computes it: its two kernels, gate order and "
          "reset before the matmul (MIGRATION.md, TF1's RNN cells))")


def _batch_norm_setting(left1, left2):
  """Where what is left on one side only is a batch norm's gamma or beta: the setting that
  makes it (scale, center), which a variable map cannot pair."""
  def kinds(names):
    last = {n.rsplit("/", 1)[-1] for n in names}
    return [k for k, words in (("scale", _SCALE), ("center", _CENTER)) if last & set(words)]
  one_sided = [(side, kind) for side, names, other in (("TF1", left1, left2),
                                                       ("TF2", left2, left1))
               for kind in kinds(names) if kind not in kinds(other)]
  if not one_sided:
    return ""
  said = ", ".join(f"{kind}=True on the {side} side only" for side, kind in one_sided)
  return (f" (a batch norm with {said}: tf.layers' and Keras's BatchNormalization default to "
          "scale=True and center=True, tf_slim's batch_norm to scale=False; set them alike)")


def _debias_state(left1, left2):
  """Where what is left on the TF1 side holds a zero-debiased moving average's own state."""
  state = [n for n in left1 if n.rsplit("/", 1)[-1].split("_")[0] in ("biased", "local")]
  if not state or any(n.endswith(("biased", "local_step")) for n in left2):
    return ""
  return (" (TF1's " + ", ".join(state[:2]) + (", ..." if len(state) > 2 else "") +
          " are the state of zero-debiased moving averages, assign_moving_average's default: "
          "porting.TF1BatchNorm(zero_debias=True) keeps them, or map them to None)")
