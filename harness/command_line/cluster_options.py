"""The flags of a training job with peers, and what they become: this task's place in the
cluster (TF_CONFIG, a Slurm step, or the TF1 --job_name flags), how long to wait for peers, and
a managed cluster's evaluator task. Both trainers define them beside harness.command_line.options'
flags.
"""

import os

from cifar10 import config

from cifar10 import eval_config
from cifar10 import settings
from harness.command_line import flag_ranges
from harness.command_line import options
from harness.clusters import slurm


def define_cluster_flags(fv):
  """The flags of a training job with peers (TF_CONFIG, or the TF1 --job_name flags)."""
  clusters = settings.CLUSTERS
  flag_ranges.string("cluster_resolver", "auto", "Where a cluster job's tasks are read: "
                     "tf_config (TF_CONFIG, as Kubeflow's TFJob and Vertex AI write it), "
                     "slurm (the srun step's SLURM_* variables), auto (TF_CONFIG if set, "
                     "else a Slurm step of more than one task).", flag_values=fv,
                     subject=clusters)
  flag_ranges.integer("slurm_port_base", slurm.SLURM_PORT_BASE, "Slurm: a node's tasks "
                      "listen on this port and the next ones.", flag_values=fv,
                      bounds=(1, 65535),
                      applies="a Slurm step (--cluster_resolver=slurm or auto)",
                      subject=clusters)
  flag_ranges.integer("slurm_ps_tasks", 1, "Slurm, parameter_server and the v1 ps/worker "
                      "job: how many of the step's tasks are ps tasks (after the chief).",
                      flag_values=fv, bounds=(1, flag_ranges.MAX_TASKS),
                      applies="a Slurm step: parameter_server, the v1 ps/worker job",
                      subject=clusters)
  flag_ranges.integer("evaluator_num_examples",
                      options.default(eval_config.EvalConfig, "num_examples"), "A managed "
                      "cluster's evaluator task (TF_CONFIG task type 'evaluator'): test "
                      "examples scored per checkpoint.", flag_values=fv,
                      bounds=(1, flag_ranges.EVAL_SPLIT),
                      applies="a cluster's evaluator task; at most its split's size",
                      subject=clusters)
  flag_ranges.integer("peer_timeout_secs", 300, "Cluster jobs: how long to wait for the "
                      "other tasks to come up (ps tasks and chief, or every worker); a peer "
                      "that dies later is noticed by the strategy within seconds.",
                      flag_values=fv, bounds=(1, flag_ranges.WEEK_SECS),
                      applies="cluster jobs", subject=clusters)


def cluster_task(values, layout):
  """This task's cluster.Task from --cluster_resolver; `layout` as slurm.from_slurm takes
  it, with "ps" counted by --slurm_ps_tasks."""
  layout = [(job, values.slurm_ps_tasks if job == "ps" else count) for job, count in layout]
  return slurm.resolve(values.cluster_resolver, layout, values.slurm_port_base)


# How often a cluster's evaluator task looks for the chief's next checkpoint.
EVALUATOR_POLL_SECS = 2


def evaluator_config(values, train, task):
  """What a managed cluster's evaluator task runs: the continuous evaluator over the chief's
  train_dir (shared storage), writing into train_dir/eval, until train's final step, or until
  the chief (cluster.Task `task`'s chief, or worker 0) has not answered for
  --peer_timeout_secs."""
  return eval_config.EvalConfig(
      checkpoint_dir=train.train_dir, eval_dir=os.path.join(train.train_dir, "eval"),
      num_examples=values.evaluator_num_examples, examples_flag="evaluator_num_examples",
      eval_interval_secs=EVALUATOR_POLL_SECS,
      dataset=train.dataset, data_dir=train.data_dir, download=train.download,
      seed=train.seed, last_step=train.max_steps,
      chief=(task.training_cluster.get("chief") or task.training_cluster.get("worker")
             or [None])[0],
      chief_timeout_secs=values.peer_timeout_secs,
      devices=options.device_config(values, num_gpus=1))  # the task's own GPU flags, one device
