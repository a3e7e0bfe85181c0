r"""Runs the TF1 ps/worker recipe as a local cluster: a process per task.

  python -m compat_v1.launch --workers=2 --ps=1 -- --dataset=synthetic \
      --max_steps=1000 --train_dir=/tmp/cifar10_ps [--sync_replicas]

The flags after -- are compat_v1.train's. Each task is compat_v1.train with
--job_name, --task_index, --ps_hosts and --worker_hosts on free ports of
127.0.0.1; worker 0 is the chief. Each log line names its task, Ctrl-C stops
every task, the ps tasks stop when the chief is done, and the exit status is
the job's. With GPUs each worker sees only its own --num_gpus of them.
"""

import sys

from absl import flags

from cifar10.errors import UsageError
from harness.command_line import cli
from harness.command_line import flag_ranges
from harness.clusters import gpu_split
from harness.clusters import launcher


def define_flags(fv):
  flag_ranges.integer("workers", 2, "Worker processes.", flag_values=fv)
  flag_ranges.integer("ps", 1, "Parameter-server processes.", flag_values=fv,
                      applies="compat_v1.launch: at least 1")
  flag_ranges.integer("timeout_secs", 0, "Stop the whole job after this long (0: never).",
                      flag_values=fv)


def main(values, train_args):
  if values.ps < 1:
    raise UsageError("--ps must be at least 1: the TF1 recipe's variables live on ps tasks")
  spec = launcher.cluster(ps=values.ps, worker=values.workers)
  hosts = [f"--ps_hosts={','.join(spec['ps'])}", f"--worker_hosts={','.join(spec['worker'])}"]
  per_worker = gpu_split.flag_value(train_args, "num_gpus", 1)  # towers; the ps tasks none
  tasks = [launcher.Task(job, i, [sys.executable, "-m", "compat_v1.train", f"--job_name={job}",
                                  f"--task_index={i}", *hosts, *train_args], server=job == "ps",
                         gpus=per_worker if job == "worker" else 0)
           for job in ("ps", "worker") for i in range(len(spec[job]))]
  status = launcher.run(tasks, chief="worker:0", timeout=values.timeout_secs or None)
  if status:
    raise UsageError(launcher.describe(status))


def run():
  """The console script (pyproject.toml), as `python -m compat_v1.launch`."""
  cli.app_run(flags.FLAGS, define_flags, main, takes_args=True)


if __name__ == "__main__":
  run()
