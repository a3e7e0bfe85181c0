"""strategies.predict's work: a model from --model, then one answer per image file."""

import os
import re
import sys

import numpy as np
import tensorflow as tf

from cifar10 import checkpoints
from cifar10 import serving
from cifar10.errors import UsageError
from harness.folders import recovery
from harness.folders import run_folder
from strategies import saved_model

SAVED_MODEL = "saved_model.pb"
# The first bytes of what tf.io.decode_image reads (WebP: "RIFF", then "WEBP" at byte 8).
IMAGE_MAGIC = (b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n", b"GIF87a", b"GIF89a", b"BM", b"RIFF")


def _version_folder(path):
  """The SavedModel folder `path` names (itself, or its newest numbered version), or None."""
  if tf.io.gfile.exists(os.path.join(path, SAVED_MODEL)):
    return path
  if not tf.io.gfile.isdir(path):
    return None
  versions = [int(n.rstrip("/")) for n in tf.io.gfile.listdir(path) if n.rstrip("/").isdigit()
              and tf.io.gfile.exists(os.path.join(path, n.rstrip("/"), SAVED_MODEL))]
  return os.path.join(path, str(max(versions))) if versions else None


def load(model):
  """A function of image bytes (string [batch]) to the signatures' outputs, from --model."""
  folder = _version_folder(model)
  if folder:
    try:
      return tf.saved_model.load(folder).signatures["classify_encoded"]
    except Exception as e:  # pylint: disable=broad-except  # TF raises many kinds here
      raise UsageError(f"cannot load the SavedModel {folder}: "
                       f"{str(e).splitlines()[0][:200]}") from None
  if not tf.io.gfile.exists(model) and not tf.io.gfile.exists(model + ".index"):
    raise UsageError(f"--model={model}: no such folder or file (an export_dir, a version "
                     "folder of one, or a checkpoint folder or prefix)")
  if tf.io.gfile.isdir(model) and not recovery.has_checkpoint(model):
    raise UsageError(f"--model={model} holds neither a SavedModel (a version folder with "
                     f"{SAVED_MODEL}) nor a checkpoint")
  state = checkpoints.read(model, kinds=("ema", "step"))  # UsageError if it is none
  module = saved_model.ServingModel(state.averages)
  return lambda image_bytes: module.serve_encoded(image_bytes)


def _line(path, probabilities, top_k):
  best = np.argsort(-probabilities, kind="stable")[:top_k]
  return f"{path}: " + ", ".join(f"{serving.CLASS_NAMES[i]} {probabilities[i]:.3f}"
                                 for i in best)


def run(model, files, top_k):
  """Prints a line per file; returns the exit status (2 if a file had no answer)."""
  classify = load(model)
  status = 0
  for path in files:
    try:
      with tf.io.gfile.GFile(path, "rb") as f:
        data = f.read()
      if not data.startswith(IMAGE_MAGIC) and data[8:12] != b"WEBP":
        raise ValueError("not a JPEG, PNG, GIF, BMP or WebP file")
      # Decoded eagerly first: an error is then the decoder's own words, without the
      # function's "Graph execution error".
      tf.io.decode_image(data, channels=3, expand_animations=False)
    except (OSError, ValueError, tf.errors.OpError) as e:
      reason = re.sub(r"\{\{function_node [^}]*\}\} ", "", run_folder.error_words(e))[:200]
      print(f"error: {path}: {reason}", file=sys.stderr, flush=True)
      status = 2
      continue
    out = classify(image_bytes=tf.constant([data]))
    print(_line(path, out["probabilities"].numpy()[0], top_k), flush=True)
  return status
