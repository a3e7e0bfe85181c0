"""Both trainers train on tensorflow-datasets `cifar10` (tfds's mock data, offline), in-process,
with the same weights; the v1 graph carries the data as a feed, never as a constant."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from cifar10 import checkpoints
from cifar10 import config
from cifar10 import model
from tests import helpers

STEPS = 3


@pytest.mark.slow
def test_both_trainers_train_on_tfds_to_the_same_bits(tmp_path):
  def train_config(name):
    return config.TrainConfig(train_dir=str(tmp_path / name), max_steps=STEPS, batch_size=4,
                              seed=1, dataset="cifar10", data_dir=str(tmp_path / "tfds"),
                              save_checkpoint_steps=STEPS)

  with tfds.testing.mock_data(num_examples=24, policy=tfds.testing.MockPolicy.USE_CODE):
    assert helpers.train_v1(train_config("v1"), 2) == STEPS
    assert helpers.train_tf2(train_config("tf2"), ["/cpu:0", "/cpu:1"], "mirrored") == STEPS
  a, b = checkpoints.read(str(tmp_path / "v1")), checkpoints.read(str(tmp_path / "tf2"))
  assert a.global_step == b.global_step == STEPS
  initial = model.initial_values(1)
  for name in a.weights:
    assert not np.array_equal(a.weights[name], initial[name]), name  # it trained
    np.testing.assert_array_equal(a.weights[name], b.weights[name], err_msg=name)
    np.testing.assert_array_equal(a.averages[name], b.averages[name], err_msg=name)
  # The .meta holds the graph: the 24 mock images enter through placeholders, never as a
  # constant of 24 rows.
  meta = tf.io.gfile.glob(str(tmp_path / "v1" / "model.ckpt-*.meta"))[0]
  assert not [s for s in helpers.constant_shapes(meta) if s[:1] == (24,)]
