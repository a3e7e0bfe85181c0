"""The shared input stream inside a tf.compat.v1 graph, fed the TF1 way.

File data (the `.bin` files, tfds) is read into numpy arrays eagerly, BEFORE the graph is
built (`load`), then enters the graph through placeholders fed once, when the iterator is
initialised (`graph_source` + `initialize`). So no data array ever becomes a graph constant:
the GraphDef and the `.meta` files stay small (~150 MB of training images otherwise), and the
ps/worker graph, shipped to the master of every task, carries no data.

Synthetic data needs no feed: it is generated in the graph from (seed, index).
"""

import tensorflow as tf

from cifar10 import data_sources as sources
from cifar10 import input_pipeline as ip

v1 = tf.compat.v1


def load(config, split):
  """Eagerly: numpy (images, labels) of a file-backed split, or None for synthetic data.
  Call it outside any `graph.as_default()` block (tfds and file reads need eager mode)."""
  return sources.load_arrays(config.dataset, split, data_dir=config.data_dir,
                        download=config.download)


def graph_source(arrays, seed, split):
  """(Source, feed_dict) in the current graph: placeholders for `arrays`, or synthetic."""
  if arrays is None:
    return sources.synthetic_source(seed, split), {}
  images = v1.placeholder(tf.uint8, [None, sources.HEIGHT, sources.WIDTH, sources.DEPTH], "images")
  labels = v1.placeholder(tf.int32, [None], "labels")
  source = sources.array_source(images, labels, num_examples=len(arrays[0]))
  return source, {images: arrays[0], labels: arrays[1]}


def train_batch(arrays, *, seed, global_batch_size, start_step, shard=(0, 1)):
  """(images, labels, initializer, feed) of the shared training stream in the current graph;
  run `initializer` with `feed` once per Session before the first step."""
  source, feed = graph_source(arrays, seed, "train")
  dataset = ip.train_dataset(source, seed=seed, global_batch_size=global_batch_size,
                             start_step=start_step, shard=shard)
  iterator = v1.data.make_initializable_iterator(dataset)
  images, labels = iterator.get_next()
  return images, labels, iterator.initializer, feed


class InitializeHook(v1.train.SessionRunHook):
  """Runs the input initializer with its feed in every session a MonitoredTrainingSession
  creates (the TF1 idiom for initializable iterators under hooks and recovery)."""

  def __init__(self, initializer, feed):
    self.initializer, self.feed = initializer, feed

  def after_create_session(self, session, coord):
    del coord
    session.run(self.initializer, self.feed)
