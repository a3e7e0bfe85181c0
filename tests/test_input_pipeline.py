"""The train stream: per-epoch permutations, batches across epochs, resuming at a step, the
distortions' draws, and shards that rebuild the global batches."""

import numpy as np
import pytest
import tensorflow as tf

from cifar10 import data_sources as sources
from cifar10 import input_pipeline as ip


def _index_source(n):
  """A source whose label is the example's index, to watch the order of the stream."""
  return sources.Source(n, lambda i: (tf.zeros([32, 32, 3], tf.uint8), tf.cast(i, tf.int32)))


def test_each_epoch_is_a_fresh_permutation_and_batches_span_epochs():
  batches = ip.train_dataset(_index_source(10), seed=3, global_batch_size=4).take(5)
  order = np.concatenate([labels.numpy() for _, labels in batches])
  first, second = order[:10], order[10:20]
  assert sorted(first) == list(range(10)) and sorted(second) == list(range(10))
  assert list(first) != list(second) and list(first) != list(range(10))


def _first_batches(seed, batch, count, start_step=0, source=None):
  source = source or sources.synthetic_source(seed, "train")
  ds = ip.train_dataset(source, seed=seed, global_batch_size=batch, start_step=start_step)
  return [(x.numpy(), y.numpy()) for x, y in ds.take(count)]


def test_same_seed_same_batches_other_seed_other_batches():
  a, b, c = _first_batches(1, 8, 2), _first_batches(1, 8, 2), _first_batches(2, 8, 2)
  for (xa, ya), (xb, yb) in zip(a, b):
    np.testing.assert_array_equal(xa, xb)
    np.testing.assert_array_equal(ya, yb)
  assert not np.array_equal(a[0][0], c[0][0])


def test_the_stream_does_not_depend_on_how_the_batch_is_split():
  (big_x, big_y), = _first_batches(4, 8, 1)
  small = _first_batches(4, 4, 2)
  np.testing.assert_array_equal(big_x, np.concatenate([x for x, _ in small]))
  np.testing.assert_array_equal(big_y, np.concatenate([y for _, y in small]))


def test_resuming_at_a_step_gives_the_batches_of_an_uninterrupted_stream():
  source = _index_source(10)  # 4 steps of 6 examples cross two epoch boundaries
  whole = _first_batches(5, 6, 6, source=source)
  resumed = _first_batches(5, 6, 2, start_step=4, source=source)
  for (xa, ya), (xb, yb) in zip(whole[4:], resumed):
    np.testing.assert_array_equal(ya, yb)
    np.testing.assert_array_equal(xa, xb)


def test_each_epoch_draws_its_own_crop_and_flip_of_an_image():
  # Channel 0 grows down the rows, channel 1 along the columns: brightness, contrast and
  # standardization keep each channel's order, so the output shows the crop's orientation.
  rows, cols = np.meshgrid(np.arange(32) * 8, np.arange(32) * 8, indexing="ij")
  pattern = np.stack([rows, cols, np.zeros_like(rows)], axis=-1).astype(np.uint8)
  source = sources.Source(1, lambda i: (tf.constant(pattern), tf.cast(i, tf.int32)))
  # One example, so the 32 rows of the batch are its draws in epochs 0..31.
  (images, _), = _first_batches(5, 32, 1, source=source)
  assert images.shape == (32, 24, 24, 3)
  flipped = []
  for image in images:
    down, across = image[:, :, 0], image[:, :, 1]
    assert np.all(np.diff(down, axis=0) > 0) and np.ptp(down, axis=1).max() < 1e-5
    steps = np.diff(across, axis=1)
    assert np.all(steps > 0) or np.all(steps < 0)  # a window, mirrored or not
    flipped.append(bool(np.all(steps < 0)))
  assert 8 <= sum(flipped) <= 24  # a fair coin per draw (18 of 32 with this seed)
  assert len({image.tobytes() for image in images}) == 32  # each draw its own


def test_shards_of_workers_rebuild_the_global_batches():
  source = _index_source(10)
  (whole_x, whole_y), = _first_batches(6, 8, 1, start_step=3, source=source)
  parts = [next(iter(ip.train_dataset(source, seed=6, global_batch_size=8, start_step=3,
                                      shard=(k, 4)))) for k in range(4)]
  np.testing.assert_array_equal(whole_y, np.concatenate([y.numpy() for _, y in parts]))
  np.testing.assert_array_equal(whole_x, np.concatenate([x.numpy() for x, _ in parts]))


def _dataset_ops(dataset):
  graph = tf.compat.v1.GraphDef()
  graph.ParseFromString(dataset._as_serialized_graph().numpy())  # pylint: disable=protected-access
  return {node.op for node in graph.node}


def test_a_shard_cuts_its_rows_from_each_global_batch_not_index_by_index():
  # Each replica on a host has a pipeline of its own (strategies.inputs). Each pipeline used to
  # number and filter every index of the whole stream (three tf.data functions per index): at
  # 4 pipelines, 138 ms of CPU per global batch of 512 against 64 ms now, 68 ms for the towers'
  # one pipeline (BENCHMARKS.md). Now one op cuts a shard's rows from a batch of indices; the
  # same rows, across epochs too (10 examples, batches of 8).
  source = _index_source(10)
  whole = ip.train_dataset(source, seed=6, global_batch_size=8, start_step=1)
  shards = [ip.train_dataset(source, seed=6, global_batch_size=8, start_step=1, shard=(k, 4))
            for k in range(4)]
  assert "FilterDataset" not in set().union(*map(_dataset_ops, shards))
  parts = [[y.numpy() for _, y in shard.take(5)] for shard in shards]
  for step, (_, y) in enumerate(whole.take(5)):
    np.testing.assert_array_equal(y.numpy(), np.concatenate([p[step] for p in parts]))


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_the_block_shuffled_index_stream_is_the_one_index_at_a_time_stream():
  # The indices are shuffled 1024 at a time (one index_shuffle op per block, not per index:
  # the per-index map capped the stream at ~31,000 examples/sec). The stream must be the one
  # the per-index form makes, across the first epoch's skip and the epoch boundaries.
  n, seed, batch = 2500, 5, 64

  def one_at_a_time(start):
    first_epoch, skip = divmod(start, n)
    key = tf.constant(seed, tf.int64)

    def epoch(e):
      begin = tf.where(tf.equal(e, first_epoch), tf.constant(skip, tf.int64), 0)
      return tf.data.Dataset.range(begin, n).map(
          lambda i: tf.random.experimental.index_shuffle(i, tf.stack([key, e]), n - 1))
    return tf.data.Dataset.range(first_epoch, 100).flat_map(epoch)

  # From 0 over 2.3 epochs (every block, both epoch boundaries); from 448 into epoch 0 into
  # epoch 1's first block; from 4 examples before epoch 0's end (its last, short block) into
  # epoch 1's second block. Each stream is drawn only as far as its crossings: the images are
  # distorted on the way, most of the test's CPU.
  for start_step, batches in ((0, 90), (7, 40), (39, 20)):
    stream = ip.train_dataset(_index_source(n), seed=seed, global_batch_size=batch,
                              start_step=start_step)
    order = np.concatenate([labels.numpy() for _, labels in stream.take(batches)])
    expected = list(one_at_a_time(start_step * batch).take(len(order)).as_numpy_iterator())
    np.testing.assert_array_equal(order, expected)
