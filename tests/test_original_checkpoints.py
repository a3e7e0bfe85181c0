"""Checkpoints of the original tutorial (written by tests/tf1_reference.py the original's way:
Saver(tf.global_variables()), a float32 global step, float16 variables with --use_fp16) work
with every entry point's code, and compat_v1's checkpoints load in the original's eval recipe.
"""

import shutil

import numpy as np
import pytest
import tensorflow as tf

from cifar10 import checkpoints
from cifar10 import config
from cifar10 import eval_config
from cifar10 import data_sources as sources
from cifar10 import input_pipeline as ip
from cifar10 import model
from cifar10 import schedule
from cifar10.errors import UsageError
from compat_v1 import evaluator as v1_evaluator
from strategies import evaluator as tf2_evaluator
from tests import helpers
from tests import tf1_reference

SEED = 7
BATCH = 8
SAVED_AT = 3  # steps the original had run when it saved (its file says model.ckpt-2)
STEPS = 5


@pytest.fixture(name="original", scope="module")
def fixture_original(tmp_path_factory):
  """The original's run: float32 and float16 checkpoints after SAVED_AT steps, and the float32
  run's weights after STEPS."""
  root = tmp_path_factory.mktemp("original")
  decay_steps = schedule.decay_steps(BATCH)  # the original's, as the binaries compute it
  run = tf1_reference.train(1, SEED, STEPS, BATCH, decay_steps, "updated", save_path=str(
      root / "fp32" / "model.ckpt"), save_after=SAVED_AT)
  tf1_reference.train(1, SEED, SAVED_AT, BATCH, decay_steps, "updated",
                      save_path=str(root / "fp16" / "model.ckpt"), dtype=tf.float16)
  return root, run


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_the_original_checkpoint_is_what_the_original_writes(original):
  root, _ = original
  reader = tf.train.load_checkpoint(str(root / "fp32" / "model.ckpt-2"))
  assert reader.get_variable_to_dtype_map()["global_step"] == tf.float32
  assert reader.get_tensor("global_step") == SAVED_AT
  fp16 = tf.train.load_checkpoint(str(root / "fp16" / "model.ckpt-2"))
  assert fp16.get_variable_to_dtype_map()["conv1/weights/ExponentialMovingAverage"] == tf.float16


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_both_evaluators_score_the_originals_moving_averages(original, precision, tmp_path):
  root, _ = original
  path = str(root / precision / "model.ckpt-2")
  state = checkpoints.read(path)
  assert state.global_step == SAVED_AT
  source = sources.synthetic_source(SEED, "test")
  images, labels = next(iter(ip.eval_dataset(source, batch_size=100, num_examples=100)))
  expected = int(tf.reduce_sum(tf.cast(tf.math.in_top_k(
      labels, model.inference(state.averages, images), 1), tf.int32))) / 100
  for evaluator in (tf2_evaluator, v1_evaluator):
    scoring = eval_config.EvalConfig(
        checkpoint_dir=str(root / precision), eval_dir=str(tmp_path / evaluator.__name__),
        run_once=True, num_examples=100, batch_size=64, dataset="synthetic", seed=SEED)
    assert evaluator.run(scoring) == (expected, SAVED_AT), evaluator.__name__


def _continue(loop_run, train_dir, init_from, *args, override_run_config=False):
  train_config = config.TrainConfig(
      train_dir=str(train_dir), max_steps=STEPS, batch_size=BATCH, seed=SEED,
      dataset="synthetic", save_checkpoint_steps=STEPS, init_from=init_from,
      override_run_config=override_run_config)
  assert loop_run(train_config, *args) == STEPS
  return checkpoints.read(str(train_dir))


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_both_trainers_continue_the_originals_run_to_the_bit(original, tmp_path):
  root, run = original
  init_from = str(root / "fp32" / "model.ckpt-2")
  v1_state = _continue(helpers.train_v1, tmp_path / "v1", init_from)
  tf2_state = _continue(helpers.train_tf2, tmp_path / "tf2", init_from)
  for state in (v1_state, tf2_state):
    assert state.global_step == STEPS
    for name in model.VARIABLE_NAMES:
      np.testing.assert_array_equal(state.weights[name], run["weights"][name], err_msg=name)
      np.testing.assert_array_equal(state.averages[name], run["ema"][name], err_msg=name)
  # ... and what compat_v1 wrote loads in the original's own eval recipe.
  step, restored = tf1_reference.eval_recipe(str(tmp_path / "v1"))
  assert step == STEPS
  for name in model.VARIABLE_NAMES:
    np.testing.assert_array_equal(restored[name], v1_state.averages[name], err_msg=name)


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_both_trainers_start_from_the_originals_float16_checkpoint(original, tmp_path):
  root, _ = original
  init_from = str(root / "fp16" / "model.ckpt-2")
  saved = checkpoints.read(init_from)
  states = [_continue(helpers.train_v1, tmp_path / "v1", init_from),
            _continue(helpers.train_tf2, tmp_path / "tf2", init_from)]
  for name in model.VARIABLE_NAMES:
    np.testing.assert_array_equal(states[0].weights[name], states[1].weights[name])
    assert not np.array_equal(states[0].weights[name], saved.weights[name]), name


def test_an_original_checkpoint_in_train_dir_points_to_init_from(original, tmp_path):
  root, _ = original
  for run, args in ((helpers.train_v1, ()), (helpers.train_tf2, ())):
    train_dir = tmp_path / run.__name__
    shutil.copytree(root / "fp32", train_dir)
    # It has no record of its settings: none are taken silently, and --init_from is named.
    with pytest.raises(UsageError, match="holds checkpoints but no run_config.json of their "
                       "settings: .*--init_from keeps the weights"):
      _continue(run, train_dir, None, *args)
    # Taken on purpose, it still cannot be restored as a run of ours.
    # (The original's `checkpoint` index holds absolute paths: the copy names the original.)
    with pytest.raises(UsageError, match="cannot restore .*/model.ckpt-2: .*; if another "
                       "trainer or the original tutorial wrote it, continue it in a new "
                       "--train_dir with --init_from=.*/model.ckpt-2; otherwise move it away"):
      _continue(run, train_dir, None, *args, override_run_config=True)
