"""Runs the TF1 ps/worker recipe as a local cluster: one process per task on 127.0.0.1.

  python -m compat_v1.launch --workers=2 --ps=1 -- --dataset=synthetic --max_steps=1000 \
      --train_dir=/tmp/cifar10_ps [--sync_replicas]

Each task is `compat_v1.train --job_name=... --task_index=... --ps_hosts=... --worker_hosts=...`
on free ports; worker 0 is the chief. Log lines are prefixed with their task, Ctrl-C stops
every task, the ps tasks are stopped when the chief is done, and the exit status is the job's.
"""

import sys

from absl import flags

import cifar10_flags as common
from cifar10 import launcher

flags.DEFINE_integer("workers", 2, "Worker processes.")
flags.DEFINE_integer("ps", 1, "Parameter-server processes.")
flags.DEFINE_integer("timeout_secs", 0, "Stop the whole job after this long (0: never).")
FLAGS = flags.FLAGS


def main(train_args):
  if FLAGS.workers < 1 or FLAGS.ps < 1 or FLAGS.timeout_secs < 0:
    raise common.UsageError("--workers and --ps must be >= 1, --timeout_secs >= 0")
  spec = launcher.cluster(ps=FLAGS.ps, worker=FLAGS.workers)
  hosts = [f"--ps_hosts={','.join(spec['ps'])}", f"--worker_hosts={','.join(spec['worker'])}"]
  tasks = [launcher.Task(job, i, [sys.executable, "-m", "compat_v1.train", f"--job_name={job}",
                                  f"--task_index={i}", *hosts, *train_args], server=job == "ps")
           for job in ("ps", "worker") for i in range(len(spec[job]))]
  status = launcher.run(tasks, chief="worker:0", timeout=FLAGS.timeout_secs or None)
  if status:
    raise common.UsageError(launcher.describe(status))


if __name__ == "__main__":
  common.app_run(main, takes_args=True)
