"""What a TF2 port adds to compute TF1's gradients where a tape and tf.distribute alone would
not: a convolution bias gradient computed as TF1's gated graph computes it
(`gated_bias_add`), and the replicas' gradients averaged as `average_gradients` averages
towers (`replica_mean`). This project's own model and TF2 step use both.

TF1's `Optimizer.compute_gradients` gates each op's gradients (gate_gradients=GATE_OP: all of
an op's input gradients are computed before any is used). A GradientTape does not, and with
oneDNN on (TensorFlow's default on CPUs with AVX-512 VNNI/BF16 or AMX) TensorFlow's graph pass
then fuses a convolution's filter gradient with its bias's BiasAddGrad into one kernel, which
sums the bias gradient in another order: the port's convolution bias gradients come out a
rounding apart from the towers' while everything else is the same bits.

  x = porting.gated_bias_add(tf.nn.conv2d(...), bias)   # in the port's conv layer
"""

import tensorflow as tf


def gated_bias_add(value, bias):
  """tf.nn.bias_add(value, bias), whose gradient is TF1's: the bias gradient is computed
  first, by its own BiasAddGrad, and the convolution below gets a gated copy of the incoming
  gradient, so nothing fuses the two. The forward pass is bias_add's (oneDNN still fuses
  conv + bias forward, as TF1's graph does). `bias` may be a variable (a Keras layer's
  weight): it is read here, outside the gradient function, which then sees only tensors."""
  return _gated_bias_add(tf.convert_to_tensor(value), tf.convert_to_tensor(bias))


@tf.custom_gradient
def _gated_bias_add(value, bias):
  def grad(upstream):
    bias_grad = tf.raw_ops.BiasAddGrad(out_backprop=upstream)
    with tf.control_dependencies([bias_grad]):
      return tf.identity(upstream), bias_grad
  return tf.nn.bias_add(value, bias), grad


def replica_mean(ctx, values):
  """The mean of `values` over the replicas of replica context `ctx`, rounded as
  `average_gradients` rounds it: the sum in replica order, then a true division by N (its
  reduce_mean's).

  Not ReduceOp.MEAN: its `/ N` is a division by a constant, which grappler's constant folding
  strength-reduces to a multiplication by 1/N (ReduceDivToReciprocalMul, for Div and RealDiv),
  and x * (1/N) rounds differently from x / N wherever N is not a power of two (measured at
  N = 3: every variable's averaged gradient off the towers' somewhere). DivNoNan, which that
  pass leaves alone, divides exactly as RealDiv does for N > 0.
  """
  # A sparse gradient (an embedding's IndexedSlices) made dense on each replica first, as
  # average_gradients' expand_dims does per tower: all-reduced as slices, its rows are
  # concatenated and summed in another order (1 ULP apart at N = 2, a wide & deep model).
  values = [tf.convert_to_tensor(v) if isinstance(v, tf.IndexedSlices) else v for v in values]
  summed = ctx.all_reduce(tf.distribute.ReduceOp.SUM, values)
  return [tf.math.divide_no_nan(v, tf.constant(ctx.num_replicas_in_sync, v.dtype))
          for v in summed]
