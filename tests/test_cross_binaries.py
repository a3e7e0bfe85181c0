"""Same flags -> same run, across the two binaries and their checkpoint formats.

compat_v1.train and strategies.train with the same --seed, --dataset, --num_gpus,
--batch_size and --max_steps write checkpoints whose weights, EMA shadows and global step are
bit-identical; each continues the other's run (--init_from) as if it had never stopped; each
evaluator scores the other's checkpoints with the same precision.
"""

import glob
import re

import numpy as np
import pytest
import tensorflow as tf

from cifar10 import checkpoints
from tests import helpers

pytestmark = pytest.mark.slow
COMMON = ("--num_gpus=2", "--dataset=synthetic", "--batch_size=8", "--seed=2",
          "--save_checkpoint_steps=6", "--log_frequency=4")


def _train(trainer, train_dir, *extra):
  result = helpers.run(trainer, *COMMON, f"--train_dir={train_dir}", *extra)
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
  v1_log = _train("compat_v1.train", root / "v1", "--max_steps=12").stderr
  _train("strategies.train", root / "tf2", "--max_steps=12")
  return root, v1_log


def test_same_flags_write_bit_identical_checkpoints(runs):
  root, _ = runs
  _assert_same(f"{root}/v1/model.ckpt-6", f"{root}/tf2/ckpt-6")
  _assert_same(f"{root}/v1/model.ckpt-12", f"{root}/tf2/ckpt-12")
  assert checkpoints.read(f"{root}/v1").global_step == 12


def test_v1_logs_and_summaries_like_tf2(runs):
  root, log = runs
  assert "running 2 towers on 2 CPU devices" in log
  assert [int(s) for s in re.findall(r"step (\d+), loss = \d+\.\d\d \(", log)] == [3, 7, 11]
  tags = {}
  for path in glob.glob(f"{root}/v1/events.out.tfevents.*"):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        tags.setdefault(value.tag, []).append(event.step)
  for tag in ("loss", "learning_rate", "conv1/weights/values", "conv1/weights/gradients"):
    assert tags[tag] == [0], tag


def test_tf2_continues_a_v1_run_as_if_it_never_stopped(runs, tmp_path):
  root, _ = runs
  result = _train("strategies.train", tmp_path, "--max_steps=12",
                  f"--init_from={root}/v1/model.ckpt-6")
  assert "Initialized from" in result.stderr and "at step 6" in result.stderr
  _assert_same(str(tmp_path), f"{root}/v1/model.ckpt-12")


def test_v1_continues_a_tf2_run_as_if_it_never_stopped(runs, tmp_path):
  root, _ = runs
  _train("compat_v1.train", tmp_path, "--max_steps=12", f"--init_from={root}/tf2/ckpt-6")
  _assert_same(str(tmp_path), f"{root}/tf2/ckpt-12")


def test_v1_resumes_from_its_newest_checkpoint(runs, tmp_path):
  root, _ = runs
  _train("compat_v1.train", tmp_path, "--max_steps=6")
  result = _train("compat_v1.train", tmp_path, "--max_steps=12")
  assert f"Resumed from {tmp_path}/model.ckpt-6 at step 6" in result.stderr
  _assert_same(str(tmp_path), f"{root}/v1/model.ckpt-12")


def _precision(evaluator, checkpoint_dir, eval_dir):
  result = helpers.run(evaluator, f"--checkpoint_dir={checkpoint_dir}", "--run_once",
                       f"--eval_dir={eval_dir}", "--dataset=synthetic", "--seed=2",
                       "--num_examples=256", "--batch_size=64")
  assert result.returncode == 0, result.stderr[-3000:]
  return re.search(r"precision @ 1 = (\d\.\d+) \(step (\d+)", result.stderr).groups()


def test_each_evaluator_scores_the_other_trainers_checkpoints_alike(runs, tmp_path):
  root, _ = runs
  scores = {(e, t): _precision(e, root / t, tmp_path / f"{e}-{t}")
            for e in ("strategies.eval", "compat_v1.eval") for t in ("v1", "tf2")}
  assert len(set(scores.values())) == 1, scores
  precision, step = next(iter(scores.values()))
  assert step == "12" and float(precision) > 0.2  # chance is 0.1


def test_v1_nan_loss_is_the_same_one_line_error(tmp_path):
  result = helpers.run("compat_v1.train", *COMMON, f"--train_dir={tmp_path}", "--max_steps=30",
                       "--learning_rate=1e4", "--save_checkpoint_steps=1")
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
