r"""Trains the CIFAR-10 model with TF2's tf.distribute.

  python -m strategies.train --num_gpus=2 --dataset=synthetic --max_steps=1000 \
      --train_dir=/tmp/cifar10_train

The classic cifar10_multi_gpu_train.py, ported: one replica per GPU (or per
logical CPU device where there is none). The same command again resumes from the
newest checkpoint in --train_dir; SIGTERM or Ctrl-C saves and stops. Curves:
tensorboard --logdir=<train_dir>; scores: python -m strategies.eval.
"""
# Kept short on purpose: the flags become cifar10.config objects, the devices and the strategy
# are built here and handed to the loop (strategies.loop, or strategies.cluster_loop on the
# chief of a parameter-server job).

import os

from absl import flags

from cifar10 import settings
from cifar10.errors import UsageError
from harness.command_line import cli
from harness.command_line import flag_ranges
from harness.command_line import cluster_options
from harness.devices import determinism
from harness.command_line import options


# The jobs of a Slurm step's tasks, in rank order (None: the rest); worker 0 is the chief
# of multi_worker_mirrored.
LAYOUT = {"multi_worker_mirrored": [("worker", None)],
          "parameter_server": [("chief", 1), ("ps", None), ("worker", None)]}


def define_flags(fv):
  options.define_train_flags(fv)
  cluster_options.define_cluster_flags(fv)
  flag_ranges.enum("strategy", "mirrored", settings.STRATEGIES, "central_storage: the "
                   "towers' layout, one copy of the variables on the CPU, or the first GPU "
                   "with GPUs, updated once per step and read by every replica.",
                   flag_values=fv, subject=settings.DEVICES)
  flag_ranges.integer("steps_per_loop", 1, "Steps per call of the compiled step, with no "
                      "host round trip between them (every strategy but parameter_server); "
                      "the same weights, logs and checkpoints. Calls end where a step logs, "
                      "writes summaries or saves.", flag_values=fv, bounds=(1, 100000),
                      applies="every strategy but parameter_server",
                      subject=settings.DEVICES)
  flag_ranges.boolean("jit_compile", False, "XLA-compile each replica's forward and backward "
                      "pass (mirrored, one_device and multi_worker_mirrored); outside the "
                      "bit-equality contract, and slower than TensorFlow's kernels on CPU.",
                      flag_values=fv, subject=settings.DEVICES)
  flag_ranges.string("all_reduce", "auto", "mirrored: auto | nccl | hierarchical_copy | "
                     "reduce_to_one_device; multi_worker_mirrored: auto | ring | nccl (auto: "
                     "NCCL between GPUs, a sum on the first device between logical CPUs; "
                     "RING across workers).", flag_values=fv, subject=settings.DEVICES)
  flag_ranges.integer("ps_partition_min_bytes", 0, "parameter_server: split each weight of "
                      "at least twice this many bytes into row blocks of at least this size "
                      "over the ps tasks (0: no partitioning).", flag_values=fv,
                      bounds=(0, 2 ** 40), applies="parameter_server",
                      subject=settings.CLUSTERS)


def main(values):
  device_config = options.device_config(values)
  train_config = options.train_config(values)
  if train_config.scale == "dynamic" and values.strategy == "parameter_server":
    raise UsageError("--loss_scale=dynamic applies to mirrored, one_device and "
                     "multi_worker_mirrored (asynchronous workers would update one scale "
                     "out of step); give a power of two")
  if train_config.profile_steps and values.strategy == "parameter_server":
    raise UsageError("--profile_steps applies to mirrored, one_device and "
                     "multi_worker_mirrored (profile a parameter_server job's tasks with "
                     "tf.profiler.experimental.client.trace)")
  if values.jit_compile and values.strategy in ("parameter_server", "central_storage"):
    # central_storage: XLA cannot reach a variable kept on one device from another
    # replica's device (a 90-line traceback, after the run folder was made).
    raise UsageError("--jit_compile applies to mirrored, one_device and multi_worker_mirrored")
  if values.steps_per_loop > 1 and values.strategy == "parameter_server":
    raise UsageError("--steps_per_loop applies to mirrored, one_device and "
                     "multi_worker_mirrored; parameter_server schedules one step per call")
  # TensorFlow is imported only now, so bad flags are answered in milliseconds.
  from absl import logging  # pylint: disable=g-import-not-at-top
  from harness.clusters import cluster  # pylint: disable=g-import-not-at-top
  from strategies import devices  # pylint: disable=g-import-not-at-top
  from harness.folders import run_record  # pylint: disable=g-import-not-at-top
  # The pools the run started with, on whatever CPU set a resume lands on.
  device_config = run_record.resumed_threads(device_config, train_config)
  if values.strategy in ("mirrored", "central_storage", "one_device"):
    if cluster.is_set():
      logging.info("TF_CONFIG is set but ignored: --strategy=%s runs on this machine only",
                   values.strategy)
      # Out of this process's environment too: MirroredStrategy reads it when it is made (a
      # value that is not JSON failed there with a JSONDecodeError traceback).
      os.environ.pop("TF_CONFIG")
  elif values.strategy in ("multi_worker_mirrored", "parameter_server"):
    task = cluster_options.cluster_task(values, LAYOUT[values.strategy])
    if task.is_evaluator:
      from strategies import evaluator  # pylint: disable=g-import-not-at-top
      evaluator.run(cluster_options.evaluator_config(values, train_config, task))
      return
    devices.check_cluster(values.strategy, task.training_cluster)
    cluster.drop_evaluator_from_environment(task)
    cluster.check_port(task)
    if values.strategy == "parameter_server":
      device_config = devices.parameter_server_devices(device_config, task.type)
      if task.type in ("worker", "ps"):
        devices.setup(device_config)
        devices.serve()  # workers and ps tasks only serve; the chief runs the loop
        return
  strategy = devices.get_strategy(values.strategy, devices.setup(device_config),
                                  values.peer_timeout_secs, values.ps_partition_min_bytes,
                                  values.all_reduce)
  if values.jit_compile and determinism.applied():
    raise UsageError("--jit_compile under --deterministic: XLA has no deterministic max-pool "
                     "gradient on GPUs; add --nodeterministic (XLA is outside the bit "
                     "contract anyway)")
  if values.strategy == "parameter_server":
    from strategies import cluster_loop  # pylint: disable=g-import-not-at-top
    cluster_loop.train(train_config, strategy)
  else:
    from strategies import loop  # pylint: disable=g-import-not-at-top
    loop.train(train_config, strategy, steps_per_loop=values.steps_per_loop,
             jit_compile=values.jit_compile)


def run():
  """The console script (pyproject.toml), as `python -m strategies.train`."""
  cli.app_run(flags.FLAGS, define_flags, main)


if __name__ == "__main__":
  run()
