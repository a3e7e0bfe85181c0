"""Bad input to the binaries: one line naming the problem, a non-zero exit, no traceback."""

import os
import time

import pytest

from tests import helpers


def _check(result, expected):
  assert result.returncode == 2, result.stderr[-2000:]
  assert "Traceback" not in result.stderr
  line = helpers.error_line(result)
  assert line.startswith("error: ") and expected in line, line
  return line


@pytest.mark.parametrize("flag,expected", [
    ("--num_gpus=0", "--num_gpus must be a positive integer, got 0"),
    ("--batch_size=0", "--batch_size must be a positive integer, got 0"),
    ("--batch_size=-8", "--batch_size must be a positive integer, got -8"),
    ("--max_steps=0", "--max_steps must be a positive integer, got 0"),
    ("--max_steps=-3", "--max_steps must be a positive integer, got -3"),
    ("--dataset=imagenet", "unknown --dataset 'imagenet'; choose from synthetic, cifar10_bin"),
    ("--per_process_gpu_memory_fraction=1.5", "must be in (0, 1], got 1.5"),
    ("--strategy=tpu", "unknown --strategy 'tpu'"),
])
def test_bad_flags(flag, expected, tmp_path):
  _check(helpers.run("strategies.train", f"--train_dir={tmp_path}", "--dataset=synthetic",
                     flag), expected)
  assert not os.listdir(tmp_path)


def test_bin_dataset_with_a_missing_directory(tmp_path):
  _check(helpers.run("strategies.train", f"--train_dir={tmp_path / 't'}",
                     "--dataset=cifar10_bin", f"--data_dir={tmp_path / 'absent'}"),
         "is not a directory; it must hold the CIFAR-10 binary files")


def test_bin_file_whose_size_is_not_a_multiple_of_3073(tmp_path):
  data = tmp_path / "cifar-10-batches-bin"
  data.mkdir()
  for name in [f"data_batch_{i}.bin" for i in range(1, 6)]:
    (data / name).write_bytes(b"\0" * 3073 * 2)
  (data / "data_batch_4.bin").write_bytes(b"\0" * 5000)
  _check(helpers.run("strategies.train", f"--train_dir={tmp_path / 't'}",
                     "--dataset=cifar10_bin", f"--data_dir={tmp_path}"),
         "data_batch_4.bin is 5000 bytes, not a positive multiple of the 3073-byte")
  assert not (tmp_path / "t").exists() or not any((tmp_path / "t").glob("ckpt-*"))


def test_tfds_cifar10_absent_fails_within_seconds_and_says_what_to_do(tmp_path):
  begin = time.time()
  line = _check(helpers.run("strategies.train", f"--train_dir={tmp_path / 't'}",
                            "--dataset=cifar10", f"--data_dir={tmp_path}"),
                f"tfds cifar10 is not in {tmp_path} and downloading is off")
  assert "--download" in line and "--dataset=synthetic" in line
  assert time.time() - begin < 60  # the process start included; tfds itself fails in 0.1 s


def test_more_gpus_than_exist_on_a_cpu_box_is_refused_for_named_gpus(tmp_path):
  _check(helpers.run("strategies.train", f"--train_dir={tmp_path}", "--dataset=synthetic",
                     "--visible_gpus=0,1"), "--visible_gpus=0,1 but only 0 GPU(s) exist")


def test_eval_without_a_checkpoint(tmp_path):
  _check(helpers.run("strategies.eval", f"--checkpoint_dir={tmp_path}", "--run_once",
                     f"--eval_dir={tmp_path / 'e'}", "--dataset=synthetic"),
         f"no checkpoint found in {tmp_path}")


def test_unexpected_positional_argument(tmp_path):
  _check(helpers.run("strategies.train", f"--train_dir={tmp_path}", "extra"),
         "unexpected arguments: extra")
