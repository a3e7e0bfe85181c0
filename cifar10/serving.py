"""What an exported model computes: client images in, the evaluators' logits and the classes
out. Both exporters (strategies.export, the TF2 way; compat_v1.export, the TF1 way) build their
signatures from these functions, so the two SavedModels compute the same ops.

Signatures (`saved_model_cli show --all` lists them; docs/serving.md):

  serving_default   images: uint8 [batch, 32, 32, 3], CIFAR-10's own images, any batch
  classify_encoded  image_bytes: string [batch], each a PNG or JPEG file's bytes, any size:
                    decoded to RGB and, unless 32 x 32 already, resized to 32 x 32
                    (tf.image.resize, bilinear with antialiasing) and rounded to uint8

both returning
  logits         float32 [batch, 10]
  probabilities  float32 [batch, 10], softmax of the logits
  classes        int64 [batch], the top class
  class_names    string [batch], its CIFAR-10 name

Each image is preprocessed alone, as the evaluators do it in their tf.data pipeline (the
central 24 x 24 crop, then per-image standardization: input_pipeline.eval_image), so on the
same batch of test images the logits are the evaluators' to the bit.
"""

import tensorflow as tf

from cifar10 import input_pipeline
from cifar10 import model

CLASS_NAMES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
               "truck")
IMAGE_SHAPE = (32, 32, 3)  # what a client sends: a CIFAR-10 image
IMAGES = tf.TensorSpec([None, *IMAGE_SHAPE], tf.uint8, name="images")
IMAGE_BYTES = tf.TensorSpec([None], tf.string, name="image_bytes")
OUTPUTS = ("logits", "probabilities", "classes", "class_names")


def preprocess(images):
  """float32 [batch, 24, 24, 3] of uint8 [batch, 32, 32, 3], one image at a time (the
  evaluators' per-example tf.data map: a batched standardization may round otherwise)."""
  return tf.map_fn(input_pipeline.eval_image, images,
                   fn_output_signature=tf.TensorSpec([24, 24, 3], tf.float32))


def predictions(params, images):
  """The signatures' outputs for uint8 `images`, with the model's weights `params`
  ({TF1 name: variable or tensor})."""
  logits = model.inference(params, preprocess(images))
  classes = tf.argmax(logits, axis=1)
  return {"logits": logits, "probabilities": tf.nn.softmax(logits), "classes": classes,
          "class_names": tf.gather(tf.constant(CLASS_NAMES), classes)}


def _decoded(encoded):
  image = tf.io.decode_image(encoded, channels=3, expand_animations=False)
  image.set_shape([None, None, 3])
  height, width = tf.shape(image)[0], tf.shape(image)[1]
  resized = tf.cast(tf.round(tf.clip_by_value(
      tf.image.resize(image, IMAGE_SHAPE[:2], antialias=True), 0.0, 255.0)), tf.uint8)
  same = tf.logical_and(tf.equal(height, IMAGE_SHAPE[0]), tf.equal(width, IMAGE_SHAPE[1]))
  return tf.cond(same, lambda: tf.reshape(image, IMAGE_SHAPE), lambda: resized)


def decode(image_bytes):
  """uint8 [batch, 32, 32, 3] of PNG or JPEG files' bytes (string [batch])."""
  return tf.map_fn(_decoded, image_bytes,
                   fn_output_signature=tf.TensorSpec(IMAGE_SHAPE, tf.uint8))
