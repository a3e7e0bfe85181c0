"""`tf.compat.v1.layers` for TF1 code run in the kit, whichever Keras is installed.

TF1 code of the multi-GPU era calls `tf.layers.conv2d`, `tf.layers.dense`,
`tf.layers.dropout`, `tf.layers.batch_normalization`. TensorFlow 2.16+ with Keras 3 answers
"`conv2d` is not available with Keras 3": it implements those layers only in the `tf_keras`
package (Keras 2), and routes `tf.compat.v1.layers` there only under TF_USE_LEGACY_KERAS=1,
which also turns the whole process's `tf.keras` into Keras 2, the TF2 port's side included.

The kit routes `tf.compat.v1.layers` to the module TensorFlow itself routes it to
(tf_keras's `__internal__.legacy.layers`) while it builds the TF1 towers, and only then:
tower code written as `tf.compat.v1.layers.conv2d(...)`, or `tf.layers.conv2d(...)` under
`import tensorflow.compat.v1 as tf`, runs as written, and the port keeps Keras 3. Code that
binds the module at import (`from tensorflow.compat.v1 import layers`) holds TensorFlow's stub;
it writes `layers = porting.tf1_layers.layers()` (or calls it in the tower) instead.
TF1 code of the tf.contrib era (`tf.contrib.slim`, `tf.contrib.layers`) writes
`slim = porting.tf1_layers.slim()`: the tf_slim package, run on the same layers.
"""

import contextlib
import importlib
import sys

import tensorflow as tf
from tensorflow.python.util import lazy_loader

from porting.errors import PortError

TF_KERAS_LAYERS = "tf_keras.api._v1.keras.__internal__.legacy.layers"
# tf.compat.v1.nn.rnn_cell (BasicLSTMCell, MultiRNNCell, DropoutWrapper, ...): Keras 3 stubs
# as well, implemented in tf_keras beside the layers.
TF_KERAS_RNN_CELL = "tf_keras.api._v1.keras.__internal__.legacy.rnn_cell"
RNN_CELLS = ("BasicLSTMCell", "BasicRNNCell", "DeviceWrapper", "DropoutWrapper", "GRUCell",
             "LSTMCell", "LSTMStateTuple", "MultiRNNCell", "RNNCell", "ResidualWrapper")


def _install_hint():
  version = ".".join(tf.__version__.split(".")[:2])
  return (f"pip install 'tf_keras~={version}.0' (the Keras 2 that TensorFlow {version} "
          "implements its TF1 layers and RNN cells in)")


def keras_3():
  """TensorFlow's tf.compat.v1.layers is the Keras 3 stub (it has no layers)."""
  try:
    getattr(tf.compat.v1.layers, "dense")
    return False
  except AttributeError:
    return True


def layers():
  """The tf.compat.v1.layers module TF1 code expects: TensorFlow's own under Keras 2, else
  tf_keras's; a PortError naming the package where it is missing."""
  return _legacy(tf.compat.v1.layers, TF_KERAS_LAYERS, "tf.compat.v1.layers")


def rnn_cell():
  """The tf.compat.v1.nn.rnn_cell module TF1 code expects (BasicLSTMCell, MultiRNNCell,
  DropoutWrapper, ...): TensorFlow's own under Keras 2, else tf_keras's."""
  return _legacy(tf.compat.v1.nn.rnn_cell, TF_KERAS_RNN_CELL, "tf.compat.v1.nn.rnn_cell")


def _legacy(own, path, called):
  if not keras_3():
    return own
  try:
    return importlib.import_module(path)
  except ImportError:
    raise PortError(f"the TF1 code calls {called}, which TensorFlow {tf.__version__} with "
                    f"Keras 3 implements only in the tf_keras package: {_install_hint()}"
                    ) from None


# What TensorFlow's tensorflow.python.layers modules load lazily (and tf_slim imports), and
# where tf_keras 2.21 keeps them.
_LEGACY = "tf_keras.legacy_tf_layers"
_LEGACY_AT = "tf_keras.src.legacy_tf_layers"
_LEGACY_MODULES = ("", ".base", ".convolutional", ".core", ".normalization", ".pooling",
                   ".variable_scope_shim")


def slim():
  """tf_slim, the public successor of tf.contrib.slim and tf.contrib.layers (`slim.conv2d`,
  `slim.batch_norm`, `slim.l2_regularizer`, ...), for TF1 code of the contrib era. Its layers
  are TensorFlow's tensorflow.python.layers, which load tf_keras's legacy layers by a module
  path (tf_keras.legacy_tf_layers) that tf_keras keeps under tf_keras.src: the path is pointed
  at them first. A PortError naming the package where one is missing."""
  try:
    importlib.import_module(_LEGACY)
  except ImportError:
    try:
      for suffix in _LEGACY_MODULES:
        sys.modules[_LEGACY + suffix] = importlib.import_module(_LEGACY_AT + suffix)
    except ImportError:
      pass  # no tf_keras: tf_slim's import says so, below
  # tf_slim 1.1 tests `isinstance(x, ops.Tensor)` (its smart_cond: batch_norm with
  # updates_collections=None, the in-place updates of contrib-era code); TensorFlow 2.21's ops
  # module no longer has the name of the class it was, tf.Tensor.
  from tensorflow.python.framework import ops  # pylint: disable=g-import-not-at-top
  if not hasattr(ops, "Tensor"):
    ops.Tensor = tf.Tensor
  try:
    return importlib.import_module("tf_slim")
  except ImportError as e:
    if "tf_keras" in str(e):
      raise PortError("the TF1 code's tf.contrib-era layers (tf_slim) are tf.compat.v1.layers, "
                      f"which TensorFlow {tf.__version__} implements in the tf_keras package: "
                      f"{_install_hint()}") from None
    raise PortError("the TF1 code uses tf.contrib.slim / tf.contrib.layers, which TensorFlow "
                    "2 has as the tf_slim package: pip install tf-slim") from None


@contextlib.contextmanager
def routed():
  """Inside, `tf.compat.v1.layers` is layers() and `tf.compat.v1.nn.rnn_cell` rnn_cell()
  (where tf_keras is installed); outside, TensorFlow's own again. Where tf_keras is missing
  nothing changes, and a call into a stub becomes the PortError of `translated`."""
  if not keras_3():
    yield
    return
  try:
    routes = (("compat.v1", "layers", layers()), ("compat.v1.nn", "rnn_cell", rnn_cell()))
  except PortError:
    yield
    return
  # TensorFlow keeps several module objects for tf.compat.v1 (tf.compat.v1 and
  # tensorflow.compat.v1 are two once tf_keras is imported): each one's stub is replaced.
  stubs = [(m, attribute, getattr(m, attribute), module)
           for parent, attribute, module in routes
           for key, m in list(sys.modules.items())
           if key.startswith("tensorflow") and key.endswith(parent) and
           isinstance(vars(m).get(attribute) if hasattr(m, "__dict__") else None,
                      lazy_loader.KerasLazyLoader)]
  for m, attribute, _, module in stubs:
    setattr(m, attribute, module)
  try:
    yield
  finally:
    for m, attribute, stub, _ in stubs:
      setattr(m, attribute, stub)


def translated(error):
  """The PortError for TensorFlow's Keras 3 stub's AttributeError ("`conv2d` is not available
  with Keras 3") or for tf.contrib, gone from TensorFlow 2; None for any other error."""
  text = str(error)
  if isinstance(error, AttributeError) and text.endswith("has no attribute 'contrib'"):
    if tf.__version__.startswith("1."):  # recording where tf.contrib is: named otherwise
      return PortError(f"the TF1 code calls contrib through a module TensorFlow "
                       f"{tf.__version__} keeps none in ({text.split(' has no')[0]}): "
                       "tf.contrib is its name here")
    return PortError("the TF1 code calls tf.contrib, which TensorFlow 2 does not have: its "
                     "slim and layers are the tf_slim package (slim = "
                     "porting.tf1_layers.slim(); pip install tf-slim), the rest has TF2 "
                     "forms (MIGRATION.md); or record the towers where their TensorFlow runs "
                     "(python -m porting record)")
  if isinstance(error, AttributeError) and "is not available with Keras 3" in text:
    name = text.split("`")[1] if "`" in text else "a layer"
    module, function = (("tf.compat.v1.nn.rnn_cell", "rnn_cell") if name in RNN_CELLS else
                        ("tf.compat.v1.layers", "layers"))
    parent = module.rsplit(".", 1)[0].replace("tf.", "tensorflow.", 1)
    return PortError(f"the TF1 code calls {module}.{name}, which TensorFlow "
                     f"{tf.__version__} with Keras 3 implements only in the tf_keras package: "
                     f"{_install_hint()}; a module-level `from {parent} import {function}` "
                     "keeps TensorFlow's stub (the kit routes the module while the towers "
                     f"build): use porting.tf1_layers.{function}()")
  return None
