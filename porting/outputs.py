"""Where a conversion writes its checkpoint: never through a planted link, never over what is
there unless asked, never half.

`written(prefix, write, overwrite)` refuses a symbolic link at the prefix's folder or at any
of its files (TensorFlow's writers follow links: the file a link names would be overwritten)
and an existing checkpoint at `prefix` unless `overwrite`; it has `write(temporary prefix)`
write the checkpoint under a fresh name beside it and renames its files to `prefix` only once
it is whole, so a failed or killed conversion leaves no `prefix` files (and the team's own
checkpoint, where it is overwritten, stays whole until the new one is). Nothing touches the
folder's `checkpoint` index: the converted checkpoint is restored by its path, and the team's
own latest checkpoint stays its latest. Every file goes through tf.io.gfile.
"""

import os
import posixpath
import uuid

import tensorflow as tf

from porting.errors import PortError


def _local(path):
  return "://" not in path


def _files(prefix):
  """The files of the checkpoint at `prefix` (its .index and .data-* shards)."""
  folder, base = posixpath.split(prefix)
  if not tf.io.gfile.isdir(folder or "."):
    return []
  return sorted(posixpath.join(folder, name) for name in tf.io.gfile.listdir(folder or ".")
                if name == base + ".index" or name.startswith(base + ".data-"))


def _refuse_links(prefix):
  if not _local(prefix):
    return  # object stores and ram:// have no links
  folder, base = os.path.split(os.path.abspath(prefix))
  links = [p for p in (folder,) if os.path.islink(p)]
  if os.path.isdir(folder):
    links += [os.path.join(folder, n) for n in os.listdir(folder)
              if n.startswith(base + ".") and os.path.islink(os.path.join(folder, n))]
  if links:
    raise PortError(f"a symbolic link is planted at {links[0]}: refused (TensorFlow's writers "
                    "follow links, and the file it names would be overwritten); remove it")


def written(prefix, write, overwrite=False):
  """Writes a checkpoint at `prefix` through `write(temporary prefix)`; returns `prefix`."""
  prefix = prefix.rstrip("/")
  _refuse_links(prefix)
  existing = _files(prefix)
  if existing and not overwrite:
    raise PortError(f"a checkpoint is already at {prefix} ({posixpath.basename(existing[0])}):"
                    " give another prefix, or --overwrite to replace it")
  folder = posixpath.dirname(prefix)
  temporary = posixpath.join(folder, f".{posixpath.basename(prefix)}.tmp-{uuid.uuid4().hex}")
  try:
    if folder:
      tf.io.gfile.makedirs(folder)
    write(temporary)
    made = [prefix + path[len(temporary):] for path in _files(temporary)]
    for path in _files(temporary):  # each file replaced whole (a rename), the index last
      if not path.endswith(".index"):
        tf.io.gfile.rename(path, prefix + path[len(temporary):], overwrite=True)
    tf.io.gfile.rename(temporary + ".index", prefix + ".index", overwrite=True)
    for old in existing:  # what the new checkpoint did not replace (another shard count)
      if old not in made:
        tf.io.gfile.remove(old)
  except tf.errors.OpError as e:
    raise PortError(f"cannot write the checkpoint {prefix}: {str(e).splitlines()[0]}") from None
  finally:
    for path in _files(temporary):
      tf.io.gfile.remove(path)
  return prefix
