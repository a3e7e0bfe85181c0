"""Mixed precision, as both trainers run it: the compute dtype and the loss scale.

  --precision  forward/backward in        loss scale (--loss_scale)
  fp32         float32                    none
  bf16         bfloat16                   none (bfloat16 has float32's exponent range)
  fp16         float16                    a power of two, 2**15 unless given, or dynamic

Weights, moving averages, the gradients as applied and the update stay float32 in every
mode: the model casts a copy of each weight to the compute dtype (cifar10.model.inference)
and returns float32 logits, so the loss is float32 too.

The loss scale multiplies the loss before the float16 backward pass, so small gradients do
not underflow, and the float32 gradients are divided by it again before the update. Both
trainers differentiate a tower's loss (the mean over its own batch) times the scale and
unscale each tower's or replica's gradients before averaging them, so they backprop the same
float16 values and average the same float32 gradients. With a power of two every division is
exact, and the trainers are bit-identical in every precision (tests/test_precision.py).

`--loss_scale=dynamic` keeps the scale in two variables both trainers checkpoint
(`loss_scale`, `loss_scale_good_steps`) and updates them after each step the same way
(`next_scale`): a step whose averaged gradients are not all finite applies no update (its
gradients count as zero; the global step and the moving averages go on, so the data order
and the schedule stay those of every other run) and halves the scale; DYNAMIC_GROWTH_STEPS
finite steps in a row double it. The scale stays a power of two, so the trainers stay equal.
"""

import tensorflow as tf

from cifar10.config import DEFAULT_LOSS_SCALE
from cifar10.config import DYNAMIC_LOSS_SCALE as DYNAMIC

COMPUTE_DTYPES = {"fp32": tf.float32, "bf16": tf.bfloat16, "fp16": tf.float16}
DYNAMIC_INITIAL_SCALE = DEFAULT_LOSS_SCALE
DYNAMIC_GROWTH_STEPS = 2000  # Keras's LossScaleOptimizer default too


def compute_dtype(precision):
  return COMPUTE_DTYPES[precision]


def scaled(loss, scale):
  """`loss` times `scale` (a float or a float32 tensor), or `loss` itself without a scale."""
  return loss if scale is None else loss * tf.cast(scale, tf.float32)


def unscaled(gradients, scale):
  """The float32 `gradients` divided by `scale` again (exact: a power of two), or as they
  are without a scale.

  DivNoNan, not `/`: grappler turns a division by a constant into a multiplication by its
  reciprocal, which its arithmetic optimizer then regrouped with the TF2 step's sum over
  replicas (not in the v1 graph, whose gated gradients it leaves alone): at N = 3 and 4 the
  weight-decayed weights came out 1 ULP apart from the towers' on 0.1-0.5% of their values.
  With DivNoNan (the same value for a nonzero scale) neither rewrite applies.
  """
  if scale is None:
    return list(gradients)
  return [tf.math.divide_no_nan(g, tf.cast(scale, g.dtype)) for g in gradients]


def all_finite(tensors):
  """Whether every value of every tensor is finite (a scalar bool tensor): the loss scale's
  check of a step's gradients, and every trainer's check of its weights and moving averages
  before a save."""
  return tf.reduce_all(tf.stack([tf.reduce_all(tf.math.is_finite(t)) for t in tensors]))


def skipped_if_not(finite, gradients):
  """`gradients`, or zeros in their place when the step is skipped (`finite` false): the
  update w - lr * 0 then leaves every weight as it was, bit for bit."""
  return [tf.where(finite, g, tf.zeros_like(g)) for g in gradients]


def next_scale(scale, good_steps, finite):
  """(scale, good steps) of the dynamic loss scale after a step with `finite` gradients:
  halved (down to 1) after a non-finite step, doubled after DYNAMIC_GROWTH_STEPS finite
  steps in a row."""
  good = tf.where(finite, good_steps + 1, tf.zeros_like(good_steps))
  grow = good >= DYNAMIC_GROWTH_STEPS
  new_scale = tf.where(finite, tf.where(grow, scale * 2.0, scale), tf.maximum(scale / 2.0, 1.0))
  return new_scale, tf.where(grow, tf.zeros_like(good), good)
