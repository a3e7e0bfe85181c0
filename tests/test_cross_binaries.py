"""Same flags -> same run, across the two binaries and their checkpoint formats.

compat_v1.train and strategies.train with the same --seed, --dataset, --num_gpus,
--batch_size and --max_steps write checkpoints whose weights, EMA shadows and global step are
bit-identical; each continues the other's run (--init_from) as if it had never stopped; each
evaluator scores the other's checkpoints with the same precision.
"""

import re

import numpy as np
import pytest
import tensorflow as tf

from cifar10 import checkpoints
from cifar10 import config
from cifar10 import data_sources as sources
from cifar10 import input_pipeline as ip
from cifar10 import model
from equivalence import runs as equivalence_runs
from tests import helpers

pytestmark = pytest.mark.slow
COMMON = ("--num_gpus=2", "--batch_size=8", "--seed=2", "--save_checkpoint_steps=6",
          "--log_frequency=4", "--save_summaries_steps=5")


def _train(trainer, train_dir, data, *extra):
  result = helpers.run(trainer, *COMMON, *data, f"--train_dir={train_dir}", *extra, fork=True)
  assert result.returncode == 0, result.stderr[-3000:]
  return result


def _assert_same(path_a, path_b):
  a, b = checkpoints.read(path_a), checkpoints.read(path_b)
  assert a.global_step == b.global_step
  for name in a.weights:
    np.testing.assert_array_equal(a.weights[name], b.weights[name], err_msg=name)
    np.testing.assert_array_equal(a.averages[name], b.averages[name], err_msg=name)


@pytest.fixture(name="runs", scope="module")
def fixture_runs(tmp_path_factory):
  root = tmp_path_factory.mktemp("cross")
  # The classic file format, holding learnable synthetic examples: both binaries train on
  # .bin files (the path a migrating team takes) and their precision means something.
  helpers.write_bin_dataset(str(root / "data"), seed=2, train_per_file=40, num_test=200)
  data = ("--dataset=cifar10_bin", f"--data_dir={root / 'data'}")
  # --log_device_placement costs nothing in numbers: the placements are checked below.
  v1 = _train("compat_v1.train", root / "v1", data, "--max_steps=12", "--log_device_placement")
  tf2 = _train("strategies.train", root / "tf2", data, "--max_steps=12",
               "--log_device_placement")
  PLACEMENTS.update({"compat_v1.train": v1.stdout, "strategies.train": tf2.stdout})
  return root, v1.stderr, data


PLACEMENTS = {}  # trainer -> its stdout, where TF prints one line per op and device
PLACED = re.compile(r"^(\S+): \((\w+)\): /job:localhost/replica:0/task:0/device:(\w+:\d+)$",
                    re.MULTILINE)


@pytest.mark.parametrize("trainer,prefix", [("strategies.train", "replica_"),
                                            ("compat_v1.train", "tower_")])
def test_log_device_placement_shows_each_replica_on_its_device(runs, trainer, prefix):
  del runs  # fills PLACEMENTS
  convs = [(name, device) for name, kind, device in PLACED.findall(PLACEMENTS[trainer])
           if kind == "Conv2D"]
  # Two conv layers per replica; replica/tower 1's are named after it and run on CPU:1.
  # (TF2 places each compiled form of the step: with summary outputs and without.)
  on_1 = {name for name, device in convs if device == "CPU:1"}
  assert on_1 == {f"{prefix}1/Conv2D", f"{prefix}1/Conv2D_1"}, convs
  assert len({name for name, device in convs if device == "CPU:0"}) == 2, convs


def test_same_flags_write_bit_identical_checkpoints(runs):
  root, _, _ = runs
  _assert_same(f"{root}/v1/model.ckpt-6", f"{root}/tf2/ckpt-6")
  _assert_same(f"{root}/v1/model.ckpt-12", f"{root}/tf2/ckpt-12")
  assert checkpoints.read(f"{root}/v1").global_step == 12


def test_both_log_and_summarise_like_the_original_and_alike(runs):
  root, log, _ = runs
  assert "running 2 towers on 2 CPU devices" in log
  # The original's numbering: the 0-based index of the step (and here the last one, too).
  assert [int(s) for s in re.findall(r"step (\d+), loss = \d+\.\d\d \(", log)] == [0, 4, 8, 11]
  v1, tf2 = equivalence_runs.summaries(root / "v1"), equivalence_runs.summaries(root / "tf2")
  assert set(v1) == set(tf2)
  layers = ("conv1", "conv2", "local3", "local4", "softmax_linear")
  terms = ("cross_entropy", "local3/weight_loss", "local4/weight_loss", "total_loss")
  expected = {"loss", "Precision @ 1", "learning_rate"} | {f"{l}/activations" for l in layers} | {
      f"{l}/sparsity" for l in layers} | set(terms) | {t + "__raw_" for t in terms} | {
      f"{n}/{kind}" for n in model.VARIABLE_NAMES for kind in ("values", "gradients")}
  assert set(v1) == expected, set(v1) ^ expected
  for tag, steps in v1.items():
    assert list(steps) == [0, 5, 10], tag  # every 5 steps (not the last: see cadence)
    assert steps == tf2[tag], (tag, steps, tf2[tag])  # every scalar (loss too) bit-identical
  # The loss averages start from 0, as the original's ExponentialMovingAverage(0.9) did.
  raw, average = v1["cross_entropy__raw_"], v1["cross_entropy"]
  assert average[0] == pytest.approx(0.1 * raw[0], rel=1e-6) and 0 < v1["conv1/sparsity"][0] < 1


def _continue(root, train_dir, init_from):
  """The training loops of the two binaries in-process, with the fixture's flags (COMMON and
  its data), from step 6 of the other trainer's run to step 12."""
  return config.TrainConfig(
      train_dir=str(train_dir), max_steps=12, batch_size=8, seed=2, dataset="cifar10_bin",
      data_dir=str(root / "data"), save_checkpoint_steps=6, log_frequency=4,
      save_summaries_steps=5, init_from=init_from)


def test_tf2_continues_a_v1_run_as_if_it_never_stopped(runs, tmp_path):
  root, _, _ = runs
  train_config = _continue(root, tmp_path, f"{root}/v1/model.ckpt-6")
  assert helpers.train_tf2(train_config, ["/cpu:0", "/cpu:1"], "mirrored") == 12
  _assert_same(str(tmp_path), f"{root}/v1/model.ckpt-12")


def test_v1_continues_a_tf2_run_as_if_it_never_stopped(runs, tmp_path):
  root, _, _ = runs
  train_config = _continue(root, tmp_path, f"{root}/tf2/ckpt-6")
  assert helpers.train_v1(train_config, 2) == 12
  _assert_same(str(tmp_path), f"{root}/tf2/ckpt-12")


def _precision(evaluator, checkpoint_dir, eval_dir, data):
  result = helpers.call(evaluator, f"--checkpoint_dir={checkpoint_dir}", "--run_once",
                        f"--eval_dir={eval_dir}", "--seed=2", *data,
                        "--num_examples=200", "--batch_size=64")
  assert result.returncode == 0, result.stderr[-3000:]
  step, precision, count = re.search(
      r"step (\d+): precision @ 1 = (\d\.\d+), loss = \S+ \((\d+) examples",
      result.stdout).groups()
  return precision, count, step


def test_each_evaluator_scores_each_example_once_from_the_other_trainers_checkpoint(
    runs, tmp_path):
  root, _, data = runs
  # Each evaluator on the other trainer's checkpoint (the two hold the same bits, tested
  # above), so one number means each reads both formats alike. (v1's own resume is tested
  # in test_train_e2e: stopped by SIGTERM, resumed, equal to the TF2 reference.)
  scores = {(e, t): _precision(e, root / t, tmp_path / f"{e}-{t}", data)
            for e, t in (("strategies.eval", "v1"), ("compat_v1.eval", "tf2"))}
  assert len(set(scores.values())) == 1, scores
  precision, count, step = next(iter(scores.values()))
  # 200 test records in batches of 64: three full batches and one of 8, each scored once.
  assert count == "200" and step == "12"
  averages = checkpoints.read(f"{root}/v1").averages
  source = sources.load_source("cifar10_bin", "test", seed=2, data_dir=str(root / "data"))
  images, labels = next(iter(ip.eval_dataset(source, batch_size=200)))
  correct = int(tf.reduce_sum(tf.cast(
      tf.math.in_top_k(labels, model.inference(averages, images), 1), tf.int32)))
  assert precision == f"{correct / 200:.3f}"


def test_v1_nan_loss_is_the_same_one_line_error(tmp_path):
  result = helpers.call("compat_v1.train", *COMMON, "--dataset=synthetic",
                        f"--train_dir={tmp_path}", "--max_steps=30",
                        "--learning_rate=1e4", "--save_checkpoint_steps=1",
                        "--save_summaries_steps=1")
  assert result.returncode == 2 and "Traceback" not in result.stderr
  line = helpers.error_line(result)
  assert re.fullmatch(r"error: loss is NaN or Inf at step \d+; nothing of this step was applied "
                      r"or saved \(last checkpoint: .*\)\. Lower --learning_rate or check the "
                      r"data", line), line
  step = int(re.search(r"at step (\d+)", line).group(1))
  state = checkpoints.read(str(tmp_path))
  assert state.global_step == step
  for name, value in {**state.weights, **state.averages}.items():
    assert np.all(np.isfinite(value)), name
  # The summaries of every step before the failed one, the events file whole: before, the
  # FileWriter was closed on success only, and a failed run left its file cut mid-record.
  tags = helpers.summary_steps(tmp_path)
  assert tags["total_loss"] == tags["learning_rate"] == list(range(step))
