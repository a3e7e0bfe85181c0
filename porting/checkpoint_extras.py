"""What a TF1 checkpoint holds beside the model, its slots, the global step and Adam's beta
powers: the variables the team's script makes of its own, which the model does not.

The one the kit can place is the learning rate, where TF1's optimizer was given a variable
(the PTB script's `lr`, which `assign_lr` sets each epoch) and the port's Keras optimizer
keeps a plain rate (its `learning_rate` variable, not a schedule): it is carried both ways,
as the rate the run was at. Every other such variable is said, never dropped silently:
tf1_to_tf2 has no place for it, and tf2_to_tf1 takes it from the run's own TF1 checkpoint
or writes its initial value and says so.
"""

import tensorflow as tf

from porting import loss_scales


def rate_variable(optimizer):
  """The name of the variable a TF1 optimizer takes its rate from, or None (a float, or a
  schedule's tensor)."""
  rate = getattr(optimizer, "_learning_rate", getattr(optimizer, "_lr", None))
  return rate.op.name if isinstance(rate, tf.Variable) else None


def others(towers):
  """The TF1 graph's variables that are none of the model's, its slots, the global step,
  Adam's beta powers or the moving averages: their names, in the graph's order."""
  known = {name for name, _ in towers.variables()} | set(towers.slot_names().values())
  known |= {towers.global_step.op.name, *towers.beta_powers}
  known |= {shadow.op.name for shadow in towers.averages.values()}
  return [v.op.name for v in towers.all_variables if v.op.name not in known]


def beside_line(towers):
  """The line naming the TF1 variables beside the model, its slots, step and averages (an
  optimizer of the team's own keeps its moments so: BERT's adam_m, adam_v), which no row
  compares; None where there are none. A record keeps it (porting.record)."""
  scale = loss_scales.tf1_state(towers.scaled_optimizer)  # said in the loss scale's line
  names = [n for n in others(towers) if n != towers.rate_variable and n not in scale and
           not n.endswith("seed_generator_state")]  # Keras 3's dropout stream: the kit draws
  if not names:
    return None
  return (f"{len(names)} TF1 variable(s) beside the model and tf.compat.v1.train's slots "
          f"({', '.join(names[:3])}{', ...' if len(names) > 3 else ''}: an optimizer of the "
          "team's own keeps its state so): no row compares them; the weights' rows compare "
          "what they do")


def keras_rate(optimizer):
  """The Keras optimizer's rate variable, or None where its rate is a schedule."""
  rate = getattr(optimizer, "_learning_rate", None)
  return rate if hasattr(rate, "assign") and not callable(rate) else None


def to_tf2(values, towers, optimizer, notes):
  """Sets the Keras optimizer's rate from `values` (the TF1 checkpoint's, by TF1 name) where
  TF1's rate is a variable it holds; appends to `notes` what was carried and what was not."""
  name = towers.rate_variable
  rest = [n for n in values if n != name]
  if name in values:
    rate = keras_rate(optimizer)
    value = float(values[name])
    if rate is not None:
      rate.assign(value)
      notes.append(f"carried: {name} (TF1's learning rate, {value:.6g}) as the optimizer's "
                   "learning_rate")
    else:
      rest.insert(0, f"{name} (TF1's learning rate, {value:.6g}: the port's rate is a "
                  "schedule of the step)")
  if rest:
    notes.append("not carried (the kit pairs nothing on the TF2 side with them: variables "
                 "the TF1 code makes beside the model and tf.compat.v1.train's slots, as an "
                 "optimizer of its own keeps its moments): " + ", ".join(rest))


def to_tf1(towers, optimizer, carried, notes):
  """{TF1 name: value} for the TF1 graph's other variables: TF1's rate variable from the
  Keras optimizer's rate (where it is a variable), the others from `carried` (the run's own
  TF1 checkpoint's); appends to `notes` what is written at its initial value."""
  values = {}
  name, rate = towers.rate_variable, keras_rate(optimizer)
  beside = others(towers)
  for other in beside:
    if other == name and rate is not None:
      values[other] = rate.numpy()
      notes.append(f"carried: the optimizer's learning_rate ({float(values[other]):.6g}) "
                   f"as {other}")
    elif other in carried:
      values[other] = carried[other]
  initial = [n for n in beside if n not in values]
  if initial:
    notes.append("written at their initial values (the kit pairs nothing in the TF2 "
                 "checkpoint with them; --tf1_checkpoint carries them from the run's own): "
                 + ", ".join(initial))
  return values
