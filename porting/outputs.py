"""Where the kit writes: a conversion's checkpoint, a record's folder; never through a planted
link, never over what is there unless asked, never half.

`written(prefix, write, overwrite, check)` refuses a symbolic link at the prefix's folder or
at any of its files (TensorFlow's writers follow links: the file a link names would be
overwritten) and an existing checkpoint at `prefix` unless `overwrite`; it has `write(temporary
prefix)` write the checkpoint under a fresh name beside it and `check` read it back, and
replaces `prefix` only once it is whole: the team's own checkpoint, where it is overwritten,
is whole until the new one is, then absent (no .index), then the new one whole, whatever stops
the conversion, and the next conversion to `prefix` finishes a replacement stopped midway.
Nothing touches the folder's `checkpoint` index: the converted checkpoint is restored by its
path, and the team's own latest checkpoint stays its latest. Every file goes through tf.io.gfile.
"""

import contextlib
import os
import posixpath
import re
import sys
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


class Ops:
  """The filesystem steps of a replacement, one method each: tests stop one at every step as
  a kill would (tests/test_porting_outputs.py)."""

  rename = staticmethod(lambda a, b: tf.io.gfile.rename(a, b, overwrite=True))
  remove = staticmethod(tf.io.gfile.remove)
  mark = staticmethod(lambda path: _mark(path))


def _mark(path):
  with tf.io.gfile.GFile(path, "w") as f:
    f.write("whole\n")  # not empty: GFile makes its file at the first write


OPS = Ops()


def written(prefix, write, overwrite=False, check=None):
  """Writes a checkpoint at `prefix` through `write(temporary prefix)`, has `check(temporary
  prefix)` read it back, and only then replaces `prefix` with it; returns `prefix`.

  Once the new checkpoint is whole and checked, a marker (`.<name>.tmp-<tag>.whole`) says so,
  and `_finish` takes the replacement to its end from any point: the old `.index` goes first
  (a Saver then finds no checkpoint there, never new data under the old index), then its data,
  then the new files move in, the `.index` last. At every instant `prefix` is the old
  checkpoint whole, none, or the new one whole; a conversion stopped midway is finished by the
  next one that writes to `prefix` (`recover`)."""
  prefix = prefix.rstrip("/")
  _refuse_links(prefix)
  recover(prefix)
  existing = _files(prefix)
  if existing and not overwrite:
    raise PortError(f"a checkpoint is already at {prefix} ({posixpath.basename(existing[0])}):"
                    " give another prefix, or --overwrite to replace it")
  folder = posixpath.dirname(prefix)
  temporary = posixpath.join(folder, f".{posixpath.basename(prefix)}.tmp-{uuid.uuid4().hex}")
  committed = False
  try:
    if folder:
      tf.io.gfile.makedirs(folder)
    write(temporary)
    if check is not None:
      try:
        check(temporary)
      except PortError as e:  # said of the checkpoint asked for, which is not written
        raise PortError(str(e).replace(temporary, prefix)) from None
    OPS.mark(temporary + ".whole")
    committed = True
    _finish(prefix, temporary)
  except tf.errors.OpError as e:
    raise PortError(f"cannot write the checkpoint {prefix}: {str(e).splitlines()[0]}") from None
  finally:
    if not committed:
      for path in _files(temporary):
        OPS.remove(path)
  return prefix


def _finish(prefix, temporary):
  """The marked replacement of `prefix` by `temporary`, from wherever a stop left it. Two
  phases, each marked: the old checkpoint removed (its .index first), then the new files
  moved in (the .index last); the second marker keeps a rerun from taking new shards already
  moved for old ones."""
  if not tf.io.gfile.exists(temporary + ".moving"):
    for path in sorted(_files(prefix), key=lambda p: not p.endswith(".index")):
      OPS.remove(path)
    OPS.mark(temporary + ".moving")
  for path in _files(temporary):
    if not path.endswith(".index"):
      OPS.rename(path, prefix + path[len(temporary):])
  if tf.io.gfile.exists(temporary + ".index"):
    OPS.rename(temporary + ".index", prefix + ".index")
  for marker in (".whole", ".moving"):
    if tf.io.gfile.exists(temporary + marker):
      OPS.remove(temporary + marker)


def recover(prefix):
  """Finishes a replacement of `prefix` a conversion marked and did not end, and removes the
  files of one stopped before its checkpoint was whole; each said in a line."""
  folder, base = posixpath.split(prefix)
  if not tf.io.gfile.isdir(folder or "."):
    return
  names = tf.io.gfile.listdir(folder or ".")
  marked = sorted({n.rsplit(".", 1)[0] for n in names if n.startswith(f".{base}.tmp-")
                   and n.endswith((".whole", ".moving"))})
  for name in marked:
    _finish(prefix, posixpath.join(folder, name))
    print(f"finished replacing {prefix}: a conversion stopped midway had written the new "
          "checkpoint whole", file=sys.stderr)
  left = sorted({n.split(".index")[0].split(".data-")[0] for n in names
                 if n.startswith(f".{base}.tmp-") and not n.endswith((".whole", ".moving"))}
                - set(marked))
  for name in left:
    for path in _files(posixpath.join(folder, name)):
      OPS.remove(path)
    print(f"removed {posixpath.join(folder, name)}.*: a conversion stopped before its "
          "checkpoint was whole", file=sys.stderr)


# Record folders (porting.record): the files of a record but its header.
_RECORD_PIECES = r"start\.npz|regularization\.npz|step-\d+\.npz"


@contextlib.contextmanager
def writing(path):
  """A write the filesystem refuses (read-only, full, a file in the way) as one PortError
  naming `path`, the output asked for: never "the port raised"."""
  try:
    yield
  except (tf.errors.OpError, OSError) as e:
    raise PortError(f"cannot write {path}: "
                    f"{(str(e).splitlines() or [type(e).__name__])[0]}") from None


def _split(path):
  """(parent, name) of `path`, the parent ending in "/" (or empty): `ram://x`'s is `ram://`,
  where posixpath's would be `ram:`."""
  cut = path.rfind("/") + 1
  return path[:cut], path[cut:]


def temporary_folder(path):
  parent, name = _split(path)
  return f"{parent}.{name}.tmp-{uuid.uuid4().hex[:12]}"


def record_target(path, header):
  """A PortError unless `path` can become a record folder: absent, or an empty folder. What a
  recording stopped midway left is removed first (its temporary folder beside `path`; files
  moved into `path` without their `header`), each said in a line."""
  parent, name = _split(path)
  with writing(path):
    if tf.io.gfile.isdir(parent or "."):
      for left in tf.io.gfile.listdir(parent or "."):
        if re.fullmatch(rf"\.{re.escape(name)}\.tmp-[0-9a-f]{{12}}/?", left):
          tf.io.gfile.rmtree(parent + left.rstrip("/"))
          print(f"removed {parent}{left.rstrip('/')}: left by a recording stopped midway",
                file=sys.stderr)
    if not tf.io.gfile.exists(path):
      return
    if not tf.io.gfile.isdir(path):
      raise PortError(f"the record folder {path} is a file: give a folder")
    names = [n.rstrip("/") for n in tf.io.gfile.listdir(path)]
    if names and header not in names and all(re.fullmatch(_RECORD_PIECES, n) for n in names):
      for n in names:
        tf.io.gfile.remove(posixpath.join(path, n))
      print(f"removed the files a recording stopped midway had moved into {path} (no "
            f"{header})", file=sys.stderr)
    elif names:
      raise PortError(f"the record folder {path} is not empty: give a new one")


def move_folder(folder, target, last):
  """`folder` renamed to `target` (absent or an empty folder): one rename on a local disk;
  elsewhere file by file, `last` last, so `target` is whole once `last` is there."""
  if _local(target):
    if os.path.isdir(target):
      os.rmdir(target)
    os.rename(folder, target)
    return
  tf.io.gfile.makedirs(target)
  for name in sorted(tf.io.gfile.listdir(folder), key=lambda n: n == last):
    tf.io.gfile.rename(posixpath.join(folder, name), posixpath.join(target, name),
                       overwrite=True)
