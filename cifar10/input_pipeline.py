"""CIFAR-10 input on tf.data: one train and one eval pipeline over any cifar10.data_sources
Source.

The determinism contract: a source is random access (`fetch(index)`), the train stream is a
per-epoch stateless permutation of indices (`index_shuffle` keyed by seed and epoch), and every
augmentation draws from a stateless seed keyed by (seed, epoch, index). Nothing depends on the
trainer, the number of replicas or the order in which tf.data runs its parallel maps, so the
same seed gives the same global batches on both trainers, and a run resumed at step S sees
exactly the batches an uninterrupted run sees from step S on.
"""

import numpy as np
import tensorflow as tf

from cifar10.data_sources import DEPTH
from cifar10.errors import UsageError
from cifar10.hparams import DEFAULT

_INDEX_BLOCK = 1024  # indices shuffled per op (any size gives the same stream)
# tf.data hands every function it is given to autograph; these branch and loop on no tensor,
# and converting them was 40% of building the train stream (0.44 s, 0.24 s without).
_unconverted = tf.autograph.experimental.do_not_convert


def distort(image, seed, image_size=DEFAULT.image_size):
  """The original train distortions, every draw from the stateless `seed` ([2] int64)."""
  crop, flip, bright, contrast = tf.unstack(tf.random.experimental.stateless_split(seed, 4))
  x = tf.cast(image, tf.float32)
  x = tf.image.stateless_random_crop(x, [image_size, image_size, DEPTH], crop)
  x = tf.image.stateless_random_flip_left_right(x, flip)
  x = tf.image.stateless_random_brightness(x, max_delta=63, seed=bright)
  x = tf.image.stateless_random_contrast(x, lower=0.2, upper=1.8, seed=contrast)
  return tf.image.per_image_standardization(x)


def eval_image(image, image_size=DEFAULT.image_size):
  """Eval preprocessing of the original: central crop to image_size, then standardization."""
  x = tf.image.resize_with_crop_or_pad(tf.cast(image, tf.float32), image_size, image_size)
  return tf.image.per_image_standardization(x)


def train_dataset(source, *, seed, global_batch_size, start_step=0, shard=(0, 1),
                  image_size=DEFAULT.image_size):
  """Endless distorted global batches, starting at global step `start_step`.

  Epoch e visits index_shuffle(i, [seed, e]) for i = 0..n-1; epochs run back to back and
  batches span epoch boundaries (like the original's queue), dropping nothing but keeping
  every batch full. Starting at step S begins at example S * global_batch_size of this stream.

  shard=(k, K): this input pipeline yields only rows [k*G/K, (k+1)*G/K) of every global batch
  of G, in batches of G/K; K workers together see exactly the global batches of one machine.
  Other rows are dropped from the index stream before any image is made.
  """
  n = source.num_examples
  if n < 1:
    raise UsageError("the training split is empty")
  start = start_step * global_batch_size
  first_epoch, skip = divmod(start, n)
  seed = tf.constant(int(seed), tf.int64)

  @_unconverted
  def epoch(e):
    begin = tf.where(tf.equal(e, first_epoch), tf.constant(skip, tf.int64), 0)
    # Shuffled in blocks and unbatched: the same indices in the same order, but one
    # index_shuffle op per 1024 of them. One op per index was a sequential stage that
    # capped the whole stream at ~31,000 examples/sec, whatever the cores (BENCHMARKS.md).
    return tf.data.Dataset.range(begin, n).batch(_INDEX_BLOCK).map(_unconverted(
        lambda i: (tf.fill(tf.shape(i), e),
                   tf.random.experimental.index_shuffle(i, tf.stack([seed, e]), n - 1))
    )).unbatch()

  @_unconverted
  def example(e, index):
    image, label = source.fetch(index)
    example_seed = tf.stack([seed, e * n + index])
    return distort(image, example_seed, image_size), label

  index, count = shard
  if global_batch_size % count:
    raise UsageError(f"global batch {global_batch_size} does not split into {count} shards")
  local = global_batch_size // count
  stream = tf.data.Dataset.range(first_epoch, np.iinfo(np.int64).max).flat_map(epoch)
  if count > 1:
    # This shard's rows of each global batch of indices, cut from the batch in one op: the
    # same (epoch, index) pairs in the same order as a per-element filter, which ran three
    # tf.data functions on every index of the stream in every shard's pipeline (K pipelines
    # on one host: K times the whole stream; measured at 2 logical CPU replicas, 6% more CPU
    # per example than the towers' one pipeline, BENCHMARKS.md).
    rows = slice(index * local, (index + 1) * local)
    stream = (stream.batch(global_batch_size, drop_remainder=True)
              .map(_unconverted(lambda e, i: (e[rows], i[rows])))
              .unbatch())
  return (stream
          .map(example, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
          .batch(local, drop_remainder=True)
          .prefetch(tf.data.AUTOTUNE))


def eval_dataset(source, *, batch_size, num_examples=None, image_size=DEFAULT.image_size):
  """The first num_examples of a split (all of it if None) in order, centre-cropped, each
  exactly once: the last batch holds the remainder. More examples than the split holds is a
  UsageError (the original's queue wrapped around and scored some twice)."""
  n = source.num_examples if num_examples is None else int(num_examples)
  if n > source.num_examples:
    raise UsageError(f"--num_examples={n} but the split has {source.num_examples} examples; "
                     f"pass --num_examples={source.num_examples} or fewer")

  @_unconverted
  def example(index):
    image, label = source.fetch(index)
    return eval_image(image, image_size), label

  return (tf.data.Dataset.range(n)
          .map(example, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
          .batch(batch_size)
          .prefetch(tf.data.AUTOTUNE))
