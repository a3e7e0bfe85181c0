r"""Runs a TF2 training job as a local cluster: a process per task on 127.0.0.1.

  python -m strategies.launch --workers=2 -- --dataset=synthetic \
      --max_steps=1000 --train_dir=/tmp/cifar10_mwms

The flags after -- are strategies.train's. With --ps=0 (the default) every task
is a --strategy=multi_worker_mirrored worker; worker 0 is the chief and writes
checkpoints and summaries. With --ps=M > 0 it is a ParameterServerStrategy job:
a chief (the coordinator, which writes checkpoints and summaries), the workers,
and M ps tasks; a worker that dies does not end the job. Each log line names its
task; Ctrl-C stops every task; the exit status is the job's. With GPUs each
worker sees only its own --num_gpus of them. On real machines, run the same
command on each host with its own TF_CONFIG (BUILD.md).
"""

import sys

from absl import flags

from cifar10.errors import UsageError
from harness.command_line import cli
from harness.command_line import flag_ranges
from harness.clusters import cluster
from harness.clusters import gpu_split
from harness.clusters import launcher


def define_flags(fv):
  flag_ranges.integer("workers", 2, "Worker processes.", flag_values=fv)
  flag_ranges.integer("ps", 0, "Parameter-server processes (0: synchronous all-reduce with "
                      "multi_worker_mirrored; more: parameter_server).", flag_values=fv)
  flag_ranges.integer("timeout_secs", 0, "Stop the whole job after this long (0: never).",
                      flag_values=fv)


def main(values, train_args):
  per_worker = gpu_split.flag_value(train_args, "num_gpus", 1)
  if values.ps:
    spec = launcher.cluster(chief=1, worker=values.workers, ps=values.ps)
    argv = [sys.executable, "-m", "strategies.train", "--strategy=parameter_server", *train_args]
    # GPUs: each worker its --num_gpus; the ps tasks and the coordinator none.
    tasks = [launcher.Task(job, i, argv, env={"TF_CONFIG": cluster.to_json(spec, job, i)},
                           server=job != "chief", expendable=job == "worker",
                           gpus=per_worker if job == "worker" else 0)
             for job in ("ps", "worker", "chief") for i in range(len(spec[job]))]
    chief = "chief:0"
  else:
    spec = launcher.cluster(worker=values.workers)
    tasks = [launcher.Task("worker", i, [sys.executable, "-m", "strategies.train",
                                         "--strategy=multi_worker_mirrored", *train_args],
                           env={"TF_CONFIG": cluster.to_json(spec, "worker", i)},
                           gpus=per_worker)
             for i in range(values.workers)]
    chief = "worker:0"
  status = launcher.run(tasks, chief=chief, timeout=values.timeout_secs or None)
  if status:
    raise UsageError(launcher.describe(status))


def run():
  """The console script (pyproject.toml), as `python -m strategies.launch`."""
  cli.app_run(flags.FLAGS, define_flags, main, takes_args=True)


if __name__ == "__main__":
  run()
