"""Whether TensorFlow has a filesystem for a path's URL scheme here (hdfs:// and s3:// come
with plug-ins; a typo has none): asked before anything reads or writes the path, so that the
answer is one line, not an UnimplementedError from deep inside a reader."""

import os
import re

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def is_url(path):
  """Whether `path` has a URL scheme (gs://, file://, ...), not only a local path's form."""
  return bool(_SCHEME.match(path or ""))


def missing(path):
  """Why TensorFlow cannot reach `path` here (one line), or None: a local path, or a URL of
  a scheme it has a filesystem for."""
  match = _SCHEME.match(path or "")
  if not match:
    return None
  import tensorflow as tf  # pylint: disable=g-import-not-at-top  # only for a URL
  schemes = tf.io.gfile.get_registered_schemes()
  if match[1] in schemes:
    return None
  have = ", ".join(f"{s}://" for s in sorted(schemes) if s)
  return (f"TensorFlow has no filesystem for {match[1]}:// here (it has {have} and local "
          "paths); install the plug-in that adds it, or give a path it has")


def absent_locally(path):
  """Whether `path` is a local path (no URL scheme) with nothing there: no file or folder, nor
  a checkpoint prefix's .index. Pure Python: a binary asks it before TensorFlow is imported
  (~4 s on 2 cores, ~10 s on a busy box), so a mistyped path is answered at once."""
  if not path or _SCHEME.match(path):
    return False
  return not os.path.exists(path) and not os.path.exists(path + ".index")
