"""The classic `cifar-10-binary.tar.gz`, verified and unpacked into its --data_dir.

`unpack(data_dir)` checks the archive against the SHA-256 tensorflow-datasets records for the
same file, then unpacks only its regular files under cifar-10-batches-bin/ into a scratch
folder renamed into place: another process starting on the same data_dir sees the whole
folder or none of it, and the scratch of an unpack whose process is gone is removed by the
next one.
"""

import hashlib
import os
import re
import shutil
import tarfile
import tempfile

from cifar10.errors import UsageError

BIN_FOLDER = "cifar-10-batches-bin"
BIN_TARBALL = "cifar-10-binary.tar.gz"  # what the original downloaded and extracted
# Its SHA-256, as tensorflow-datasets records it for the same file (url_checksums/cifar10.txt:
# 170052171 bytes). Checked before anything is unpacked: a byte changed in transit, or a cut
# download, trained silently on data that is not CIFAR-10.
BIN_TARBALL_SHA256 = "c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd"
# The scratch folder of an unpack: `.unpacking-<pid>-<random>`, so a later run can tell one
# whose process is gone (SIGKILLed mid-unpack: 131 MB left behind) from one in progress.
_SCRATCH = re.compile(r"^\.unpacking-(?:(\d+)-)?")


def _check_digest(path):
  """UsageError unless the tarball at `path` is the classic file, byte for byte."""
  digest = hashlib.sha256()
  try:
    with open(path, "rb") as f:
      for block in iter(lambda: f.read(1 << 20), b""):
        digest.update(block)
  except OSError as e:
    raise UsageError(f"cannot read {path}: {e.strerror or e}") from None
  if digest.hexdigest() != BIN_TARBALL_SHA256:
    raise UsageError(f"{path} is damaged or not the CIFAR-10 binary tarball (its SHA-256 is "
                     f"{digest.hexdigest()[:16]}..., the file's is {BIN_TARBALL_SHA256[:16]}...); "
                     "nothing was unpacked: download it again")


def _remove_stale_scratch(data_dir):
  """Removes the scratch folders of unpacks whose process is gone (on this host)."""
  for name in os.listdir(data_dir):
    match = _SCRATCH.match(name)
    if not match:
      continue
    if match[1]:
      try:
        os.kill(int(match[1]), 0)
        continue  # its process is alive: an unpack in progress
      except ProcessLookupError:
        pass
      except PermissionError:
        continue  # alive, someone else's
    path = os.path.join(data_dir, name)
    if os.path.islink(path):  # planted: removed itself, its target never touched
      os.unlink(path)
    else:
      shutil.rmtree(path, ignore_errors=True)


def unpack(data_dir):
  """Unpacks data_dir/cifar-10-binary.tar.gz into data_dir/cifar-10-batches-bin: only its
  regular files under that folder (a member elsewhere, a link or a device is refused, not
  skipped), into a temporary folder renamed into place, so another process starting on the
  same data_dir sees the whole folder or none of it."""
  path = os.path.join(data_dir, BIN_TARBALL)
  target = os.path.join(data_dir, BIN_FOLDER)
  if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", data_dir) and not data_dir.startswith("file://"):
    raise UsageError(f"{path} is not unpacked, and --data_dir is not a local folder: unpack "
                     f"it there ({BIN_FOLDER}/*.bin) or into a local --data_dir")
  _check_digest(path)
  _remove_stale_scratch(data_dir)
  try:
    scratch = tempfile.mkdtemp(prefix=f".unpacking-{os.getpid()}-", dir=data_dir)
  except OSError as e:
    raise UsageError(f"cannot unpack {path} into {data_dir}: {e.strerror or e}") from None
  try:
    with tarfile.open(path, "r:gz") as tar:
      for member in tar:
        parts = member.name.split("/")
        if (parts[0] != BIN_FOLDER or ".." in parts or member.name.startswith("/")
            or not (member.isfile() or member.isdir())):
          raise UsageError(f"{path} holds {member.name!r}, which is not a file of "
                           f"{BIN_FOLDER}/: not the CIFAR-10 binary tarball; nothing was "
                           "unpacked")
        if member.isfile():
          os.makedirs(os.path.join(scratch, *parts[:-1]), exist_ok=True)
          with tar.extractfile(member) as src, \
              open(os.path.join(scratch, *parts), "wb") as dst:
            shutil.copyfileobj(src, dst)
    try:
      os.rename(os.path.join(scratch, BIN_FOLDER), target)
    except FileNotFoundError:
      raise UsageError(f"{path} has no {BIN_FOLDER}/ folder: not the CIFAR-10 binary "
                       "tarball") from None
    except OSError:
      if not os.path.isdir(target):  # else another process unpacked it first
        raise
  except (tarfile.TarError, EOFError, OSError) as e:
    raise UsageError(f"cannot unpack {path}: {e}; download cifar-10-binary.tar.gz again or "
                     f"extract it into {data_dir} yourself") from None
  finally:
    shutil.rmtree(scratch, ignore_errors=True)
