"""The loss as the sum its graph adds: where step 0's forward passes part after the last layer
compared, or only the losses part, each side's loss is split into the scalar terms its
additions add (as written), the terms are measured at step 0 (porting.layer_probes), and what
they show is said: a term that parts; or every term the same bits and the sums apart, with
whether each side's graph added them as written (the written sum of the measured floats gives
its loss's bits) or not (grappler's arithmetic optimizer rewrites sums of scalars).

Measured on tests/head_terms_port.py: TF1's `tf.add_n([xent, 0.4 x aux, penalty])` against a
port's `xent + (0.4 x aux + penalty)`, and against the port's own `tf.add_n` in TF1's order:
the three terms the same bits, the losses 1 ULP apart in both; with the arithmetic optimizer
off on both sides, both EQUAL. The order as written was not the cause; the rewrite was.

  split(loss)                the form (nested: a leaf's index, ["+", x, y], ["add_n", [..]])
                             and the leaf tensors
  measured(form, leaves, values, loss)   the fact a side's probe keeps
  said(terms1, terms2)       what the two sides' measured terms show (a Head), or None
"""

import collections

import numpy as np

from porting import diffs
from porting import precision

# What said() found: kind "term_apart" (a term parts) or "sums_apart" (every term the same
# bits, the sums apart); text: the clause a line says.
Head = collections.namedtuple("Head", "kind text")

SUMS = ("Add", "AddV2", "AddN")
THROUGH = ("Identity",)
MAX_TERMS = 16  # a loss of more scalar terms is said as not compared term by term
GRAPPLER = ("tf.config.optimizer.set_experimental_options({'arithmetic_optimization': "
            "False})")


def split(loss):
  """(form, leaves) of the scalar `loss` tensor: the rank-0 tensors its additions add, walked
  through Identity, Add, AddV2 and AddN of scalars (a scaled term, a mean, a division is a
  leaf: its value holds its factor), and how they are added."""
  leaves = []

  def walk(t):
    op = t.op
    if op.type in THROUGH and op.inputs:
      return walk(op.inputs[0])
    if op.type in SUMS and len(op.inputs) > 1 and _scalar(t) and all(
        _scalar(x) for x in op.inputs):
      parts = [walk(x) for x in op.inputs]
      return ["add_n", parts] if op.type == "AddN" else ["+", parts[0], parts[1]]
    leaves.append(t)
    return len(leaves) - 1

  if not _scalar(loss):
    return None, []  # a loss per example: no sum of scalar terms to read
  return walk(loss), leaves


def _scalar(t):
  return t.shape.rank == 0


def measured(form, leaves, values, loss):
  """The fact a side's probe keeps: (form, [(value, the op that makes the term)], the loss's
  value, its dtype's name); None where the loss was not split."""
  if form is None:
    return None
  return (form, [(float(v), f"{t.op.type} {t.op.name}") for t, v in zip(leaves, values)],
          float(loss), np.asarray(loss).dtype.name)


def render(form, names):
  """`form` as a line says it, leaf i named names[i]."""
  if isinstance(form, int):
    return names[form]
  if form[0] == "add_n":
    return f"add_n({', '.join(render(f, names) for f in form[1])})"
  return f"({render(form[1], names)} + {render(form[2], names)})"


def evaluate(form, values, dtype):
  """The written sum of `values` in `dtype`, in the order `form` adds them (TensorFlow's AddN
  adds its inputs left to right); None in a dtype numpy has not (bfloat16)."""
  try:
    kind = np.dtype(dtype).type
  except TypeError:
    return None
  if isinstance(form, int):
    return kind(values[form])
  if form[0] == "add_n":
    parts = [evaluate(f, values, dtype) for f in form[1]]
    total = parts[0]
    for part in parts[1:]:
      total = kind(total + part)
    return total
  return kind(evaluate(form[1], values, dtype) + evaluate(form[2], values, dtype))


def said(terms1, terms2):
  """What the two sides' measured terms (`measured`) show of losses apart, a Head: None where
  either is missing or neither loss is a sum."""
  if not terms1 or not terms2:
    return None
  (form1, t1, loss1, dtype1), (form2, t2, loss2, dtype2) = terms1, terms2
  if len(t1) < 2 and len(t2) < 2:
    return None
  names1 = [f"t{i + 1}" for i in range(len(t1))]
  if len(t1) > MAX_TERMS or len(t2) > MAX_TERMS or len(t1) != len(t2):
    # Nothing said: other counts tell nothing of a fault (a sum divided as a whole, as a
    # combination divides a tower's loss by N, is one leaf; its port's terms divided one by
    # one are two), and "1 term against 2" read as one.
    return None
  pairs = _paired(t1, t2)
  apart = [(a, b) for a, b in pairs if not _same(a[0], b[0])]
  if apart:
    a, b = max(apart, key=lambda p: _rel(p[0][0], p[1][0]))
    rel = _rel(a[0], b[0])
    how = ("by rounding: the same value by other operations or kernels" if
           rel <= precision.ROUNDING else "that term is computed otherwise")
    return Head("term_apart", (
        f"of the loss's {len(t1)} terms, {len(apart)} part(s): the largest, TF1's {a[1]} "
        f"({a[0]:.8g}) against TF2's {b[1]} ({b[0]:.8g}), {rel:.2g} relative apart, {how}"))
  partner = {id(b): i for i, (_, b) in enumerate(pairs)}
  names2 = [names1[partner[id(b)]] for b in t2]
  written1, written2 = render(form1, names1), render(form2, names2)
  as1 = _as_written(form1, t1, loss1, dtype1)
  as2 = _as_written(form2, t2, loss2, dtype2)
  line = (f"the loss's {len(t1)} terms are the same bits on both sides "
          f"({_listed(t1)}); only their sums part: TF1's written {written1}, TF2's "
          f"{written2}; " + ", ".join(f"{side}'s graph {how}" for side, how in (
              ("TF1", _how(as1)), ("TF2", _how(as2)))))
  if as1 is False or as2 is False:
    return Head("sums_apart", (
        f"{line}: grappler's arithmetic optimizer rewrites sums of scalars, and the rewrite, "
        f"not the order written, parts them ({GRAPPLER} on both sides adds them as written)"))
  if as1 and as2 and written1 != written2:
    return Head("sums_apart", f"{line}: float addition in another order rounds otherwise")
  return Head("sums_apart", line)


def _as_written(form, terms, loss, dtype):
  """Whether the written sum of the measured terms is the loss's bits (None: not known)."""
  total = evaluate(form, [v for v, _ in terms], dtype)
  if total is None:
    return None
  return np.asarray(total).tobytes() == np.asarray(loss, total.dtype).tobytes()


def _how(as_written):
  return {True: "adds them as written", False: "does not add them as written (its loss is "
          "not that sum of these floats)", None: "was not checked against the sum written"
          }[as_written]


def _paired(t1, t2):
  """Each TF1 term with a TF2 term, each used once, in TF1's order: first those of the same
  bits (a term that parts must not take another's partner), then the nearest in value (the
  terms of a loss stand apart by more than rounding: a cross entropy, a 0.4 x auxiliary, a
  penalty)."""
  left, found = list(t2), {}
  for i, a in enumerate(t1):
    same = [b for b in left if _same(a[0], b[0])]
    if same:
      found[i] = same[0]
      left.remove(same[0])
  for i, a in enumerate(t1):
    if i not in found:
      found[i] = min(left, key=lambda b: abs(a[0] - b[0]))
      left.remove(found[i])
  return [(a, found[i]) for i, a in enumerate(t1)]


def _same(x, y):
  return np.float32(x).tobytes() == np.float32(y).tobytes()


def _rel(x, y):
  return diffs.diff(np.float32(x), np.float32(y)).max_rel


def _listed(terms):
  return ", ".join(f"t{i + 1} = {v:.8g}, {op}" for i, (v, op) in enumerate(terms))
