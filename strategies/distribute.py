"""Maps `--strategy` to a tf.distribute strategy over the devices cifar10.devices set up.

`multi_worker_mirrored` reads its cluster from TF_CONFIG (see strategies.launch) and must be
created before any other op runs in the process.
"""

import contextlib
import json
import os
import subprocess
import sys

import tensorflow as tf

from cifar10.errors import UsageError

STRATEGIES = ("mirrored", "one_device", "multi_worker_mirrored", "parameter_server")


_WATCHDOG = """
import os, signal, sys, time
time.sleep(float(sys.argv[1]))
sys.stderr.write("error: " + sys.argv[2] + chr(10))
sys.stderr.flush()
os.kill(int(sys.argv[3]), signal.SIGKILL)
"""


@contextlib.contextmanager
def _deadline(seconds, message):
  """Kills this process with a one-line error if the block has not returned after `seconds`.

  MultiWorkerMirroredStrategy waits for every peer with no timeout of its own, holding the GIL
  and ignoring SIGTERM meanwhile, so only another process can end the wait.
  """
  if not seconds:
    yield
    return
  watchdog = subprocess.Popen([sys.executable, "-c", _WATCHDOG, str(seconds), message,
                               str(os.getpid())], stdin=subprocess.DEVNULL)
  try:
    yield
  finally:
    watchdog.kill()
    watchdog.wait()


def worker_identity():
  """(task type, index, number of workers) from TF_CONFIG; ('worker', 0, 1) without one."""
  config = json.loads(os.environ.get("TF_CONFIG") or "{}")
  task = config.get("task", {})
  workers = len(config.get("cluster", {}).get("worker", [])) or 1
  return task.get("type", "worker"), int(task.get("index", 0)), workers


def is_chief():
  """The task that writes checkpoints and summaries: chief, or worker 0 without a chief."""
  config = json.loads(os.environ.get("TF_CONFIG") or "{}")
  job, index, _ = worker_identity()
  if "chief" in config.get("cluster", {}):
    return job == "chief"
  return job == "worker" and index == 0


def get_strategy(name, devices, peer_timeout_secs=None, partition_min_bytes=0):
  """A strategy with one replica per device name in `devices`.

  `partition_min_bytes` (parameter_server only): weights of at least twice this size are
  split in row blocks of at least this size over the ps tasks (at most one block per task).

  On GPUs MirroredStrategy keeps its default, NCCL all-reduce. On logical CPU devices (where
  NCCL has no kernel) it sums on /cpu:0 and broadcasts (ReductionToOneDevice): the sum then
  runs in replica order every time, and unlike the collective all-reduce TF would pick, two
  strategies of different sizes can live in one process (the collective group keys clash).
  """
  if partition_min_bytes and name != "parameter_server":
    raise UsageError("--ps_partition_min_bytes applies to --strategy=parameter_server only")
  if partition_min_bytes < 0:
    raise UsageError(f"--ps_partition_min_bytes must be >= 0, got {partition_min_bytes}")
  if name == "mirrored":
    if all(d.lower().startswith("/cpu") for d in devices):
      return tf.distribute.MirroredStrategy(
          devices, cross_device_ops=tf.distribute.ReductionToOneDevice(devices[0]))
    return tf.distribute.MirroredStrategy(devices)
  if name == "one_device":
    if len(devices) != 1:
      raise UsageError(f"--strategy=one_device runs one replica, but --num_gpus={len(devices)}; "
                       "use --strategy=mirrored for more")
    return tf.distribute.OneDeviceStrategy(devices[0])
  if name == "multi_worker_mirrored":
    if "TF_CONFIG" not in os.environ:
      raise UsageError("--strategy=multi_worker_mirrored needs TF_CONFIG (one per worker); "
                       "python -m strategies.launch --workers=N sets it up on this machine")
    if len(devices) > 1 and all(d.lower().startswith("/cpu") for d in devices):
      raise UsageError("--strategy=multi_worker_mirrored runs one replica per worker on CPU; "
                       "use --num_gpus=1 and more --workers")
    # RING: the collective implementation that works on CPUs and GPUs alike. The timeout
    # bounds every collective, so a peer that dies mid-run is an error, not a hang.
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=tf.distribute.experimental.CommunicationImplementation.RING,
        timeout_seconds=peer_timeout_secs)
    with _deadline(peer_timeout_secs, "not every worker of TF_CONFIG came up within "
                   f"{peer_timeout_secs} s; check that each one was started and that its "
                   "port is reachable"):
      return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
  if name == "parameter_server":
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    jobs = resolver.cluster_spec().jobs
    if not {"chief", "worker", "ps"} <= set(jobs):
      raise UsageError("--strategy=parameter_server needs TF_CONFIG with chief, worker and ps "
                       "tasks; python -m strategies.launch --workers=N --ps=M sets it up")
    with _deadline(peer_timeout_secs, "not every task of TF_CONFIG came up within "
                   f"{peer_timeout_secs} s; check that each one was started and that its "
                   "port is reachable"):
      partitioner = None
      if partition_min_bytes:
        partitioner = tf.distribute.experimental.partitioners.MinSizePartitioner(
            min_shard_bytes=partition_min_bytes,
            max_shards=resolver.cluster_spec().num_tasks("ps"))
      return tf.distribute.ParameterServerStrategy(resolver, variable_partitioner=partitioner)
  raise UsageError(f"unknown --strategy {name!r}; choose from {', '.join(STRATEGIES)}")


def serve():
  """A ParameterServerStrategy worker or ps task: serve until stopped (TF_CONFIG's task)."""
  resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
  server = tf.distribute.Server(resolver.cluster_spec(), job_name=resolver.task_type,
                                task_index=resolver.task_id, protocol="grpc", start=True)
  server.join()
