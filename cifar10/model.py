"""The CIFAR-10 CNN of the TF1 tutorial as pure functions over a mapping of variables.

`initial_values(seed)` gives concrete numpy arrays keyed by the TF1 variable names
(`conv1/weights` ... `softmax_linear/biases`); each trainer turns them into its own variables
(tf.Variable under a strategy scope, or tf.compat.v1.get_variable in a graph), so two trainers
given the same seed start bit-identical. `inference(params, images)` and `weight_decay(params)`
accept any mapping from those names to tensors or variables.
"""

import functools
import math

import numpy as np
import tensorflow as tf

from tfbits.gates import gated_bias_add


class VariableSpec:
  """Shape, initializer and L2 weight decay of one variable, as in `cifar10.inference`."""

  def __init__(self, name, shape, init, stddev=0.0, wd=0.0):
    self.name, self.shape, self.init, self.stddev, self.wd = name, tuple(shape), init, stddev, wd

  def __repr__(self):
    return f"VariableSpec({self.name!r}, {self.shape})"


def _layer(scope, shape, stddev, bias, wd=0.0):
  return [VariableSpec(f"{scope}/weights", shape, "truncated_normal", stddev=stddev, wd=wd),
          VariableSpec(f"{scope}/biases", shape[-1:], bias)]


# After two stride-2 SAME pools a 24x24 crop is 6x6x64 = 2304 features.
_LOCAL3_IN = 6 * 6 * 64

SPECS = tuple(
    _layer("conv1", [5, 5, 3, 64], 5e-2, 0.0)
    + _layer("conv2", [5, 5, 64, 64], 5e-2, 0.1)
    + _layer("local3", [_LOCAL3_IN, 384], 0.04, 0.1, wd=0.004)
    + _layer("local4", [384, 192], 0.04, 0.1, wd=0.004)
    + _layer("softmax_linear", [192, 10], 1 / 192.0, 0.0))
VARIABLE_NAMES = tuple(s.name for s in SPECS)
NUM_PARAMETERS = sum(math.prod(s.shape) for s in SPECS)


def _truncated_normal(rng, shape, stddev):
  # tf.truncated_normal_initializer: normal samples, redrawn while beyond two stddevs.
  out = rng.standard_normal(shape)
  bad = np.abs(out) > 2.0
  while bad.any():
    out[bad] = rng.standard_normal(int(bad.sum()))
    bad = np.abs(out) > 2.0
  return (out * stddev).astype(np.float32)


def initial_values(seed):
  """Initial weights for `seed`: {name: float32 ndarray}, the same on every machine and side.

  Each variable draws from its own stream keyed by (seed, position in SPECS), so values do not
  depend on creation order. Pure numpy on purpose: it works in eager, tf.function and v1 graph
  code alike and never adds ops to a graph. The arrays are the caller's own (copies).
  """
  return {name: value.copy() for name, value in _drawn(int(seed)).items()}


@functools.lru_cache(maxsize=4)
def _drawn(seed):
  # 1.07M draws with redraws take ~37 ms; a trainer, its evaluator and its checkpoint reader
  # ask again for the same seed (measured: 210 calls, 7.9 s of the test suite's fast tier).
  values = {}
  for index, spec in enumerate(SPECS):
    if spec.init == "truncated_normal":
      rng = np.random.Generator(np.random.Philox(np.random.SeedSequence([seed, index])))
      values[spec.name] = _truncated_normal(rng, spec.shape, spec.stddev)
    else:
      values[spec.name] = np.full(spec.shape, spec.init, dtype=np.float32)
  for value in values.values():
    value.flags.writeable = False  # the cached draw itself is never handed out
  return values


# The convolutions' biases: gated_bias_add (tfbits.gates), tf.nn.bias_add with the gradient
# the original's graph computes. Backward, TensorFlow's oneDNN graph pass fuses a conv's
# Conv2DBackpropFilter with the BiasAddGrad of its bias into one kernel that sums the bias
# gradient in another order, but only when both read the same gradient tensor (measured:
# conv1/biases off by 5e-9, 4e-7 relative, TF2 against v1). The original's
# `Optimizer.compute_gradients` (gate_gradients=GATE_OP) hands the conv a gated copy, so its
# graph never fuses; a GradientTape in a tf.function does. The gate gives every trainer (tape
# or compute_gradients, with or without oneDNN) the original's unfused BiasAddGrad. The forward
# pass still fuses conv, bias and relu, as the original's does.


def _lrn(x):
  # In float32 whatever the compute dtype: LRN has a float32 kernel everywhere, but no
  # bfloat16 one on CPU and no float16 one on GPU (a float16 LRN would fall back to the CPU).
  y = tf.nn.lrn(tf.cast(x, tf.float32), depth_radius=4, bias=1.0, alpha=0.001 / 9.0,
                beta=0.75)
  return tf.cast(y, x.dtype)


def _pool(x):
  return tf.nn.max_pool2d(x, ksize=3, strides=2, padding="SAME")


# The layers whose outputs the original summarised (`_activation_summary`), in order.
ACTIVATION_LAYERS = ("conv1", "conv2", "local3", "local4", "softmax_linear")


def inference(params, images, compute_dtype=tf.float32, activations=None):
  """Logits [batch, 10] (float32) for images [batch, 24, 24, 3]; the batch comes from `images`.

  With compute_dtype float16 (the original `--use_fp16`) activations and a float16 copy of each
  weight are used in the forward pass while the variables stay float32, so the gradients and
  the update remain float32. A dict passed as `activations` receives each layer's output
  under its name in ACTIVATION_LAYERS (for the original's activation summaries).
  """
  out = {} if activations is None else activations
  p = {name: tf.cast(params[name], compute_dtype) for name in VARIABLE_NAMES}
  x = tf.cast(images, compute_dtype)
  # bias_add, as the original: its gradient (BiasAddGrad) sums over batch and space in
  # another order than the gradient of `+` (a broadcasting Sum), and only BiasAddGrad gives
  # the original's conv bias gradients to the bit (`+` differed by up to 7e-7 relative).
  out["conv1"] = tf.nn.relu(gated_bias_add(tf.nn.conv2d(x, p["conv1/weights"], 1, "SAME"),
                                           p["conv1/biases"]))
  x = _lrn(_pool(out["conv1"]))
  out["conv2"] = tf.nn.relu(gated_bias_add(tf.nn.conv2d(x, p["conv2/weights"], 1, "SAME"),
                                           p["conv2/biases"]))
  x = tf.reshape(_pool(_lrn(out["conv2"])), [tf.shape(x)[0], _LOCAL3_IN])
  out["local3"] = tf.nn.relu(tf.matmul(x, p["local3/weights"]) + p["local3/biases"])
  out["local4"] = tf.nn.relu(tf.matmul(out["local3"], p["local4/weights"]) + p["local4/biases"])
  out["softmax_linear"] = (tf.matmul(out["local4"], p["softmax_linear/weights"])
                           + p["softmax_linear/biases"])
  return tf.cast(out["softmax_linear"], tf.float32)
