"""The TF2 trainer's histograms are tf.summary.histogram's, bit for bit, without its cost.

strategies.histograms counts the buckets with bincount where TensorBoard sums a [values, 30]
float64 one-hot matrix (350 ms per summary step at batch 8, most of the TF2 loop's cost over
the v1 towers at small batches). These tests hold it to TensorBoard's own code: the same
[30, 3] table for every kind of tensor the trainers meet and those they should not, and the
same event on disk.
"""

import glob
import os

import numpy as np
import pytest
import tensorflow as tf
from tensorboard.plugins.histogram import summary_v2

from strategies import histograms

_RNG = np.random.default_rng(0)
TENSORS = {
    "conv1 activations at batch 8": _RNG.standard_normal((8, 24, 24, 64)).astype(np.float32),
    "local3 weights": _RNG.standard_normal((2304, 384)).astype(np.float32) * 0.04,
    "whole numbers": _RNG.integers(0, 10, 1000).astype(np.float32),
    "tiny": (_RNG.standard_normal(1000) * 1e-30).astype(np.float32),
    "one value": np.full(5, 7.0, np.float32),
    "one element": np.array([7.0], np.float32),
    "empty": np.array([], np.float32),
    "a NaN": np.array([1.0, np.nan, 3.0], np.float32),
    "only NaNs": np.full(3, np.nan, np.float32),
    "-inf": np.array([-np.inf, 1.0, 2.0], np.float32),
    "+inf": np.array([np.inf, 1.0], np.float32),
    "only +inf": np.full(2, np.inf, np.float32),
    "float32's range": np.array([-3e38, 3e38, 0.0], np.float32),
    "an outlier": np.array([1.0, 2.0, 2.0, 3.0, 1e30], np.float32),
    "bfloat16": tf.cast(_RNG.standard_normal((64, 3)), tf.bfloat16),
    "float16": tf.cast(_RNG.standard_normal((64, 3)), tf.float16),
}


@pytest.mark.parametrize("name", TENSORS)
def test_the_buckets_are_tensorboards_bit_for_bit(name):
  data = tf.convert_to_tensor(TENSORS[name])
  # pylint: disable=protected-access
  assert histograms.buckets(data).numpy().tobytes() == summary_v2._buckets(data).numpy().tobytes()


def test_the_event_written_is_tf_summary_histograms(tmp_path):
  data = tf.constant(TENSORS["local3 weights"])
  for folder, write in (("ours", histograms.histogram), ("tensorboard", tf.summary.histogram)):
    writer = tf.summary.create_file_writer(str(tmp_path / folder))
    with writer.as_default():
      write("local3/weights/values", data, step=7)
    writer.close()
  values = []
  for folder in ("ours", "tensorboard"):
    path, = glob.glob(os.path.join(tmp_path, folder, "events.out.tfevents.*"))
    events = [e for e in tf.compat.v1.train.summary_iterator(path) if e.summary.value]
    assert [e.step for e in events] == [7]
    values.append(events[0].summary.value[0].SerializeToString())
  assert values[0] == values[1]
