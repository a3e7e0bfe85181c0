"""Loss scales: a float16 port's TF1 `MixedPrecisionLossScaleOptimizer` against Keras's
`LossScaleOptimizer`, described and compared before a step runs.

  TF1   tf.compat.v1.mixed_precision.MixedPrecisionLossScaleOptimizer(opt, loss_scale):
        "dynamic" (DynamicLossScale: from 2**15, x2 after 2000 finite steps, /2 and the step
        skipped on a non-finite gradient) or a number (FixedLossScale); compute_gradients
        differentiates the loss times the scale and divides the gradients by it again.
  TF2   keras.optimizers.LossScaleOptimizer(opt, initial_scale=2**15,
        dynamic_growth_steps=2000): always dynamic (x2, /2); the kit differentiates
        `optimizer.scale_loss(loss)` in the replica's tape, as Keras's fit does, and
        apply_gradients divides by the scale and skips a non-finite step.

What the kit reads of an optimizer (its rate, hyper-parameters and slots) is the wrapped
one's (`inner`); the wrappers run the steps. A scale on one side only, or two scales that
start or grow otherwise, are refused in one line naming both: the float16 gradients
underflow and the steps are skipped at other places.
"""

import numpy as np

DYNAMIC_MULTIPLIER = 2.0  # Keras's LossScaleOptimizer: fixed
# The modules of the optimizer classes whose loss scale the kit reads, or knows they have none.
_READ = ("tensorflow.python.training", "porting")


def tf1_inner(optimizer):
  """The optimizer a TF1 loss-scale wrapper wraps, or `optimizer` itself."""
  return optimizer._optimizer if _tf1_scale(optimizer) is not None else optimizer  # pylint: disable=protected-access


def tf2_inner(optimizer):
  """The optimizer a Keras LossScaleOptimizer wraps, or `optimizer` itself."""
  return getattr(optimizer, "inner_optimizer", None) or optimizer


def _tf1_scale(optimizer):
  scale = getattr(optimizer, "_loss_scale", None)
  return scale if scale is not None and hasattr(optimizer, "_optimizer") else None


def tf1(optimizer):
  """The TF1 side's loss scale as (kind, initial scale, steps between growths, multiplier),
  or None: ("dynamic", 32768.0, 2000, 2.0), ("fixed", 128.0, None, None)."""
  scale = _tf1_scale(optimizer)
  if scale is None:
    return None
  if hasattr(scale, "initial_loss_scale"):
    return ("dynamic", float(scale.initial_loss_scale), int(scale.increment_period),
            float(scale.multiplier))
  return ("fixed", float(np.asarray(scale())), None, None)


def tf2(optimizer):
  """The TF2 side's, as `tf1` says it, or None."""
  if getattr(optimizer, "inner_optimizer", None) is None:
    return None
  return ("dynamic", float(optimizer.initial_scale), int(optimizer.dynamic_growth_steps),
          DYNAMIC_MULTIPLIER)


def tf1_state(optimizer):
  """The TF1 names of the loss scale's own variables (a DynamicLossScale's current scale and
  count of good steps), which the report describes rather than lists beside the model."""
  scale = _tf1_scale(optimizer)
  variables = [getattr(scale, a, None) for a in ("_current_loss_scale", "_num_good_steps")]
  return {v.op.name for v in variables if v is not None and hasattr(v, "op")}


def said(scale):
  if scale is None:
    return "none"
  kind, initial, steps, multiplier = scale
  if kind == "fixed":
    return f"fixed {initial:g}"
  return f"dynamic from {initial:g}, x{multiplier:g} after {steps} finite steps"


def _fixed_as_dynamic(a, b, steps):
  """TF1's scale fixed at the scale Keras's dynamic one starts from, which keeps it for more
  finite steps than are compared: every finite step scales alike (a step whose scaled
  gradients overflow, TF1 applies and Keras skips, halving its scale)."""
  return (a is not None and b is not None and a[0] == "fixed" and b[0] == "dynamic" and
          a[1] == b[1] and steps is not None and steps <= b[2])


def mismatch(tf1_optimizer, tf2_optimizer, steps=None):
  """The line refusing two loss scales that differ over `steps` compared steps, or None."""
  a, b = tf1(tf1_optimizer), tf2(tf2_optimizer)
  if a == b or _fixed_as_dynamic(a, b, steps):
    return None
  tf1_said = said(a)
  if a is None and not type(tf1_optimizer).__module__.startswith(_READ):
    # An optimizer class the kit does not read (the team's own, tf.contrib's, Horovod's) may
    # scale in its own compute_gradients, as TF1's official ResNet did by hand: that the kit
    # cannot see, and "none" would be its guess.
    tf1_said = (f"none the kit can read ({type(tf1_optimizer).__name__} is no optimizer "
                "class the kit reads: a scale its own compute_gradients applies is not seen)")
  return (f"the loss scales differ: TF1 {tf1_said}, TF2 {said(b)} (TF1's "
          "MixedPrecisionLossScaleOptimizer, Keras's LossScaleOptimizer: Keras's is always "
          "dynamic, x2; give TF1 loss_scale='dynamic', or the port LossScaleOptimizer("
          "initial_scale=..., dynamic_growth_steps=...) as TF1's)")


def note(tf1_optimizer, tf2_optimizer=None, steps=None):
  """The line the report shows where both sides scale their loss alike, or None."""
  scale, keras_scale = tf1(tf1_optimizer), tf2(tf2_optimizer)
  if _fixed_as_dynamic(scale, keras_scale, steps):
    return (f"loss scale: TF1 {said(scale)}, TF2 {said(keras_scale)}: alike over these "
            f"{steps} step(s) while each is finite (Keras's grows only after "
            f"{keras_scale[2]} finite steps; a step whose scaled gradients overflow TF1 applies "
            "and Keras skips, halving its scale: its rows show NON-FINITE); the gradients "
            "compared are unscaled, as TF1's compute_gradients returns them")
  return None if scale is None else (
      f"loss scale, the same on both sides: {said(scale)}; the gradients compared are "
      "unscaled, as TF1's compute_gradients returns them (a step whose scaled gradients "
      "overflow shows them NON-FINITE on both sides: no skipped step counts as equal); the "
      "scale's own state (TF1's current_loss_scale, good_steps) is not compared row by row")
