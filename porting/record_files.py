"""A record folder's files (porting.record): record.json's header and the .npz arrays, every
one through tf.io.gfile, and what makes a header unreadable."""

import io
import zipfile

import numpy as np
import tensorflow as tf

from porting.errors import PortError

FORMAT = 1
HEADER = "record.json"


def save(path, arrays):
  buffer = io.BytesIO()
  np.savez(buffer, **arrays)
  with tf.io.gfile.GFile(path, "wb") as f:
    f.write(buffer.getvalue())


def load(path):
  try:
    with tf.io.gfile.GFile(path, "rb") as f:
      return dict(np.load(io.BytesIO(f.read())))
  except (tf.errors.OpError, OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
    raise PortError(f"cannot read the record's {path}: {str(e).splitlines()[0]}") from None


def prefixed(prefix, values):
  return {f"{prefix}/{k}": np.asarray(v) for k, v in values.items()}


def unprefixed(prefix, arrays):
  return {k[len(prefix) + 1:]: v for k, v in arrays.items() if k.startswith(prefix + "/")}


def damage(header):
  """What is wrong with a record.json's contents (None: nothing): every field `Recorded`
  reads, of the type it reads, the learning rates one a step."""
  if not isinstance(header, dict):
    return f"a JSON {type(header).__name__}, not an object"
  kinds = {"format": int, "replicas": int, "steps": int, "learning_rates": list,
           "variables": list, "trainable": list, "optimizer_class": str, "optimizer": dict,
           "slot_kinds": list, "facts": dict, "machine": str, "settings": dict}
  for key, kind in kinds.items():
    if not isinstance(header.get(key), kind):
      return f"{key} is {'missing' if key not in header else type(header[key]).__name__}"
  if header["steps"] < 1 or header["replicas"] < 1:
    return f"{header['steps']} steps of {header['replicas']} replicas"
  if len(header["learning_rates"]) != header["steps"] or not all(
      isinstance(r, (int, float)) for r in header["learning_rates"]):
    return (f"{len(header['learning_rates'])} learning rate(s) for {header['steps']} "
            "step(s)")
  if not all(isinstance(v, list) and len(v) == 2 and isinstance(v[0], str)
             and isinstance(v[1], list) for v in header["variables"]):
    return "variables are not [name, shape] pairs"
  order = header.get("use_order", [])
  if not isinstance(order, list) or not all(isinstance(n, str) for n in order):
    return "use_order is not a list of variable names"
  own = header.get("own_methods", [])  # both optional: records before them lack them
  if not isinstance(own, list) or not set(own) <= {"compute_gradients", "apply_gradients"}:
    return "own_methods is not a list of the optimizer's methods"
  if not isinstance(header.get("beside"), (str, type(None))):
    return "beside is not a line"
  settings = header["settings"]
  for key in ("dropout", "batch_norm", "moving", "regularized"):
    if key not in settings:
      return f"settings lack {key}"
  return None
