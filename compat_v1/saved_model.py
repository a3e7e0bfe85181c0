"""The TF1 SavedModel: a graph, a Session, `tf.compat.v1.saved_model.Builder` with PREDICT
SignatureDefs, as a TF1 team's export code was written (`SavedModelBuilder`, `simple_save`).

The graph has the model's variables (get_variable under the TF1 scopes, no initial values in
it), assigned the checkpoint's values through placeholders (so no value becomes a graph
constant), and two signatures over cifar10.serving with the keys and names of the TF2
exporter's (strategies.saved_model): the two SavedModels compute the same outputs.
"""

import tensorflow as tf
from tensorflow.core.protobuf import meta_graph_pb2

from cifar10 import model
from cifar10 import serving

v1 = tf.compat.v1


def _info(tensor):
  # What v1.saved_model.utils.build_tensor_info writes, without its deprecation warning.
  return meta_graph_pb2.TensorInfo(name=tensor.name, dtype=tensor.dtype.as_datatype_enum,
                                   tensor_shape=tensor.shape.as_proto())


def _signature(inputs, outputs):
  return v1.saved_model.signature_def_utils.build_signature_def(
      inputs={k: _info(t) for k, t in inputs.items()},
      outputs={k: _info(t) for k, t in outputs.items()},
      method_name=v1.saved_model.signature_constants.PREDICT_METHOD_NAME)


def save(weights, path):
  """Writes the SavedModel of `weights` ({TF1 name: array}) to `path`."""
  graph = tf.Graph()
  with graph.as_default():
    params, feeds = {}, {}
    for spec in model.SPECS:
      scope, leaf = spec.name.split("/")
      with v1.variable_scope(scope):
        params[spec.name] = v1.get_variable(leaf, spec.shape, tf.float32,
                                            v1.zeros_initializer(), trainable=False)
      feeds[spec.name] = v1.placeholder(tf.float32, spec.shape)
    assign = tf.group(*[params[n].assign(feeds[n]) for n in params])
    images = v1.placeholder(tf.uint8, serving.IMAGES.shape, "images")
    image_bytes = v1.placeholder(tf.string, serving.IMAGE_BYTES.shape, "image_bytes")
    with tf.name_scope("serving_default"):
      from_images = serving.predictions(params, images)
    with tf.name_scope("classify_encoded"):
      from_bytes = serving.predictions(params, serving.decode(image_bytes))
    with v1.Session(graph=graph) as sess:
      sess.run(v1.global_variables_initializer())
      sess.run(assign, {feeds[n]: weights[n] for n in params})
      builder = v1.saved_model.Builder(path)
      builder.add_meta_graph_and_variables(
          sess, [v1.saved_model.tag_constants.SERVING],
          signature_def_map={
              "serving_default": _signature({"images": images}, from_images),
              "classify_encoded": _signature({"image_bytes": image_bytes}, from_bytes)},
          strip_default_attrs=True)
      builder.save()
