"""The CIFAR-10 data behind `load_source`: three sources of random-access examples.

  synthetic    generated in-process from (seed, index); learnable class patterns; no files.
  cifar10_bin  the classic `cifar-10-batches-bin/*.bin` files (fixed-length records:
               1 label byte + 3072 depth-major pixel bytes), or the `cifar-10-binary.tar.gz`
               they come in, unpacked into `data_dir` on first use.
  cifar10      tensorflow-datasets `cifar10` under `data_dir`, downloaded when it is missing
               and the data host can be reached (as the original's maybe_download_and_extract
               did); with no network, a one-line error within seconds.

A source is random access (`fetch(index)`), so cifar10.input_pipeline can make the same
stream of examples from any of them, on either trainer, from any step.
"""

import os
import socket

import numpy as np
import tensorflow as tf

from cifar10 import bin_tarball
from cifar10.config import DATASETS
from cifar10.errors import UsageError
from cifar10.hparams import DEFAULT

HEIGHT = WIDTH = 32
DEPTH = 3
LABEL_BYTES = 1
IMAGE_BYTES = HEIGHT * WIDTH * DEPTH
RECORD_BYTES = LABEL_BYTES + IMAGE_BYTES
SPLITS = ("train", "test")
BIN_FILES = {"train": [f"data_batch_{i}.bin" for i in range(1, 6)], "test": ["test_batch.bin"]}
from cifar10.bin_tarball import BIN_FOLDER, BIN_TARBALL  # pylint: disable=g-multiple-import,g-bad-import-order
# tfds fetches the binary tarball from here; probed first so that an offline machine gets an
# answer in seconds instead of minutes of retries.
DOWNLOAD_PROBE = ("www.cs.toronto.edu", 443)
_SYNTHETIC_SIZE = {"train": DEFAULT.num_examples_per_epoch_for_train,
                   "test": DEFAULT.num_examples_per_epoch_for_eval}


class Source:
  """A random-access split: `num_examples` and `fetch(index) -> (uint8 [32,32,3], int32)`."""

  def __init__(self, num_examples, fetch):
    self.num_examples = int(num_examples)
    self.fetch = fetch


def array_source(images, labels, num_examples=None):
  """A Source over in-memory arrays: numpy, or tensors such as v1 placeholders (whose length
  is then given as num_examples, since the stream needs it when the graph is built)."""
  images = tf.convert_to_tensor(images, tf.uint8)
  labels = tf.cast(tf.convert_to_tensor(labels), tf.int32)
  num = images.shape[0] if num_examples is None else num_examples
  return Source(num, lambda i: (tf.gather(images, i), tf.gather(labels, i)))


def synthetic_source(seed, split="train", num_examples=None):
  """Learnable synthetic CIFAR-10: a fixed colour pattern per class plus per-example noise.

  Each class has a smooth 4x4 colour pattern (from the seed) upsampled to 32x32; an example is
  its class pattern plus Gaussian noise (stddev 48) keyed by (seed, split, index). Train and
  test share the patterns and differ in noise, so test precision measures generalisation.
  """
  key = int(seed) * 8
  split_key = key + (1 if split == "train" else 2)

  def fetch(index):
    index = tf.cast(index, tf.int64)
    label = tf.random.stateless_uniform(
        [], [split_key, index], minval=0, maxval=10, dtype=tf.int32)
    cells = tf.random.stateless_uniform([4, 4, DEPTH], [key + 3, tf.cast(label, tf.int64)],
                                        minval=0.0, maxval=255.0)
    pattern = tf.image.resize(cells, [HEIGHT, WIDTH], method="bilinear")
    noise = tf.random.stateless_normal([HEIGHT, WIDTH, DEPTH], [split_key + 4, index],
                                       stddev=48.0)
    image = tf.cast(tf.clip_by_value(tf.round(pattern + noise), 0.0, 255.0), tf.uint8)
    return image, label

  return Source(num_examples or _SYNTHETIC_SIZE[split], fetch)


def decode_records(raw):
  """CIFAR-10 binary records (uint8 bytes, a multiple of RECORD_BYTES long) -> (uint8 images
  [n, 32, 32, 3], int32 labels [n]): a label byte, then the image depth-major (R, G, B planes)."""
  records = np.asarray(raw, np.uint8).reshape(-1, RECORD_BYTES)
  images = records[:, LABEL_BYTES:].reshape(-1, DEPTH, HEIGHT, WIDTH).transpose(0, 2, 3, 1)
  return np.ascontiguousarray(images), records[:, 0].astype(np.int32)


def _is_file(path):
  return tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path)


def bin_files(data_dir, split):
  """The .bin files of `split` under data_dir (or data_dir/cifar-10-batches-bin), validated.
  Through tf.io.gfile: data_dir may be on any filesystem TensorFlow knows (gs://...)."""
  if not data_dir or not tf.io.gfile.isdir(data_dir):
    raise UsageError(f"--data_dir {data_dir!r} is not a directory; it must hold the CIFAR-10 "
                     "binary files (cifar-10-batches-bin/*.bin, or cifar-10-binary.tar.gz), "
                     "or use --dataset=synthetic")
  nested = os.path.join(data_dir, BIN_FOLDER)
  if not tf.io.gfile.isdir(nested) and _is_file(os.path.join(data_dir, BIN_TARBALL)) and \
      not all(_is_file(os.path.join(data_dir, n)) for n in BIN_FILES[split]):
    bin_tarball.unpack(data_dir)
  root = nested if tf.io.gfile.isdir(nested) else data_dir
  files = [os.path.join(root, name) for name in BIN_FILES[split]]
  missing = [f for f in files if not _is_file(f)]
  if missing:
    found = sorted(os.path.basename(f) for f in tf.io.gfile.glob(os.path.join(root, "*.bin")))
    raise UsageError(f"missing CIFAR-10 file {missing[0]} (found: {found or 'no .bin files'}); "
                     "download cifar-10-binary.tar.gz into --data_dir (it is unpacked there)")
  for f in files:
    size = tf.io.gfile.stat(f).length
    if size == 0 or size % RECORD_BYTES:
      raise UsageError(f"{f} is {size} bytes, not a positive multiple of the {RECORD_BYTES}-byte "
                       "CIFAR-10 record: the file is truncated or not CIFAR-10 binary data")
  return files


def load_bin(data_dir, split):
  """Reads the .bin files of `split` into numpy arrays, in file order. Plain numpy: it runs
  the same in eager code, inside a tf.function and while a v1 graph is being built."""
  files = bin_files(data_dir, split)
  raw = []
  for f in files:
    with tf.io.gfile.GFile(f, "rb") as data:
      raw.append(np.frombuffer(data.read(), np.uint8))
  images, labels = decode_records(np.concatenate(raw))
  _check_labels(labels, f"the {split} files of {os.path.dirname(files[0])}")
  return images, labels


def _check_labels(labels, where):
  """UsageError unless every label is a class of CIFAR-10 (0..9): a label byte out of range
  means the files are not CIFAR-10 (CIFAR-100's have two label bytes), and such examples would
  fail training and score 0 in evaluation, silently."""
  bad = np.flatnonzero((labels < 0) | (labels >= DEFAULT.num_classes))
  if bad.size:
    raise UsageError(f"{where}: record {bad[0]} has label {labels[bad[0]]}, and {bad.size} "
                     f"record(s) in all are outside CIFAR-10's 0..{DEFAULT.num_classes - 1}; "
                     "these are not CIFAR-10 files")


def load_tfds(data_dir, split, download):
  """tfds `cifar10` as numpy arrays; with no data and no way to download, a UsageError fast."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  unreachable = _unreachable() if download else None
  try:
    dataset = tfds.load("cifar10", split=split, data_dir=data_dir,
                        download=download and not unreachable, as_supervised=True)
  except (AssertionError, OSError, tfds.core.registered.DatasetNotFoundError):
    raise UsageError(_not_there(data_dir, download, unreachable)) from None
  # Chunks rather than batch_size=-1, which needs split sizes that tfds mocks do not have.
  chunks = list(tfds.as_numpy(dataset.batch(10000)))
  images = np.concatenate([c[0] for c in chunks])
  labels = np.concatenate([c[1] for c in chunks]).astype(np.int32)
  _check_labels(labels, f"tfds cifar10 {split}")
  return images, labels


def load_arrays(dataset, split, *, data_dir=None, download=False):
  """(uint8 images [n,32,32,3], int32 labels [n]) of a file-backed split; None for synthetic.

  Runs eagerly (it reads files into memory). A graph-mode trainer calls it before building
  its graph and feeds the arrays to placeholders behind `array_source`.
  """
  if split not in SPLITS:
    raise UsageError(f"unknown split {split!r}; choose from {', '.join(SPLITS)}")
  if dataset == "synthetic":
    return None
  if dataset == "cifar10_bin":
    return load_bin(data_dir, split)
  if dataset == "cifar10":
    return load_tfds(data_dir, split, download)
  raise UsageError(f"unknown --dataset {dataset!r}; choose from {', '.join(DATASETS)}")


def check_available(dataset, split, *, data_dir=None, download=False):
  """UsageError, as its load would raise it, if `split` of `dataset` is not there to load:
  the .bin files of cifar10_bin (present, whole records; a tarball is unpacked), tfds
  cifar10 with downloading off and nothing prepared. What a trainer checks before it writes
  anything into a new run folder. Labels are checked when the files are read."""
  if dataset == "cifar10_bin":
    bin_files(data_dir, split)
  elif dataset == "cifar10" and not download:
    import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
    if not tfds.builder("cifar10", data_dir=data_dir).is_prepared():
      raise UsageError(_not_there(data_dir, download, None))


def _unreachable():
  """Why tfds cannot download CIFAR-10 from here (None: its host answers)."""
  try:
    socket.create_connection(DOWNLOAD_PROBE, timeout=5).close()
    return None
  except OSError as e:
    return f"cannot reach {DOWNLOAD_PROBE[0]} to download it ({e.__class__.__name__})"


def _not_there(data_dir, download, unreachable):
  where = data_dir or "~/tensorflow_datasets"
  if download and unreachable:
    reason, hint = unreachable, "run once where it can be reached"
  elif download:
    reason, hint = "its download failed", "run again with network"
  else:
    reason, hint = "downloading is off", "run once with network, without --nodownload"
  return (f"tfds cifar10 is not in {where} and {reason}: {hint}, pass --data_dir, or use "
          "--dataset=synthetic")


def load_source(dataset, split, *, seed, data_dir=None, download=False):
  """The one entry to the three sources, for eager code."""
  arrays = load_arrays(dataset, split, data_dir=data_dir, download=download)
  return synthetic_source(seed, split) if arrays is None else array_source(*arrays)
