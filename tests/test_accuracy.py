"""Training on synthetic data learns: the stated accuracy, reached in-process in seconds."""

import pytest

from cifar10 import config

from cifar10 import eval_config
from strategies import evaluator
from tests import helpers

STEPS = 60


@pytest.mark.slow
def test_synthetic_precision_after_60_steps(tmp_path):
  train = config.TrainConfig(train_dir=str(tmp_path / "train"), max_steps=STEPS, batch_size=32,
                             seed=5, dataset="synthetic", save_checkpoint_steps=STEPS)
  assert helpers.train_tf2(train) == STEPS
  precision, step = evaluator.run(eval_config.EvalConfig(
      checkpoint_dir=train.train_dir, eval_dir=str(tmp_path / "eval"), run_once=True,
      num_examples=2048, dataset="synthetic", seed=5))
  assert step == STEPS
  # Measured (EMA weights, 2048 test examples): 1.000 after 60, 100 and 200 steps; 0.873
  # after 40, 0.965 after 50, 0.994 after 70; chance 0.10.
  assert precision >= 0.95
