"""The two sides' layer settings (porting.layer_settings) compared: `mismatches(tf1, tf2,
pairs)` says each fault in one line with both values (a layer's two moving statistics, every
variable regularized alike by the same factor: one line), e.g. `batch norm bn1: momentum TF1
0.9, TF2 0.99`. compare() refuses a port with any before its first step."""

import numpy as np

MOMENTUM_TOLERANCE = 1e-6  # 1 - float32(1 - m) against float32(m): 1e-8 apart, not 1e-6
REGULARIZATION_TOLERANCE = 1e-5  # c x w against 2 (c / 2) x w: rounding only


def _f32(x):
  return np.float32(x)


def mismatches(tf1, tf2, pairs):
  """['what: TF1 value, TF2 value', ...] between the two sides' Settings, one line per fault
  (a layer's two moving statistics, every variable regularized alike: one line); `pairs`
  [(TF1 name, TF2 name)] of the model's variables."""
  out = _dropout(tf1.dropout, tf2.dropout)
  bn1, bn2 = tf1.batch_norm, tf2.batch_norm
  modes = set()  # layers normalizing with other statistics: their updates differ as well
  if len(bn1) != len(bn2):
    out.append(f"batch norm layers: TF1 {len(bn1)} ({_scopes(bn1)}), TF2 {len(bn2)} "
               f"({_scopes(bn2)})")
  else:
    for a, b in zip(bn1, bn2):
      if _f32(a.epsilon) != _f32(b.epsilon):
        out.append(f"batch norm {_short(a.scope)}: epsilon TF1 {a.epsilon:.6g}, TF2 "
                   f"{b.epsilon:.6g}" + _raised_epsilon(a.epsilon, b.epsilon))
      if a.training != b.training:
        modes.add(_short(a.scope))
        out.append(f"batch norm {_short(a.scope)}: normalizes with TF1 {_mode(a)}, TF2 "
                   f"{_mode(b)}")
  ln1, ln2 = getattr(tf1, "layer_norm", []), getattr(tf2, "layer_norm", [])
  if len(ln1) == len(ln2):  # else not compared (unread)
    out += [f"{kind} {_short(s1)}: epsilon TF1 {a:.6g}, TF2 {b:.6g}"
            for (s1, a, kind), (_, b, _) in zip(ln1, ln2) if _f32(a) != _f32(b)]
  return out + _label_smoothing(tf1, tf2) + _moving(tf1, tf2, pairs, modes) + _regularization(
      tf1.regularization, tf2.regularization, pairs)


def _label_smoothing(tf1, tf2):
  """A line where the two sides' cross-entropies, one for one, smooth their labels
  otherwise (each read on both sides; a record from before the kit read them holds none)."""
  s1, s2 = getattr(tf1, "label_smoothing", []), getattr(tf2, "label_smoothing", [])
  if len(s1) != len(s2):
    return []
  apart = [i for i, (a, b) in enumerate(zip(s1, s2))
           if a is not None and b is not None and _f32(a) != _f32(b)]
  if not apart:
    return []
  which = (f" of softmax cross-entropy {', '.join(str(i + 1) for i in apart)} of {len(s1)}"
           if len(s1) > 1 else "")
  values = lambda side: ", ".join(f"{side[i]:.6g}" for i in apart)
  return [f"label smoothing{which} (labels y (1 - e) + e / K): TF1 {values(s1)}, TF2 "
          f"{values(s2)}"]


def unread(tf1, tf2, pairs):
  """Lines naming the moving statistics a side assigns in a form the kit does not read: not
  compared before the steps (their numbers are), never said to differ or to be absent."""
  out = []
  to1 = {b: a for a, b in pairs}
  for side, settings, names in (("TF1", tf1, {a: a for a, _ in pairs}), ("TF2", tf2, to1)):
    found = [n for n in getattr(settings, "unread", []) if n in names]
    if found:  # named by the TF1 layer, as every other line is
      layers = sorted({_layer(names[n]) for n in found})
      out.append(f"batch norm {', '.join(layers)}: the {side} side assigns "
                 f"{', '.join(found)} in a form the kit does not recognise as a moving "
                 "average; the momentum is not compared, the steps' numbers are")
  ln1, ln2 = getattr(tf1, "layer_norm", []), getattr(tf2, "layer_norm", [])
  if len(ln1) != len(ln2):  # one side's in a form the kit does not recognise (Keras's own)
    out.append(f"layer, group and instance norms: TF1 {len(ln1)} recognised "
               f"({_norms(ln1)}), TF2 {len(ln2)} ({_norms(ln2)}); their epsilons are not "
               "compared, the steps' numbers are")
  s1, s2 = getattr(tf1, "label_smoothing", []), getattr(tf2, "label_smoothing", [])
  if len(s1) != len(s2):  # a record from before the kit read them holds none
    out.append(f"label smoothing: TF1 {len(s1)} softmax cross-entropies read, TF2 {len(s2)}; "
               "not compared, the steps' numbers are")
  elif any(a is None or b is None for a, b in zip(s1, s2)):
    out.append("label smoothing: the labels of a softmax cross-entropy in a form the kit does "
               "not recognise; not compared there, the steps' numbers are")
  return out


FUSED_MIN_EPSILON = 1.001e-5  # TensorFlow 1.x's fused batch norm (cuDNN's CUDNN_BN_MIN_EPSILON)


def _raised_epsilon(tf1, tf2):
  """Why a TF1 graph reads 1.001e-5 where its code says less: TensorFlow 1.x's fused batch
  norm raises a smaller epsilon to that (2.x does not), so the TF1 side ran with it."""
  if _f32(tf1) != _f32(FUSED_MIN_EPSILON) or tf2 >= FUSED_MIN_EPSILON:
    return ""
  return (" (TensorFlow 1.x's fused batch norm raises an epsilon below 1.001e-05 to "
          "1.001e-05, so the TF1 side ran with 1.001e-05 whatever its code says: set the "
          "port's epsilon to 1.001e-05)")


def _dropout(drop1, drop2):
  if len(drop1) != len(drop2):
    return [f"dropout: TF1 {len(drop1)} ({_list(drop1)}), TF2 {len(drop2)} ({_list(drop2)})"]
  return [f"dropout {_short(s1)}: rate TF1 {a:g}, TF2 {b:g}"
          for (s1, a), (_, b) in zip(drop1, drop2) if _f32(a) != _f32(b)]


def _moving(tf1, tf2, pairs, modes):
  """The moving statistics' updates, grouped by layer: {layer: [line]}, one line a layer.
  A statistic a side assigns in a form the kit does not read is not said to be updated or
  not (unread names it)."""
  to2, to1 = dict(pairs), {b: a for a, b in pairs}
  moving1, moving2 = tf1.moving, tf2.moving
  unread1, unread2 = set(getattr(tf1, "unread", [])), set(getattr(tf2, "unread", []))
  faults = {}  # (layer, what) -> [variable]
  for name, m in moving1.items():
    other = to2.get(name)
    if other is None or other in unread2:
      continue
    if other not in moving2:
      what = f"TF1 updates its moving statistics each step (momentum {m:.6g}), TF2 does not"
    elif abs(m - moving2[other]) > MOMENTUM_TOLERANCE:
      what = f"momentum TF1 {m:.6g}, TF2 {moving2[other]:.6g}"
    elif (name in tf1.debiased) != (other in tf2.debiased):
      what = _debiasing(name in tf1.debiased)
    else:
      continue
    faults.setdefault((_layer(name), what), []).append(name)
  for name, m in moving2.items():
    if name in to1 and to1[name] not in moving1 and to1[name] not in unread1:
      what = f"TF2 updates its moving statistics each step (momentum {m:.6g}), TF1 does not"
      faults.setdefault((_layer(to1[name]), what), []).append(to1[name])
  layers = {}  # what -> [layer]: one line for every layer that differs alike
  for layer, what in faults:
    if layer not in modes:
      layers.setdefault(what, []).append(layer)
  return [f"batch norm {', '.join(names)}: {what}" if len(names) < 4 else
          f"batch norm {', '.join(names[:2])} and {len(names) - 2} more: {what}"
          for what, names in layers.items()]


def _debiasing(tf1_debiased):
  """The line for a zero-debiased moving average on one side only."""
  debiased, plain = ("TF1", "TF2") if tf1_debiased else ("TF2", "TF1")
  return (f"{debiased} updates its moving statistics zero-debiased (assign_moving_average's "
          "default zero_debias=True: a `biased` average and a `local_step` count, the "
          f"statistic biased / (1 - momentum ** local_step)), {plain} as a plain moving "
          "average: from the first step they differ (the first update is the batch's "
          "statistic itself)" + ("; porting.TF1BatchNorm(zero_debias=True) updates as TF1's debiased form"
                                 if tf1_debiased else ""))


def _layer(variable):
  return _short(variable.rsplit("/", 1)[0])


def _regularization(reg1, reg2, pairs):
  """Where both sides regularize through their framework: the same variables, as strongly
  (variables off by the same factor: one line)."""
  if not reg1 or not reg2:
    return []  # one side adds its penalties by hand: the numbers will say
  only, ratios = {"TF1": [], "TF2": []}, {}
  for a, b in pairs:
    g1, g2 = reg1.get(a), reg2.get(b)
    if (g1 is None) != (g2 is None):
      only["TF1" if g1 is not None else "TF2"].append(a)
    elif g1 is not None:
      g1, g2 = np.asarray(g1, np.float64), np.asarray(g2, np.float64)
      scale = float(np.dot(g1.ravel(), g1.ravel()))
      if scale and np.max(np.abs(g2 - g1)) > REGULARIZATION_TOLERANCE * np.max(np.abs(g1)):
        ratio = float(np.dot(g2.ravel(), g1.ravel())) / scale
        ratios.setdefault(f"{ratio:.4g}", []).append(a)
  out = [f"{', '.join(names)}: regularized on the {side} side only"
         for side, names in only.items() if names]
  return out + [f"{', '.join(names)}: regularization gradient TF2 {ratio} x TF1's (a penalty "
                "c x tf.nn.l2_loss(w) is keras.regularizers.L2(c / 2))"
                for ratio, names in ratios.items()]


def _list(items):
  return ", ".join(f"{_short(s)} {r:g}" for s, r in items) or "none"


def _norms(found, most=3):
  """'norm (layer norm, epsilon 1e-12), ...' of at most `most` normalizations, or 'none'."""
  said = [f"{_short(scope)} ({kind}, epsilon {epsilon:.6g})"
          for scope, epsilon, kind in found[:most]]
  return ", ".join(said) + (", ..." if len(found) > most else "") if said else "none"


def _short(scope):
  """A layer's scope without the tower's or the traced function's prefix."""
  parts = scope.split("/")
  if parts and parts[0].startswith(("tower_", "replica_")):
    parts = parts[1:]
  return "/".join(parts) or scope


def _scopes(layers, most=None):
  """The layers' scopes (BatchNorms, or (scope, epsilon) pairs), the first `most` of them."""
  names = [_short(b.scope if hasattr(b, "scope") else b[0]) for b in layers]
  shown = names if most is None else names[:most]
  return (", ".join(shown) + (", ..." if len(names) > len(shown) else "")) or "none"


def _mode(bn):
  return "the batch's statistics" if bn.training else "the moving statistics"
