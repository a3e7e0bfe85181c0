"""The shared input stream as a strategy's distributed batches (compat_v1.inputs' twin).

`distributed_input(config, strategy, source, start)` iterates the global batches of
cifar10.input_pipeline.train_dataset from step `start`, each replica getting its contiguous
rows of the global batch, as each TF1 tower took its slice.
"""

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

  def per_pipeline(ctx):
    return pipeline_dataset(config, source, start, ctx)

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
