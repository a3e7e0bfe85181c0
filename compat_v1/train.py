"""Trains the CIFAR-10 CNN the TF1 way: towers, average_gradients, Session, Saver.

  python -m compat_v1.train --num_gpus=2 --dataset=synthetic --max_steps=1000 \
      --train_dir=/tmp/cifar10_train_v1

Same flags and defaults as `strategies.train` (without --strategy); with the same --seed,
--dataset, --num_gpus, --batch_size and --max_steps both write the same weights.

The TF1 cluster recipe takes the classic flags (or TF_CONFIG), one process per task:
  python -m compat_v1.train --job_name=ps --task_index=0 --ps_hosts=h0:2222 \
      --worker_hosts=h1:2222,h2:2222 ...
  python -m compat_v1.train --job_name=worker --task_index=0 ... [--sync_replicas]
(`python -m compat_v1.launch --workers=2 --ps=1 -- <flags>` does this on one machine).
"""

import json
import os

from absl import flags

import cifar10_flags as common

common.define_data_flags()
common.define_device_flags()
common.define_train_flags()
flags.DEFINE_string("job_name", None, "ps | worker: run one task of a ps/worker cluster.")
flags.DEFINE_integer("task_index", 0, "Index of this task within its job.")
flags.DEFINE_list("ps_hosts", [], "host:port of every ps task.")
flags.DEFINE_list("worker_hosts", [], "host:port of every worker task (worker 0 is chief).")
flags.DEFINE_bool("sync_replicas", False, "Aggregate the gradients of all workers per update "
                  "(SyncReplicasOptimizer) instead of asynchronous updates.")
FLAGS = flags.FLAGS


def _cluster_task():
  """(cluster dict, job, index) from the flags or TF_CONFIG; None for a single machine."""
  if FLAGS.job_name:
    if FLAGS.job_name not in ("ps", "worker") or not FLAGS.worker_hosts or not FLAGS.ps_hosts:
      raise common.UsageError("--job_name must be ps or worker, with --ps_hosts and "
                              "--worker_hosts both given")
    return {"ps": FLAGS.ps_hosts, "worker": FLAGS.worker_hosts}, FLAGS.job_name, \
        FLAGS.task_index
  config = json.loads(os.environ.get("TF_CONFIG") or "{}")
  if config.get("cluster"):
    task = config.get("task", {})
    return config["cluster"], task.get("type", "worker"), int(task.get("index", 0))
  return None


def main():
  devices_config = common.device_config(FLAGS)
  train_config = common.train_config(FLAGS)
  cluster_task = _cluster_task()
  if cluster_task is None:
    from compat_v1 import loop  # pylint: disable=g-import-not-at-top
    loop.run(train_config, devices_config)
    return
  spec, job, index = cluster_task
  if FLAGS.sync_replicas and train_config.ema_reads == "previous":
    raise common.UsageError("--ema_reads=previous is not available with --sync_replicas: "
                            "SyncReplicasOptimizer updates the moving averages after the "
                            "update")
  if not 0 <= index < len(spec.get(job, [])):
    raise common.UsageError(f"--task_index={index} but the {job} job has "
                            f"{len(spec.get(job, []))} task(s)")
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from compat_v1 import cluster  # pylint: disable=g-import-not-at-top
  cluster.run(train_config, devices_config, tf.train.ClusterSpec(spec), job, index,
              FLAGS.sync_replicas)


if __name__ == "__main__":
  common.app_run(main)
