"""The two optimizers' hyper-parameters, compared before a step runs.

A port whose Keras optimizer keeps another epsilon, momentum or decay than the TF1 optimizer
differs from the first step in every variable, and nothing in the numbers says why (Keras's
Adam defaults to epsilon=1e-7 where TF1's AdamOptimizer has 1e-8: the weights were 0.97
relative apart after step 0). `mismatches(tf1, tf2)` names each one with both values; compare()
refuses such a port in one line. The learning rate is not compared here: the report compares
the rate of every step (a schedule's, too).
"""

import numpy as np

# TF1 class -> (Keras class, {TF1 attribute: Keras attribute}).
PAIRS = {
    "AdamOptimizer": ("Adam", {"_beta1": "beta_1", "_beta2": "beta_2", "_epsilon": "epsilon"}),
    "MomentumOptimizer": ("SGD", {"_momentum": "momentum", "_use_nesterov": "nesterov"}),
    "GradientDescentOptimizer": ("SGD", {}),
    "RMSPropOptimizer": ("RMSprop", {"_decay": "rho", "_momentum": "momentum",
                                     "_epsilon": "epsilon", "_centered": "centered"}),
    "AdagradOptimizer": ("Adagrad", {"_initial_accumulator_value": "initial_accumulator_value"}),
    "FtrlOptimizer": ("Ftrl", {
        "_learning_rate_power": "learning_rate_power",
        "_initial_accumulator_value": "initial_accumulator_value",
        "_l1_regularization_strength": "l1_regularization_strength",
        "_l2_regularization_strength": "l2_regularization_strength",
        "_l2_shrinkage_regularization_strength": "l2_shrinkage_regularization_strength",
        "_beta": "beta"}),
}
# What a TF1 kernel has no setting for, as the value that does what it does: plain gradient
# descent has no momentum; ApplyAdagrad divides by sqrt(accum), with no epsilon.
IMPLIED = {"GradientDescentOptimizer": {"momentum": 0.0, "nesterov": False},
           "AdagradOptimizer": {"epsilon": 0.0}}
# What no TF1 optimizer does: a Keras optimizer that does it differs from the first step.
KERAS_CLASSES = ("SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "Nadam",
                 "Ftrl", "Lion", "Adafactor", "Lamb")
CLIPPING_NAMES = ("clipnorm", "clipvalue", "global_clipnorm")  # Keras's clipping settings
CLIPPING = tuple(f"{name} " for name in CLIPPING_NAMES)  # how their mismatch lines start
KERAS_ONLY = {"clipnorm": None, "clipvalue": None, "global_clipnorm": None, "use_ema": False,
              "weight_decay": None, "amsgrad": False}


def clipping(optimizer):
  """'name value' of each clipping the Keras optimizer `optimizer` is set to ('global_clipnorm
  0.05'), read from it whatever its class: [] where it clips nothing."""
  return [f"{name} {getattr(optimizer, name)!r}" for name in CLIPPING_NAMES
          if getattr(optimizer, name, None) is not None]


def tf1_attributes(tf1_class):
  """The TF1 optimizer's attributes compared for `tf1_class` (what a record keeps of it)."""
  return list(PAIRS.get(tf1_class, (None, {}))[1])


def _differ(a, b):
  if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
    return a != b
  return np.float32(a) != np.float32(b)  # both optimizers hold them as float32 in the update


def mismatches(tf1, tf2):
  """['name TF1 value, TF2 value', ...] for the TF1 optimizer `tf1` and Keras optimizer
  `tf2`; [] where they agree or the kit cannot read one of them (unread says so)."""
  return _compared(tf1, tf2)[0]


def unread(tf1, tf2):
  """The line saying which optimizer's settings the kit cannot read, or None: a TF1 class it
  does not know, or a Keras optimizer class of the team's own (not Keras's, not the kit's),
  whose attributes may mean anything. Its settings are not compared; the steps are. A TF1
  class whose own compute_gradients or apply_gradients runs (TF1's official ResNet scaled
  its loss by hand in compute_gradients) is said too: what it does is in the steps, unread."""
  line = _compared(tf1, tf2)[1]
  own = own_methods(tf1)
  if not own:
    return line
  said = (f"TF1 {type(tf1).__name__}'s own {' and '.join(own)} "
          f"{'run' if len(own) > 1 else 'runs'} as written (a loss scale, a clipping written "
          "there is in the steps' numbers, not read)")
  return f"{line}; {said}" if line else f"the optimizers' settings: {said}"


def own_methods(optimizer):
  """Which of compute_gradients and apply_gradients `optimizer`'s class defines itself (a
  record's stand-in carries what the recorded class did: RECORDED_OWN)."""
  recorded = getattr(optimizer, "RECORDED_OWN", None)
  if recorded is not None:
    return list(recorded)
  return [name for name in ("compute_gradients", "apply_gradients") if _own(optimizer, name)]


def _own(optimizer, name):
  """Whether `optimizer`'s method `name` is its class's own, not TensorFlow's."""
  for cls in type(optimizer).__mro__:
    if name in vars(cls):
      return not cls.__module__.startswith(("tensorflow", "porting"))
  return False


def _keras_class(optimizer):
  """The Keras optimizer class `optimizer` is, or derives from (a team's subclass of SGD
  keeps SGD's attributes), or None for a class of the team's own."""
  for cls in type(optimizer).__mro__:
    if cls.__module__.startswith("keras.") and cls.__name__ in KERAS_CLASSES:
      return cls.__name__
  return None


def _compared(tf1, tf2):
  tf1_class, tf2_class = type(tf1).__name__, type(tf2).__name__
  if tf1_class not in PAIRS:
    return [], (f"the optimizers' settings: TF1 {tf1_class} is not an optimizer the kit "
                "reads (tf.compat.v1.train's are); the steps' numbers compare them")
  expected, pairs = PAIRS[tf1_class]
  kit_class = getattr(tf2, "TF1_CLASS", None)  # porting.optimizers: TF1's kernel and names
  if kit_class is not None:
    if kit_class != tf1_class:
      return [f"optimizer TF1 {tf1_class}, TF2 {tf2_class} (which runs {kit_class}'s "
              "kernel)"], None
    return [f"{name.lstrip('_')} TF1 {getattr(tf1, name, None)!r}, TF2 {b!r}"
            for name, b in tf2.tf1_settings().items() if _differ(getattr(tf1, name, None), b)
            ] + _keras_only(tf1_class, tf2, {}), None
  keras_class = _keras_class(tf2)
  if keras_class is None:  # the team's own class: its attributes are its own business
    return [], (f"the optimizers' settings: TF2 {tf2_class} is a class of the port's own, "
                f"which the kit does not read (it reads Keras's and porting.optimizers'); "
                f"TF1 {tf1_class}'s are not held against it, the steps' numbers compare them")
  if keras_class != expected:  # both read: Keras's other optimizer is another update rule
    return [f"optimizer TF1 {tf1_class}, TF2 {tf2_class} (its Keras twin is {expected})"], None
  out = []
  for attribute, name in pairs.items():
    a, b = getattr(tf1, attribute, None), getattr(tf2, name, None)
    if isinstance(a, (bool, int, float)) and _differ(a, b):  # a tensor or schedule: skipped
      out.append(f"{name} TF1 {a!r}, TF2 {b!r}")
  return out + _keras_only(tf1_class, tf2, IMPLIED.get(tf1_class, {})), None


def _keras_only(tf1_class, tf2, implied):
  out = []
  for name, a in {**implied, **KERAS_ONLY}.items():
    b = getattr(tf2, name, a)
    if _differ(a, b):
      tf1_side = "none" if a is None else repr(a)
      out.append(f"{name} TF1 {tf1_side} ({tf1_class} has no such setting), TF2 {b!r}")
  return out
