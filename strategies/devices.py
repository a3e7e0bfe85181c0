"""Devices and the strategy over them: what the TF1 trainer put in its ConfigProto, TF2's way.

`setup(DeviceConfig)` applies every device setting to the TF runtime and returns the replica
device names (`/gpu:0..N-1`, or N logical CPU devices on a machine without GPUs);
`get_strategy(name, devices)` maps `--strategy` to a tf.distribute strategy over them. The
entry point calls both and hands the strategy to the loop. Which devices to use is decided by
the shared plan (cifar10.devices), which compat_v1.devices turns into a ConfigProto.

  TF1 (ConfigProto / GPUOptions)            TF2 (here)
  gpu_options.visible_device_list, CUDA_... tf.config.set_visible_devices
  device_count={'GPU': 0}                   cpu_only -> set_visible_devices([], 'GPU')
  gpu_options.allow_growth                  tf.config.experimental.set_memory_growth
  per_process_gpu_memory_fraction           LogicalDeviceConfiguration(memory_limit=MiB)
  log_device_placement                      tf.debugging.set_log_device_placement
  allow_soft_placement                      tf.config.set_soft_device_placement
  intra/inter_op_parallelism_threads        tf.config.threading.set_*_parallelism_threads,
                                            0 resolved as TensorFlow would (tfbits.threads)

`multi_worker_mirrored` reads its cluster from TF_CONFIG (see strategies.launch) and must be
created before any other op runs in the process.
"""

import dataclasses

from absl import logging
import tensorflow as tf

from cifar10 import devices as device_plan
from cifar10 import settings
from cifar10.errors import UsageError
from harness.clusters import cluster
from harness.devices import determinism
from harness.devices import gpu_runtime
from harness.control import progress
from harness.clusters import watchdog
from tfbits import threads

STRATEGIES = settings.STRATEGIES
# --all_reduce, per strategy. auto: NCCL between GPUs, ReductionToOneDevice between logical
# CPU devices (mirrored); RING (multi_worker_mirrored).
ALL_REDUCE = {"mirrored": ("auto", "nccl", "hierarchical_copy", "reduce_to_one_device"),
              "multi_worker_mirrored": ("auto", "ring", "nccl")}


def setup(config):
  """Applies DeviceConfig `config` to the TF runtime and returns the replica device names.

  Must run before TensorFlow creates its first op, or find the runtime already set up alike
  (N logical CPU devices: at least N already there).
  """
  try:
    kind, names, _ = gpu_runtime.configure(config)
    if kind == "CPU" and config.num_gpus > 1:
      cpu = tf.config.list_physical_devices("CPU")[0]
      if len(tf.config.get_logical_device_configuration(cpu) or ()) < config.num_gpus:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * config.num_gpus)
      # "Devices", not "replicas": examples.model_parallel puts one model on two of them.
      logging.info("No GPU in use: %d logical CPU devices stand in for %d GPUs (%s)",
                   config.num_gpus, config.num_gpus, progress.device_list(names))
    determinism.apply(config.deterministic)
    tf.config.set_soft_device_placement(config.soft_placement)
    tf.debugging.set_log_device_placement(config.log_device_placement)
    threads.apply(config.intra_op_threads, config.inter_op_threads)
  except RuntimeError as e:
    raise UsageError(f"devices must be configured before TensorFlow starts: {e}") from None
  return names


def check_cluster(name, cluster):
  """UsageError unless TF_CONFIG's `cluster` has the jobs that strategy `name` runs on."""
  if name == "multi_worker_mirrored" and not cluster:
    raise UsageError("--strategy=multi_worker_mirrored needs TF_CONFIG (one per worker); "
                     "python -m strategies.launch --workers=N sets it up on this machine")
  if name == "parameter_server" and not {"chief", "worker", "ps"} <= set(cluster or ()):
    raise UsageError("--strategy=parameter_server needs TF_CONFIG with chief, worker and ps "
                     "tasks; python -m strategies.launch --workers=N --ps=M sets it up")


def _cross_device_ops(all_reduce, devices):
  """MirroredStrategy's cross_device_ops for --all_reduce over `devices`."""
  on_cpu = all(d.lower().startswith("/cpu") for d in devices)
  if all_reduce in ("nccl", "hierarchical_copy") and on_cpu:
    raise UsageError(f"--all_reduce={all_reduce} needs GPUs (NCCL and the hierarchical copy "
                     "have no CPU kernels); on CPU use auto or reduce_to_one_device")
  if all_reduce == "nccl":
    return tf.distribute.NcclAllReduce()
  if all_reduce == "hierarchical_copy":
    return tf.distribute.HierarchicalCopyAllReduce()
  if all_reduce == "reduce_to_one_device" or on_cpu:
    return tf.distribute.ReductionToOneDevice(devices[0])
  # auto on GPUs: NCCL, named rather than left to MirroredStrategy, which falls back to
  # reduce-to-one-device (with a warning only) whenever fewer GPUs are visible than the
  # machine has (--visible_gpus, --num_gpus below the count): its test for GPUs split into
  # virtual devices, which this project never makes.
  return tf.distribute.NcclAllReduce()


def get_strategy(name, devices, peer_timeout_secs=None, partition_min_bytes=0,
                 all_reduce="auto"):
  """A strategy with one replica per device name in `devices`.

  `partition_min_bytes` (parameter_server only): weights of at least twice this size are
  split in row blocks of at least this size over the ps tasks (at most one block per task).

  `all_reduce` (--all_reduce, one of ALL_REDUCE[name]): with auto, MirroredStrategy keeps
  its default on GPUs, NCCL all-reduce. On logical CPU devices (where NCCL has no kernel) it
  sums on /cpu:0 and broadcasts (ReductionToOneDevice): the sum then runs in replica order
  every time (what keeps TF2 bit-identical to the towers), and unlike the collective
  all-reduce TF would pick, two strategies of different sizes can live in one process (the
  collective group keys clash). Another all-reduce may sum in another order.
  """
  if all_reduce != "auto" and all_reduce not in ALL_REDUCE.get(name, ("auto",)):
    if name not in ALL_REDUCE:
      raise UsageError(f"--all_reduce applies to mirrored and multi_worker_mirrored, not "
                       f"--strategy={name}")
    raise UsageError(f"--all_reduce={all_reduce} is not one of "
                     f"{', '.join(ALL_REDUCE[name])} (--strategy={name})")
  if partition_min_bytes and name != "parameter_server":
    raise UsageError("--ps_partition_min_bytes applies to --strategy=parameter_server only")
  if partition_min_bytes < 0:
    raise UsageError(f"--ps_partition_min_bytes must be >= 0, got {partition_min_bytes}")
  if name == "mirrored":
    return tf.distribute.MirroredStrategy(
        devices, cross_device_ops=_cross_device_ops(all_reduce, devices))
  if name == "central_storage":
    # One copy of the variables where the towers keep theirs (the CPU, or the first GPU with
    # GPUs: cifar10.devices.parameter_device), read by every replica and updated once. The sum
    # of the replicas' gradients is made there, in replica order (AddN), as the towers' is:
    # the same bits (tests/test_central_storage.py).
    return tf.distribute.experimental.CentralStorageStrategy(
        devices, parameter_device=device_plan.parameter_device(devices))
  if name == "one_device":
    if len(devices) != 1:
      raise UsageError(f"--strategy=one_device runs one replica, but --num_gpus={len(devices)}; "
                       "use --strategy=mirrored for more")
    return tf.distribute.OneDeviceStrategy(devices[0])
  if name == "multi_worker_mirrored":
    check_cluster(name, cluster.current().cluster)
    if len(devices) > 1 and all(d.lower().startswith("/cpu") for d in devices):
      raise UsageError("--strategy=multi_worker_mirrored runs one replica per worker on CPU; "
                       "use --num_gpus=1 and more --workers")
    if all_reduce == "nccl" and all(d.lower().startswith("/cpu") for d in devices):
      raise UsageError("--all_reduce=nccl needs GPUs; on CPU use auto or ring")
    # auto: RING, the collective implementation that works on CPUs and GPUs alike, except
    # where asked for NCCL. No timeout_seconds: TensorFlow starts a thread for every
    # collective that has one, alive for the whole timeout (measured: 498 threads per worker
    # at step 60, 1,222 at step 180). A peer that dies mid-run is found by the strategy
    # itself (the coordination service's heartbeats, or its peer health checks) and fails the
    # collectives; the start is bounded by the watchdog below.
    implementation = tf.distribute.experimental.CommunicationImplementation
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=implementation.NCCL if all_reduce == "nccl" else implementation.RING)
    with watchdog.deadline(peer_timeout_secs, "not every worker of TF_CONFIG came up within "
                   f"{peer_timeout_secs} s; check that each one was started and that its "
                   "port is reachable"):
      return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
  if name == "parameter_server":
    check_cluster(name, cluster.current().cluster)
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    with watchdog.deadline(peer_timeout_secs, "not every task of TF_CONFIG came up within "
                   f"{peer_timeout_secs} s; check that each one was started and that its "
                   "port is reachable"):
      partitioner = None
      if partition_min_bytes:
        partitioner = tf.distribute.experimental.partitioners.MinSizePartitioner(
            min_shard_bytes=partition_min_bytes,
            max_shards=resolver.cluster_spec().num_tasks("ps"))
      return tf.distribute.ParameterServerStrategy(resolver, variable_partitioner=partitioner)
  raise UsageError(f"unknown --strategy {name!r}; choose from {', '.join(STRATEGIES)}")


def parameter_server_devices(config, task_type):
  """The DeviceConfig a task of a parameter-server job applies, from the run's `config`.

  A worker computes one replica: its first visible GPU (or its CPU), so --num_gpus must be 1
  (ParameterServerStrategy counts every GPU a worker's server exposes as a replica, while the
  loop feeds and scales one per worker). The ps tasks hold the variables on their CPUs (the
  strategy puts them on `/job:ps/task:i/device:CPU:0`) and the chief only schedules: both
  hide their GPUs, which TensorFlow would otherwise map whole at the server's start.
  """
  if config.num_gpus != 1:
    raise UsageError(f"--strategy=parameter_server runs one replica per worker, but "
                     f"--num_gpus={config.num_gpus}; use --num_gpus=1 and more workers")
  if task_type == "worker":
    return config
  return dataclasses.replace(config, cpu_only=True, visible_gpus=None, memory_fraction=None,
                             memory_limit_mb=None, precision="fp32")  # runs no steps


def serve():
  """A ParameterServerStrategy worker or ps task: serve until stopped (TF_CONFIG's task).
  Started by the entry point instead of a loop, after `setup(parameter_server_devices(..))`;
  the chief's loop schedules work on it."""
  resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
  server = tf.distribute.Server(resolver.cluster_spec(), job_name=resolver.task_type,
                                task_index=resolver.task_id, protocol="grpc", start=True)
  server.join()
