"""The TF2 SavedModel: a tf.Module holding the weights, with tf.function signatures.

`ServingModel(weights)` holds one tf.Variable per weight (the values of a checkpoint's moving
averages, or its raw weights) and two concrete functions over cifar10.serving:
`serve(images)` (serving_default) and `serve_encoded(image_bytes)` (classify_encoded).
`tf.saved_model.save(model, path, signatures=model.signatures())` writes it; strategies.predict
calls the same functions on a model built from a checkpoint, without saving it.
"""

import tensorflow as tf

from cifar10 import model
from cifar10 import serving

SIGNATURES = ("serving_default", "classify_encoded")


class ServingModel(tf.Module):
  """The model's weights and its two serving functions."""

  def __init__(self, weights):
    super().__init__(name="cifar10")
    # Named as the TF1 variables, so the SavedModel's variables read like the checkpoints'.
    self.params = {n: tf.Variable(weights[n], trainable=False, name=n)
                   for n in model.VARIABLE_NAMES}

  @tf.function(input_signature=[serving.IMAGES], autograph=False)
  def serve(self, images):
    return serving.predictions(self.params, images)

  @tf.function(input_signature=[serving.IMAGE_BYTES], autograph=False)
  def serve_encoded(self, image_bytes):
    return serving.predictions(self.params, serving.decode(image_bytes))

  def signatures(self):
    return dict(zip(SIGNATURES, (self.serve.get_concrete_function(),
                                 self.serve_encoded.get_concrete_function())))


def save(weights, path):
  """Writes the SavedModel of `weights` ({TF1 name: array}) to `path`."""
  module = ServingModel(weights)
  tf.saved_model.save(module, path, signatures=module.signatures())
