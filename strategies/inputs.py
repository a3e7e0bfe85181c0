"""The shared input stream as a strategy's distributed batches (compat_v1.inputs' twin).

`distributed_input(config, strategy, source, start)` iterates the global batches of
cifar10.input_pipeline.train_dataset from step `start`, each replica getting its contiguous
rows of the global batch, as each TF1 tower took its slice.
"""

import os

import tensorflow as tf

from cifar10 import input_pipeline


def distributed_input(config, strategy, source, start, per_replica=None):
  """An iterator of distributed global batches of the shared stream, from step `start`.

  per_replica: one pipeline per replica (the default for replicas on this host's CPUs), or
  TensorFlow's default of one pipeline whose batches are split and prefetched onto the
  replicas' devices (what GPU replicas get); None decides by the devices. Both give each
  replica the same rows (tests drive the GPU branch on CPU devices)."""
  n = strategy.num_replicas_in_sync
  replica_devices = strategy.extended.worker_devices
  workers = n // len(replica_devices)
  if per_replica is None:
    per_replica = (workers == 1 and isinstance(strategy, tf.distribute.MirroredStrategy)
                   and all("CPU" in d.upper() for d in replica_devices))

  # Each replica's own pipeline gets a share of this host's cores (pipeline_threads).
  threads = pipeline_threads(n) if per_replica else None

  def per_pipeline(ctx):
    dataset = pipeline_dataset(config, source, start, ctx)
    if threads:
      options = tf.data.Options()
      options.threading.private_threadpool_size = threads
      dataset = dataset.with_options(options)
    return dataset

  if per_replica:
    # Replicas on this host's CPUs: one pipeline per replica, each making its rows of the
    # global batch, read where it is made (MirroredStrategy only has this mode). The default
    # (one pipeline, its batches split and sent through a MultiDeviceIterator) costs a copy
    # per replica and stalls up to 3.7 s when the iterator is deleted mid-prefetch
    # (measured; BENCHMARKS.md).
    options = tf.distribute.InputOptions(
        experimental_replication_mode=tf.distribute.InputReplicationMode.PER_REPLICA,
        experimental_fetch_to_device=False)
    return iter(strategy.distribute_datasets_from_function(per_pipeline, options))
  if workers == 1:
    dataset = input_pipeline.train_dataset(source, seed=config.seed,
                                           global_batch_size=config.global_batch_size(n),
                                           start_step=start)
    return iter(strategy.experimental_distribute_dataset(dataset))
  return iter(strategy.distribute_datasets_from_function(per_pipeline))  # one per worker


def pipeline_threads(pipelines, cores=None):
  """The thread pool size of each of `pipelines` pipelines on this host's `cores` (its
  usable cores by default): an equal share of the cores, at least one thread; None (tf.data's
  own, one thread per core) for a pipeline that has the host to itself.

  tf.data gives every pipeline a pool of one thread per core, so N replicas' pipelines ran N x
  cores threads beside the step's own. Measured on 2 cores (BENCHMARKS.md), one thread each:
  at N = 4, 1.6-6.3% more examples/sec and 1.4-6.5% less CPU per example in four pairs of
  runs; at N = 2, batch 8, 3.2-14.6% more examples/sec and 1.7-12.9% less CPU in four pairs
  (batch 128: +0.8% in the median of four, three of them faster). Threads decide when an
  element is made, not what it is (every draw is stateless, the map deterministic): the same
  batches.
  """
  cores = cores or len(os.sched_getaffinity(0))
  threads = max(1, cores // pipelines)
  return threads if threads < cores else None


def pipeline_dataset(config, source, start, ctx):
  """The batches of input pipeline `ctx.input_pipeline_id` of `ctx.num_input_pipelines`:
  its rows of each global batch, cut into one batch per replica it feeds.

  A pipeline per replica yields that replica's rows. A pipeline per worker of k replicas
  (distribute_datasets_from_function's default) must yield per-replica batches too: the
  strategy hands its consecutive elements to the worker's replicas in turn, so a worker-sized
  element would give each replica k x the batch (and k x the effective learning rate). Its
  rows, w*k*B .. (w+1)*k*B of a global batch, are cut into k batches of B, replica j of
  worker w getting rows (w*k + j)*B .., as tower w*k + j of one machine would.
  """
  n = ctx.num_replicas_in_sync
  dataset = input_pipeline.train_dataset(
      source, seed=config.seed, global_batch_size=config.global_batch_size(n),
      start_step=start, shard=(ctx.input_pipeline_id, ctx.num_input_pipelines))
  replicas_per_pipeline = n // ctx.num_input_pipelines
  if replicas_per_pipeline > 1:
    dataset = dataset.rebatch(config.batch_size, drop_remainder=True)
  return dataset
