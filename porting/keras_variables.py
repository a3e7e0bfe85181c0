"""The TF2 side's variables by name: a Keras 3 variable's path or a tf.Variable's name, the
model's variables in creation order, a Keras optimizer's slots by the variable they belong
to, and the tf.Variable behind a Keras variable."""

import numpy as np
import tensorflow as tf

from porting.errors import PortError


def variables_of(model):
  """The model's variables in creation order: Keras weights, or a tf.Module's variables."""
  found = getattr(model, "weights", None)
  if found is None:
    found = getattr(model, "variables", None)
  if not found:
    raise PortError("build_model() returned a model with no variables (return a built Keras "
                    "model or layer, or a tf.Module)")
  return list(found)


def variable_name(variable):
  """'conv2d/kernel': a Keras variable's path, or a tf.Variable's name without ':0'."""
  path = getattr(variable, "path", None)
  return path if path else variable.name.rsplit(":", 1)[0]


def numpy_of(value):
  return np.asarray(value.numpy() if hasattr(value, "numpy") else value)


def slot_variables(optimizer, trainable):
  """{(variable name, slot kind): optimizer variable}: Keras names a slot
  '<variable path with _ for />_<kind>' (e.g. 'conv2d_kernel_momentum')."""
  slots = {}
  keys = {variable_name(v).replace("/", "_"): variable_name(v) for v in trainable}
  for slot in optimizer.variables:
    name = getattr(slot, "name", "")
    # The longest owner whose key starts the name: 'dense_kernel_scale_momentum' belongs to
    # dense/kernel_scale, not to dense/kernel.
    owners = [key for key in keys if name.startswith(key + "_")]
    if owners:
      key = max(owners, key=len)
      slots[(keys[key], name[len(key) + 1:])] = slot
  return slots


def tf_variable(variable):
  """A Keras variable's tf.Variable (its `value`); a tf.Variable itself (whose `value` is a
  method)."""
  return variable.value if hasattr(variable, "path") else variable


def handles_of(variables):
  """{id(a variable handle): the variable's name}, a mirrored variable's components too."""
  handles = {}
  for v in variables:
    inner = tf_variable(v)
    for component in getattr(inner, "values", (inner,)):
      handles[id(component.handle)] = variable_name(v)
  return handles


def regularizer_gradients(trainable):
  """{name: the gradient of its regularizer at its current value} of the variables that
  carry one (a Keras layer's kernel_regularizer): what the TF2 side's regularization adds."""
  out = {}
  for v in trainable:
    regularizer = getattr(v, "regularizer", None)
    if regularizer is not None:
      weights = tf.constant(numpy_of(v))
      with tf.GradientTape() as tape:
        tape.watch(weights)
        penalty = regularizer(weights)
      out[variable_name(v)] = numpy_of(tape.gradient(penalty, weights))
  return out
