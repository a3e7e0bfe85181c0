"""`GatedConv2D`: keras.layers.Conv2D whose bias gradient is TF1's gated one.

Keras 3's Conv2D adds its bias with `ops.add`; under a GradientTape, with oneDNN on
(TensorFlow's default on CPUs with AVX-512 VNNI/BF16 or AMX), TensorFlow's graph pass fuses
the convolution's filter gradient with the bias gradient into one kernel, which sums the bias
gradient in another order than TF1's gated `compute_gradients` (8 ULPs on a cifarnet's conv1
bias at step 0). The same layer with its bias added by `gated_bias_add` is the towers' bits;
its weights, names and checkpoints are Conv2D's. With oneDNN off both are the same bits.
"""

import keras

from tfbits.gates import gated_bias_add


class GatedConv2D(keras.layers.Conv2D):
  """keras.layers.Conv2D, its bias added as tf.nn.bias_add with TF1's gated gradient
  (channels_last only, as TF1's CPU kernels were)."""

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    if self.data_format != "channels_last":
      raise ValueError("GatedConv2D adds its bias as tf.nn.bias_add on channels_last "
                       f"tensors; got data_format={self.data_format!r}")

  def call(self, inputs):
    outputs = self.convolution_op(inputs, self.kernel)
    if self.use_bias:
      outputs = gated_bias_add(outputs, self.bias)
    return self.activation(outputs) if self.activation is not None else outputs
