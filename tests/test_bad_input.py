"""Bad input to the binaries: one line naming the problem, a non-zero exit, no traceback.

Both trainers take the same flags and answer the same bad input with the same line. The
binaries run in this process (helpers.call: the same flag parsing and error mapping as
`python -m`), except where the process itself is what is tested: absl's own parsing of the
command line.
"""

import os
import time

import pytest

from tests import helpers

TRAINERS = pytest.mark.parametrize("trainer", ["strategies.train", "compat_v1.train"])


def _check(result, expected):
  assert result.returncode == 2, result.stderr[-2000:]
  assert "Traceback" not in result.stderr
  line = helpers.error_line(result)
  assert line.startswith("error: ") and expected in line, line
  return line


@pytest.mark.parametrize("flag,expected", [
    # Ranges: harness.command_line.flag_ranges (tests/test_flag_ranges.py walks every numeric flag).
    ("--num_gpus=0", "flag --num_gpus=0: 0 is not an integer in the range [1, 64]"),
    ("--batch_size=-8", "flag --batch_size=-8: -8 is not an integer in the range [1, 65536]"),
    ("--max_steps=0", "flag --max_steps=0: 0 is not an integer in the range [1, "),
    ("--dataset=imagenet", "unknown --dataset 'imagenet'; choose from synthetic, cifar10_bin"),
    ("--per_process_gpu_memory_fraction=1.5", "1.5 is not a finite number in the range (0, 1]"),
    ("--ema_reads=later", "--ema_reads must be one of updated, previous, got 'later'"),
])
@TRAINERS
def test_bad_flags(flag, expected, trainer, tmp_path):
  _check(helpers.call(trainer, f"--train_dir={tmp_path}", "--dataset=synthetic", flag), expected)
  assert not os.listdir(tmp_path)


@TRAINERS
def test_bin_dataset_with_a_missing_directory(trainer, tmp_path):
  _check(helpers.call(trainer, f"--train_dir={tmp_path / 't'}",
                     "--dataset=cifar10_bin", f"--data_dir={tmp_path / 'absent'}"),
         "is not a directory; it must hold the CIFAR-10 binary files")


@TRAINERS
def test_bin_file_whose_size_is_not_a_multiple_of_3073(trainer, tmp_path):
  data = tmp_path / "cifar-10-batches-bin"
  data.mkdir()
  for name in [f"data_batch_{i}.bin" for i in range(1, 6)]:
    (data / name).write_bytes(b"\0" * 3073 * 2)
  (data / "data_batch_4.bin").write_bytes(b"\0" * 5000)
  _check(helpers.call(trainer, f"--train_dir={tmp_path / 't'}",
                     "--dataset=cifar10_bin", f"--data_dir={tmp_path}"),
         "data_batch_4.bin is 5000 bytes, not a positive multiple of the 3073-byte")
  assert not (tmp_path / "t").exists() or not any((tmp_path / "t").glob("ckpt-*"))


@TRAINERS
def test_tfds_cifar10_absent_fails_within_seconds_and_says_what_to_do(trainer, tmp_path,
                                                                     monkeypatch):
  # Downloading is on by default (the original downloaded too); a machine that cannot reach
  # the data host is told so at once (no network here, and the probe is a closed port).
  from cifar10 import data_sources  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(data_sources, "DOWNLOAD_PROBE", ("127.0.0.1", 9))
  begin = time.time()
  line = _check(helpers.call(trainer, f"--train_dir={tmp_path / 't'}",
                            "--dataset=cifar10", f"--data_dir={tmp_path}"),
                f"tfds cifar10 is not in {tmp_path} and cannot reach 127.0.0.1 to download "
                "it (ConnectionRefusedError): run once where it can be reached, pass "
                "--data_dir, or use --dataset=synthetic")
  line = _check(helpers.call(trainer, f"--train_dir={tmp_path / 't'}", "--nodownload",
                            "--dataset=cifar10", f"--data_dir={tmp_path}"),
                f"tfds cifar10 is not in {tmp_path} and downloading is off: run once with "
                "network, without --nodownload, pass --data_dir")
  assert "--dataset=synthetic" in line
  assert time.time() - begin < 30  # tfds itself fails in 0.1 s
  # Refused before the run folder is made: nothing written (before, the download's failure
  # came after it, and a new --train_dir held .lock, flags.txt and run_config.json).
  assert not (tmp_path / "t").exists()


@TRAINERS
def test_more_gpus_than_exist_on_a_cpu_box_is_refused_for_named_gpus(trainer, tmp_path):
  _check(helpers.call(trainer, f"--train_dir={tmp_path}", "--dataset=synthetic",
                     "--visible_gpus=0,1"), "--visible_gpus=0,1 but only 0 GPU(s) exist")


@pytest.mark.parametrize("flags,expected", [
    # Refused as the flags are parsed, before TensorFlow starts (it was after).
    (["--strategy=tpu"], "flag --strategy=tpu: value should be one of <mirrored|"),
    (["--ps_partition_min_bytes=65536"],
     "--ps_partition_min_bytes applies to --strategy=parameter_server only"),
])
def test_bad_strategy_flags(flags, expected, tmp_path):
  _check(helpers.call("strategies.train", f"--train_dir={tmp_path}", "--dataset=synthetic",
                     *flags), expected)
  assert not os.listdir(tmp_path)


@pytest.mark.parametrize("evaluator", ["strategies.eval", "compat_v1.eval"])
def test_eval_without_a_checkpoint(evaluator, tmp_path):
  _check(helpers.call(evaluator, f"--checkpoint_dir={tmp_path}", "--run_once",
                     f"--eval_dir={tmp_path / 'e'}", "--dataset=synthetic"),
         f"no checkpoint found in {tmp_path}")


@TRAINERS
def test_init_from_a_missing_or_incompatible_checkpoint(trainer, tmp_path):
  _check(helpers.call(trainer, f"--train_dir={tmp_path / 't'}", "--dataset=synthetic",
                     f"--init_from={tmp_path / 'nothing'}"), "no checkpoint at")
  # A checkpoint of another model: conv1/weights has the wrong shape, the rest is missing.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.train.Checkpoint(params={"conv1/weights": tf.Variable(tf.zeros([3, 3, 3, 8]))}).write(
      str(tmp_path / "other" / "ckpt"))
  _check(helpers.call(trainer, f"--train_dir={tmp_path / 't'}", "--dataset=synthetic",
                     f"--init_from={tmp_path / 'other' / 'ckpt'}"),
         "conv1/weights has shape [3, 3, 3, 8], the model needs [5, 5, 3, 64]")


@TRAINERS
def test_unexpected_positional_argument(trainer, tmp_path):
  _check(helpers.call(trainer, f"--train_dir={tmp_path}", "extra"),
         "unexpected arguments: extra")


@pytest.mark.parametrize("binary", ["strategies.train", "compat_v1.eval", "strategies.launch"])
def test_unknown_and_malformed_flags_are_one_line(binary):
  _check(helpers.run(binary, "--bogus=1"), "Unknown command line flag 'bogus'")
  _check(helpers.call(binary, "--batch_size=abc" if "launch" not in binary else "--workers=x"),
         "flag --")


@pytest.mark.parametrize("binary,flag,expected", [
    ("examples.model_parallel", "--num_gpus=3",
     "the two-branch model runs on 2 devices; got --num_gpus=3"),
    ("examples.model_parallel", "--steps=0", "flag --steps=0: 0 is not an integer in the range"),
    ("examples.keras_two_outputs", "--vehicle_weight=-1", "-1.0 is not a finite number in the "
     "range [0, 1000]"),
    ("examples.keras_fit", "--ema_reads=previous",
     "--ema_reads=previous is not supported by keras_fit"),
    # Before: both were accepted and silently ignored.
    ("examples.keras_fit", "--precision=fp16 --loss_scale=1024",
     "--loss_scale is not supported by keras_fit"),
    ("examples.keras_fit", "--profile_steps=1,2", "--profile_steps is not supported by keras_fit"),
])
def test_example_binaries_refuse_bad_flags_in_one_line(binary, flag, expected):
  _check(helpers.call(binary, "--dataset=synthetic", *flag.split()), expected)


def test_help_lists_the_flags_a_binary_takes():
  result = helpers.run("compat_v1.train", "--help")  # status 0 (absl's own: 1)
  assert result.returncode == 0
  for flag in ("--train_dir", "--num_gpus", "--learning_rate", "--job_name", "--decay_steps"):
    assert f"  {flag}" in result.stdout, flag


@pytest.mark.parametrize("trainer", ["strategies.train", "compat_v1.train"])
@pytest.mark.parametrize("flag,expected", [
    ("--seed=9223372036854775808", "9223372036854775808 is not an integer in the range [0, "
     "9223372036854775807]"),
    ("--learning_rate=inf", "inf is not a finite number in the range (0, 3.40282e+38]"),
    ("--learning_rate=nan", "nan is not a finite number in the range (0, 3.40282e+38]"),
    # Before: accepted, and Inf in the trainers (with numpy's overflow warning on stderr).
    ("--learning_rate=1e300", "1e+300 is not a finite number in the range (0, 3.40282e+38]"),
])
def test_seeds_and_rates_tensorflow_cannot_hold_are_one_line(trainer, flag, expected, tmp_path):
  _check(helpers.call(trainer, "--dataset=synthetic", "--batch_size=4", "--max_steps=2", flag,
                      f"--train_dir={tmp_path}"), expected)
  assert not os.listdir(tmp_path)


@pytest.mark.parametrize("binary", ["strategies.train", "compat_v1.train", "strategies.eval",
                                    "compat_v1.eval"])
@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_labels_outside_cifar10_are_one_line_for_training_and_evaluation(binary, tmp_path):
  import numpy as np  # pylint: disable=g-import-not-at-top
  written = helpers.write_bin_dataset(str(tmp_path / "data"), seed=1, train_per_file=4,
                                      num_test=8)
  root = tmp_path / "data" / "cifar-10-batches-bin"
  name = "data_batch_3.bin" if binary.endswith("train") else "test_batch.bin"
  records = np.fromfile(root / name, np.uint8).reshape(-1, 3073)
  assert records[2, 0] == written["train" if binary.endswith("train") else "test"][1][
      8 + 2 if name == "data_batch_3.bin" else 2]  # the record a valid label came from
  records[2, 0] = 12  # CIFAR-10 has labels 0..9
  records.tofile(root / name)
  if binary.endswith("eval"):  # a checkpoint to score: the data is read after it is found
    assert helpers.call("strategies.train", "--dataset=synthetic", "--batch_size=2",
                        "--max_steps=1", f"--train_dir={tmp_path / 't'}").returncode == 0
  args = (("--batch_size=4", "--max_steps=1", f"--train_dir={tmp_path / 't'}")
          if binary.endswith("train") else
          ("--run_once", f"--checkpoint_dir={tmp_path / 't'}", f"--eval_dir={tmp_path / 'e'}"))
  _check(helpers.call(binary, "--dataset=cifar10_bin", f"--data_dir={tmp_path / 'data'}",
                      *args), "has label 12")
