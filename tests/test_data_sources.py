"""The three sources of examples: the classic .bin files (exact pixels and labels, bad sizes,
missing files), the classic tarball (verified, unpacked safely), tensorflow-datasets; and the
eval stream over them."""

import os
import re
import time

import numpy as np
import pytest
import tensorflow_datasets as tfds

from cifar10 import bin_tarball
from cifar10 import data_sources as sources
from cifar10 import input_pipeline as ip
from cifar10.errors import UsageError


def _write_bin(path, labels, images):
  """CIFAR-10 binary records: label byte, then the image depth-major (R plane, G, B)."""
  with open(path, "wb") as f:
    for label, image in zip(labels, images):
      f.write(bytes([label]) + np.transpose(image, [2, 0, 1]).tobytes())


def _images(n):
  # Every pixel differs across position, channel and example, so a transposition shows.
  i, y, x, c = np.meshgrid(np.arange(n), np.arange(32), np.arange(32), np.arange(3),
                           indexing="ij")
  return ((i * 7 + y * 5 + x * 3 + c * 101) % 256).astype(np.uint8)


@pytest.fixture(name="bin_dir")
def fixture_bin_dir(tmp_path):
  root = tmp_path / "cifar-10-batches-bin"
  root.mkdir()
  for k in range(1, 6):
    _write_bin(root / f"data_batch_{k}.bin", [k, (k + 1) % 10], _images(2) + k)
  _write_bin(root / "test_batch.bin", [3, 9, 0], _images(3))
  return str(tmp_path)


def test_bin_records_decode_to_exact_pixels_and_labels(bin_dir):
  images, labels = sources.load_bin(bin_dir, "test")
  np.testing.assert_array_equal(images, _images(3))
  np.testing.assert_array_equal(labels, [3, 9, 0])
  images, labels = sources.load_bin(bin_dir, "train")
  assert images.shape == (10, 32, 32, 3) and images.dtype == np.uint8
  np.testing.assert_array_equal(images[8:], _images(2) + 5)
  np.testing.assert_array_equal(labels, [1, 2, 2, 3, 3, 4, 4, 5, 5, 6])


def test_eval_images_are_the_standardized_central_crop(bin_dir):
  source = sources.load_source("cifar10_bin", "test", seed=0, data_dir=bin_dir)
  images, labels = next(iter(ip.eval_dataset(source, batch_size=3)))
  crop = _images(3)[:, 4:28, 4:28, :].astype(np.float64)
  mean = crop.mean(axis=(1, 2, 3), keepdims=True)
  std = np.maximum(crop.std(axis=(1, 2, 3), keepdims=True), 1 / np.sqrt(24 * 24 * 3))
  np.testing.assert_allclose(images.numpy(), (crop - mean) / std, atol=2e-5)
  np.testing.assert_array_equal(labels.numpy(), [3, 9, 0])


def test_eval_scores_each_example_once_and_refuses_more_than_the_split(bin_dir):
  source = sources.load_source("cifar10_bin", "test", seed=0, data_dir=bin_dir)
  batches = [labels.numpy().tolist() for _, labels in ip.eval_dataset(source, batch_size=2)]
  assert batches == [[3, 9], [0]]  # the last batch holds the remainder
  assert [len(y) for _, y in ip.eval_dataset(source, batch_size=2, num_examples=1)] == [1]
  with pytest.raises(UsageError, match="--num_examples=4 but the split has 3 examples"):
    ip.eval_dataset(source, batch_size=2, num_examples=4)


@pytest.mark.parametrize("size", [3072, 3073 * 2 + 1])
def test_bin_file_of_wrong_size_is_a_usage_error(bin_dir, size):
  with open(os.path.join(bin_dir, "cifar-10-batches-bin", "test_batch.bin"), "wb") as f:
    f.write(b"\0" * size)
  with pytest.raises(UsageError, match=f"test_batch.bin is {size} bytes, not a positive multiple"):
    sources.load_source("cifar10_bin", "test", seed=0, data_dir=bin_dir)


def test_missing_directory_and_file_are_usage_errors(bin_dir, tmp_path):
  with pytest.raises(UsageError, match="is not a directory"):
    sources.load_source("cifar10_bin", "train", seed=0, data_dir=str(tmp_path / "nope"))
  os.remove(os.path.join(bin_dir, "cifar-10-batches-bin", "data_batch_3.bin"))
  with pytest.raises(UsageError, match="missing CIFAR-10 file .*data_batch_3.bin"):
    sources.load_source("cifar10_bin", "train", seed=0, data_dir=bin_dir)
  with pytest.raises(UsageError, match="unknown --dataset 'mnist'"):
    sources.load_source("mnist", "train", seed=0)


def _trust(monkeypatch, path):
  """Makes the tarball at `path` the one whose digest unpacking expects (the real file's is
  bin_tarball.BIN_TARBALL_SHA256): the tests' archives are small ones made here."""
  import hashlib  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(bin_tarball, "BIN_TARBALL_SHA256",
                      hashlib.sha256(path.read_bytes()).hexdigest())


def _tarball(path, members):
  """A .tar.gz of {name: bytes} (None: a symbolic link to /etc/passwd)."""
  import io  # pylint: disable=g-import-not-at-top
  import tarfile  # pylint: disable=g-import-not-at-top
  with tarfile.open(path, "w:gz") as tar:
    for name, data in members.items():
      info = tarfile.TarInfo(name)
      if data is None:
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(info)
      else:
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


def test_the_classic_tarball_in_data_dir_is_unpacked_and_read(bin_dir, tmp_path, monkeypatch):
  # What the original downloaded: cifar-10-binary.tar.gz, holding cifar-10-batches-bin/.
  folder = os.path.join(bin_dir, "cifar-10-batches-bin")
  data = tmp_path / "only_the_tarball"
  data.mkdir()
  _tarball(data / "cifar-10-binary.tar.gz",
           {f"cifar-10-batches-bin/{name}": open(os.path.join(folder, name), "rb").read()
            for name in sorted(os.listdir(folder))})
  _trust(monkeypatch, data / "cifar-10-binary.tar.gz")
  # What a SIGKILL mid-unpack left (by a process that is gone): removed, not left for ever.
  (data / ".unpacking-999999999-x7" / "cifar-10-batches-bin").mkdir(parents=True)
  images, labels = sources.load_bin(str(data), "test")
  np.testing.assert_array_equal(images, _images(3))
  np.testing.assert_array_equal(labels, [3, 9, 0])
  assert sorted(os.listdir(data)) == ["cifar-10-batches-bin", "cifar-10-binary.tar.gz"]
  np.testing.assert_array_equal(sources.load_bin(str(data), "train")[0],
                                sources.load_bin(bin_dir, "train")[0])


@pytest.mark.parametrize("damage", ["a byte", "cut"])
def test_a_damaged_tarball_is_one_line_and_unpacks_nothing(bin_dir, tmp_path, monkeypatch,
                                                           damage):
  folder = os.path.join(bin_dir, "cifar-10-batches-bin")
  data = tmp_path / "data"
  data.mkdir()
  tarball = data / "cifar-10-binary.tar.gz"
  _tarball(tarball, {f"cifar-10-batches-bin/{name}": open(os.path.join(folder, name), "rb").read()
                     for name in sorted(os.listdir(folder))})
  _trust(monkeypatch, tarball)  # the whole file is the one expected
  raw = bytearray(tarball.read_bytes())
  if damage == "a byte":  # one byte changed in transit (before: trained to the end, exit 0)
    raw[len(raw) // 2] ^= 0x01
  else:  # a cut download (before: a partial folder that blocked every later attempt)
    raw = raw[:len(raw) // 2]
  tarball.write_bytes(bytes(raw))
  with pytest.raises(UsageError, match=re.escape(f"{tarball} is damaged or not the CIFAR-10 "
                                                 "binary tarball (its SHA-256 is ")
                     + r".*nothing was unpacked: download it again"):
    sources.load_bin(str(data), "train")
  assert os.listdir(data) == ["cifar-10-binary.tar.gz"]


@pytest.mark.parametrize("member", ["../escaped.bin", "cifar-10-batches-bin/../../x.bin",
                                    "/abs.bin", "elsewhere/data_batch_1.bin", "link"])
def test_a_tarball_that_is_not_cifar10_is_one_line_and_unpacks_nothing(tmp_path, member,
                                                                       monkeypatch):
  data = tmp_path / "data"
  data.mkdir()
  members = {"cifar-10-batches-bin/test_batch.bin": b"\0" * 3073}
  members[member if member != "link" else "cifar-10-batches-bin/data_batch_1.bin"] = (
      None if member == "link" else b"\0" * 3073)
  _tarball(data / "cifar-10-binary.tar.gz", members)
  _trust(monkeypatch, data / "cifar-10-binary.tar.gz")
  shown = "cifar-10-batches-bin/data_batch_1.bin" if member == "link" else member
  with pytest.raises(UsageError, match=re.escape(
      f"{data}/cifar-10-binary.tar.gz holds {shown!r}, which is not a file of "
      "cifar-10-batches-bin/: not the CIFAR-10 binary tarball; nothing was unpacked")):
    sources.load_bin(str(data), "train")
  assert os.listdir(data) == ["cifar-10-binary.tar.gz"]
  assert not (tmp_path / "escaped.bin").exists() and not os.path.exists("/abs.bin")
  (data / "cifar-10-binary.tar.gz").write_bytes(b"not gzip")
  _trust(monkeypatch, data / "cifar-10-binary.tar.gz")
  with pytest.raises(UsageError, match="cannot unpack .*cifar-10-binary.tar.gz: .*; download "
                                       "cifar-10-binary.tar.gz again"):
    sources.load_bin(str(data), "train")


def test_tfds_source_reads_what_tfds_gives():
  with tfds.testing.mock_data(num_examples=6,
                                  policy=tfds.testing.MockPolicy.USE_CODE):
    source = sources.load_source("cifar10", "train", seed=0)
    expected = list(tfds.load("cifar10", split="train", as_supervised=True))
  assert source.num_examples == 6
  for index, (image, label) in enumerate(expected):
    got_image, got_label = source.fetch(index)
    np.testing.assert_array_equal(got_image.numpy(), image.numpy())
    assert int(got_label) == int(label)


def test_tfds_without_data_fails_fast_offline(tmp_path, monkeypatch):
  begin = time.time()
  with pytest.raises(UsageError, match="tfds cifar10 is not in .* downloading is off"):
    sources.load_source("cifar10", "train", seed=0, data_dir=str(tmp_path))
  # A download that cannot reach the data host is refused before tfds starts retrying.
  monkeypatch.setattr(sources, "DOWNLOAD_PROBE", ("127.0.0.1", 9))
  with pytest.raises(UsageError, match="cannot reach 127.0.0.1 to download it"):
    sources.load_source("cifar10", "train", seed=0, data_dir=str(tmp_path), download=True)
  assert time.time() - begin < 15
