r"""Trains the CIFAR-10 model the TF1 way: towers, average_gradients, a Session.

  python -m compat_v1.train --num_gpus=2 --dataset=synthetic --max_steps=1000 \
      --train_dir=/tmp/cifar10_train_v1

The flags and defaults of strategies.train (but --strategy): with the same
--seed, --dataset, --num_gpus, --batch_size and --max_steps the two write the
same weights. The same command again resumes from --train_dir; SIGTERM or
Ctrl-C saves and stops.

The TF1 cluster recipe takes the classic flags (or TF_CONFIG), a process a task:
  python -m compat_v1.train --job_name=ps --task_index=0 --ps_hosts=h0:2222 \
      --worker_hosts=h1:2222,h2:2222 ...
  python -m compat_v1.train --job_name=worker --task_index=0 ... \
      [--sync_replicas]
(python -m compat_v1.launch --workers=2 --ps=1 -- <flags> runs one locally).
"""
# The devices and the ConfigProto are built here and handed to the loop (compat_v1.loop, or
# compat_v1.cluster_loop for a task of a ps/worker cluster).

import dataclasses

from absl import flags

from cifar10 import settings
from cifar10.errors import UsageError
from harness.command_line import cli
from harness.command_line import flag_ranges
from harness.clusters import cluster
from harness.command_line import cluster_options
from harness.command_line import options


def define_flags(fv):
  options.define_train_flags(fv)
  cluster_options.define_cluster_flags(fv)
  flag_ranges.string("job_name", None, "ps | worker: run one task of a ps/worker cluster.",
                     flag_values=fv, subject=settings.CLUSTERS)
  flag_ranges.integer("task_index", 0, "Index of this task within its job.", flag_values=fv,
                      bounds=(0, flag_ranges.MAX_TASKS - 1), applies="--job_name=ps|worker",
                      subject=settings.CLUSTERS)
  flag_ranges.listing("ps_hosts", [], "host:port of every ps task.", flag_values=fv,
                      subject=settings.CLUSTERS)
  flag_ranges.listing("worker_hosts", [], "host:port of every worker task (worker 0 is "
                      "chief).", flag_values=fv, subject=settings.CLUSTERS)
  flag_ranges.boolean("sync_replicas", False, "Aggregate the gradients of all workers per "
                      "update (SyncReplicasOptimizer) instead of asynchronous updates.",
                      flag_values=fv, subject=settings.CLUSTERS)


def _task(values):
  """This process's cluster.Task, from the classic flags or else TF_CONFIG or a Slurm step
  (--cluster_resolver); a TF_CONFIG without a ps job is not a ps/worker cluster and is
  ignored (with a log line)."""
  if values.job_name:
    if values.job_name not in ("ps", "worker") or not values.worker_hosts \
        or not values.ps_hosts:
      raise UsageError("--job_name must be ps or worker, with --ps_hosts and --worker_hosts "
                       "both given")
    return cluster.Task({"ps": values.ps_hosts, "worker": values.worker_hosts},
                        values.job_name, values.task_index)
  # Under Slurm: the first --slurm_ps_tasks tasks of the step serve, the rest are workers.
  task = cluster_options.cluster_task(values, [("ps", None), ("worker", None)])
  if task.is_evaluator:
    return task
  if task.cluster and "ps" not in task.cluster:
    from absl import logging  # pylint: disable=g-import-not-at-top
    logging.info("TF_CONFIG is set but ignored: it has no ps job, so this is not a ps/worker "
                 "task; training on this machine")
    return cluster.Task(None)
  return task


def main(values):
  device_config = options.device_config(values)
  train_config = options.train_config(values)
  task = _task(values)
  if task.is_evaluator:
    from compat_v1 import evaluator  # pylint: disable=g-import-not-at-top
    evaluator.run(cluster_options.evaluator_config(values, train_config, task))
    return
  if task.cluster and train_config.scale == "dynamic":
    raise UsageError("--loss_scale=dynamic applies to single-machine runs (its state is "
                     "updated by each step); give a power of two for a ps/worker job")
  if task.cluster and train_config.profile_steps:
    raise UsageError("--profile_steps applies to single-machine runs (profile a ps/worker "
                     "task with tf.profiler.experimental.client.trace)")
  if task.cluster and values.sync_replicas and train_config.ema_reads == "previous":
    raise UsageError("--ema_reads=previous is not available with --sync_replicas: "
                     "SyncReplicasOptimizer updates the moving averages after the update")
  if task.cluster and not 0 <= task.index < len(task.cluster.get(task.type, [])):
    raise UsageError(f"--task_index={task.index} but the {task.type} job has "
                     f"{len(task.cluster.get(task.type, []))} task(s)")
  cluster.check_port(task)
  # TensorFlow is imported only now, so bad flags are answered in milliseconds.
  from compat_v1 import devices  # pylint: disable=g-import-not-at-top
  from harness.folders import run_record  # pylint: disable=g-import-not-at-top
  if task.type == "ps":  # holds the variables, runs no steps
    device_config = dataclasses.replace(device_config, precision="fp32")
  device_config = run_record.resumed_threads(device_config, train_config)
  names, session_config = devices.setup(device_config)
  if task.cluster is None:
    from compat_v1 import loop  # pylint: disable=g-import-not-at-top
    loop.train(train_config, names, session_config)
  else:
    from compat_v1 import cluster_loop  # pylint: disable=g-import-not-at-top
    cluster_loop.train(train_config, names, session_config, task, values.sync_replicas,
                     values.peer_timeout_secs)


def run():
  """The console script (pyproject.toml), as `python -m compat_v1.train`."""
  cli.app_run(flags.FLAGS, define_flags, main)


if __name__ == "__main__":
  run()
