"""`tf.summary.histogram`, the same summaries bit for bit, without its one-hot matrix.

TensorBoard's histogram (tensorboard.plugins.histogram.summary_v2) counts the values of each
of its 30 buckets by building a [values, 30] float64 one-hot matrix and summing it: 212 MB
for local3's 884,736 weights, 1.1 GB for conv1's activations at batch 128. A summary step of
the TF2 trainer at batch 8 took 350 ms that way (a plain step 11 ms), which at the default
--save_summaries_steps=100 cost 3.5 ms per step on average: most of what the TF2 loop paid
over the v1 towers at small batches (BENCHMARKS.md). Here the same bucket indices are
counted with `tf.math.bincount`; counts of whole numbers in float64 are exact in any order,
so the tensor written (left edge, right edge, count per bucket) is the one TensorBoard's
code writes, and TensorBoard reads it as its own.
"""

import numpy as np
import tensorflow as tf
from tensorboard.plugins.histogram import metadata  # TensorBoard ships with TensorFlow

BUCKETS = 30  # TensorBoard's DEFAULT_BUCKET_COUNT


def histogram(name, data, step):
  """Writes what tf.summary.histogram(name, data, step) writes, to the default writer."""
  data = tf.stop_gradient(data)
  with tf.summary.experimental.summary_scope(name, "histogram_summary",
                                             values=[data, step]) as (tag, _):
    return tf.summary.write(tag=tag, tensor=lambda: buckets(data), step=step,
                            metadata=metadata.create_summary_metadata(display_name=None,
                                                                      description=None))


def buckets(data):
  """A [30, 3] float64 tensor of (left edge, right edge, count): TensorBoard's `_buckets`,
  value for value, for eager use (the trainers write summaries eagerly). The counting is one
  compiled function for every shape: its ops dispatched one by one cost more than the
  counting itself. The edges are numpy's, computed as TensorBoard's eager `tf.linspace` does
  (start + delta * i, one rounding each): compiled, TensorFlow fused that multiply-add and
  the edges differed in the last bit. float16 and bfloat16 values are exact in float32."""
  data = tf.reshape(tf.cast(data, tf.float32), [-1])
  size, low, high, counts = (t.numpy() for t in _range_and_counts(data))
  with np.errstate(invalid="ignore", over="ignore"):  # inf and NaN go as TensorFlow's go
    return tf.constant(_table(size, low, high, counts), tf.float64)


def _table(size, low, high, counts):
  if size == 0:
    return np.zeros((BUCKETS, 3))
  if high - low == 0:  # one value: equal edges, everything in the last bucket
    return np.stack([np.full(BUCKETS, high), np.full(BUCKETS, high),
                     np.eye(BUCKETS)[-1] * np.float64(size)], axis=1)
  delta = (high - low) / np.float64(BUCKETS)
  edges = np.concatenate([[low], low + delta * np.arange(1, BUCKETS, dtype=np.float64), [high]])
  return np.stack([edges[:-1], edges[1:], counts], axis=1)


@tf.function(input_signature=[tf.TensorSpec([None], tf.float32)], autograph=False)
def _range_and_counts(data):
  """Size, minimum, maximum (float64) and the count of each bucket of `data` (of several
  values)."""
  data = tf.cast(data, tf.float64)
  low, high = tf.reduce_min(data), tf.reduce_max(data)
  width = (high - low) / tf.cast(BUCKETS, tf.float64)
  indices = tf.minimum(tf.cast(tf.floor((data - low) / width), tf.int32), BUCKETS - 1)
  # A one-hot row of an index outside [0, BUCKETS) is all zeros (a NaN's): such values
  # count nowhere here either.
  counts = tf.math.bincount(tf.maximum(indices, 0), weights=tf.cast(indices >= 0, tf.float64),
                            minlength=BUCKETS, maxlength=BUCKETS, dtype=tf.float64)
  return tf.size(data), low, high, counts
