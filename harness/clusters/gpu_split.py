"""Which GPUs each task of a local cluster sees: its own, never every one of the machine.

A task started with the parent's environment sees every GPU of the machine: a
MultiWorkerMirroredStrategy worker then takes all of them as its replicas (whatever its
--num_gpus says), and every task, a ps included, maps memory on every GPU. The launchers
give each task `CUDA_VISIBLE_DEVICES`: the next `gpus` of the machine's GPUs for a task that
computes (its --num_gpus), none for a server (a ps task) or a coordinator. On a machine
without GPUs nothing is set.
"""

import os
import subprocess

from cifar10.errors import UsageError


def machine_gpus():
  """The GPU ids this process may hand out: CUDA_VISIBLE_DEVICES's list where it is set, else
  one per GPU nvidia-smi lists, else none (no GPU, or no driver)."""
  if "CUDA_VISIBLE_DEVICES" in os.environ:
    return [g for g in os.environ["CUDA_VISIBLE_DEVICES"].split(",") if g.strip()]
  try:
    out = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=10, check=True)
  except (OSError, subprocess.SubprocessError):
    return []
  return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def flag_value(args, name, default):
  """The integer value of --name in a binary's arguments (the last one wins, as absl's)."""
  value = default
  for i, arg in enumerate(args):
    if arg.startswith(f"--{name}="):
      value = arg.split("=", 1)[1]
    elif arg == f"--{name}" and i + 1 < len(args):
      value = args[i + 1]
  try:
    return int(value)
  except ValueError:
    raise UsageError(f"--{name}={value} is not a whole number") from None


def assign(tasks, available):
  """Sets CUDA_VISIBLE_DEVICES in the env of each launcher.Task whose `gpus` is not None:
  contiguous blocks of `available` in task order, "" for a task of 0 GPUs. UsageError if the
  tasks ask for more GPUs than there are. Nothing without GPUs (CPU replicas)."""
  if not available:
    return
  wanted = sum(t.gpus or 0 for t in tasks if t.gpus is not None)
  if wanted > len(available):
    raise UsageError(f"the job's tasks use {wanted} GPU(s) together ("
                     + ", ".join(f"{t.name}: {t.gpus}" for t in tasks if t.gpus)
                     + f") but this machine has {len(available)} ({','.join(available)}); "
                     "lower --num_gpus or --workers")
  ids = iter(available)
  for task in tasks:
    if task.gpus is not None:
      task.env["CUDA_VISIBLE_DEVICES"] = ",".join(next(ids) for _ in range(task.gpus))
