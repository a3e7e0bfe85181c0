"""The two sides' moving averages (EMA) of the weights, compared before a step runs: what
each averages, and how (the decay, whether `num_updates` makes it min(decay, (1 + t) / (10 +
t)), zero debiasing). An EMA without `num_updates` on one side is the fault teams make:
its averages move at the full decay from the first step."""


def read(ema):
  """{decay, num_updates, zero_debias} of a tf.train.ExponentialMovingAverage, as JSON (a
  record keeps it in its facts); a decay held in a tensor is None (not read)."""
  decay = getattr(ema, "_decay", None)
  return {"decay": float(decay) if isinstance(decay, (int, float)) else None,
          "num_updates": getattr(ema, "_num_updates", None) is not None,
          "zero_debias": bool(getattr(ema, "_zero_debias", False))}


def mismatch(tf1, tf2):
  """One line naming each setting the two EMAs (read()'s) hold differently, or None; a
  decay one side holds in a tensor is not compared."""
  differ = []
  if tf1["num_updates"] != tf2["num_updates"]:
    given = lambda s: ("num_updates given (its decay min(decay, (1 + t) / (10 + t)))"
                       if s["num_updates"] else "no num_updates (the full decay from step 0)")
    differ.append(f"TF1 {given(tf1)}, TF2 {given(tf2)}")
  if None not in (tf1["decay"], tf2["decay"]) and tf1["decay"] != tf2["decay"]:
    differ.append(f"decay TF1 {tf1['decay']:g}, TF2 {tf2['decay']:g}")
  if tf1["zero_debias"] != tf2["zero_debias"]:
    differ.append(f"zero_debias TF1 {tf1['zero_debias']}, TF2 {tf2['zero_debias']}")
  if not differ:
    return None
  advice = (" (tf2_ema(optimizer): num_updates=optimizer.iterations, the TF1 global step's "
            "count)" if tf1["num_updates"] and not tf2["num_updates"] else "")
  return f"the moving averages' settings differ: {'; '.join(differ)}; set them alike{advice}"


def averaged_alike(towers, tf2, pairs):
  """The line naming variables one side's EMA averages and the other's does not, or None."""
  if tf2.ema is None:
    return None
  # Here, not at the top: the TF1 side (tf1_towers, the recorder on TF 1.15) reads read().
  from porting import tf2_replicas  # pylint: disable=g-import-not-at-top
  to2 = dict(pairs)
  tf1_side = {to2[a] for a in towers.averages if a in to2}
  tf2_side = {tf2_replicas.variable_name(v) for v in tf2.averaged}
  to1 = {b: a for a, b in pairs}
  only = [(side, sorted(to1.get(n, n) for n in names)) for side, names in
          (("TF1", tf1_side - tf2_side), ("TF2", tf2_side - tf1_side)) if names]
  if not only:
    return None
  said = "; ".join(f"the {side} EMA averages {len(names)} variable(s) the other does not "
                   f"({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})"
                   for side, names in only)
  return (f"the moving averages differ in what they average: {said}; give "
          "tf1_ema_variables and tf2_ema_variables the same variables (Inception's EMA "
          "averages tf.compat.v1.moving_average_variables() too)")


def differ(towers, tf2, pairs):
  """What the two EMAs average or how, as one line, or None. A record from before the kit
  read the TF1 EMA's settings holds none: what it averages is still compared."""
  line = averaged_alike(towers, tf2, pairs)
  recorded = towers.facts.get("ema")
  if line is None and tf2.ema is not None and recorded:
    line = mismatch(recorded, read(tf2.ema))
  return line


def unread(towers, tf2):
  """`not compared:` lines for what the two EMAs hold that the kit could not read: a decay
  held in a tensor on a side, or a record made before the kit read the TF1 EMA's settings."""
  if tf2.ema is None:
    return []
  recorded = towers.facts.get("ema")
  if not recorded:
    return ["the moving averages' settings: the TF1 side's are not in its record (made "
            "before the kit read them); decay and num_updates are not compared, the steps' "
            "numbers are"]
  held = [side for side, settings in (("TF1", recorded), ("TF2", read(tf2.ema)))
          if settings["decay"] is None]
  return ([f"the moving averages' decay: held in a tensor on the {' and '.join(held)} side, "
           "not compared; the steps' numbers are"] if held else [])
