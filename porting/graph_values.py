"""Values a graph holds where the code left them: a constant the graph computes from constants
alone, and the tensor behind the casts, identities and reads on its way (what
porting.layer_settings reads a layer's settings from)."""

import numpy as np
import tensorflow as tf

PASS_THROUGH = ("Cast", "Identity", "ReadVariableOp")
_FOLDED = {"Sub": np.subtract, "Mul": np.multiply, "Add": np.add, "AddV2": np.add}


def constant(tensor, depth=4):
  """A scalar the graph computes from constants alone (tf.layers' fused batch norm writes
  its decay as Sub(1, momentum)), or None."""
  op = tensor.op
  if op.type == "Const":
    value = tf.get_static_value(tensor)
    return None if value is None or np.ndim(value) else float(value)
  if depth and op.type in PASS_THROUGH[:2] and op.inputs:
    return constant(op.inputs[0], depth - 1)
  if depth and op.type in _FOLDED and len(op.inputs) == 2:
    a, b = (constant(t, depth - 1) for t in op.inputs)
    if a is not None and b is not None:
      dtype = tensor.dtype.as_numpy_dtype
      return float(_FOLDED[op.type](dtype(a), dtype(b)))
  return None


def source(tensor):
  """The op behind Cast/Identity/ReadVariableOp chains."""
  while tensor.op.type in PASS_THROUGH and tensor.op.inputs:
    tensor = tensor.op.inputs[0]
  return tensor


def through(tensor):
  """The value behind Cast/Identity, and behind an assign's own output (a ref variable's
  AssignSub returns the variable: the value read is the one just assigned)."""
  while tensor.op.type in ("Cast", "Identity", "AssignSub", "AssignAdd") and tensor.op.inputs:
    tensor = tensor.op.inputs[0]
  return tensor
