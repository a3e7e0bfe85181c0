"""Which cluster a task is part of, by --cluster_resolver: TF_CONFIG, or a Slurm job step.

`resolve(resolver, layout)` is this process's harness.clusters.cluster.Task: TF_CONFIG's (as
Kubeflow's TFJob and Vertex AI write it), or, under `srun`, the task Slurm's variables describe
(SLURM_PROCID, the step's node list and tasks per node), written into this process's
TF_CONFIG so that TensorFlow and the rest of the project read one place. Every Slurm value is
checked: a variable that is not a number, a node list that is not Slurm's form or that names
more nodes than any cluster has, is one line.
"""

import os
import re

from cifar10.errors import UsageError
from harness.clusters.cluster import parse
from harness.clusters.cluster import Task
from harness.clusters.cluster import to_json

# The first port of a node's tasks, as TensorFlow's SlurmClusterResolver numbers them.
SLURM_PORT_BASE = 8888
RESOLVERS = ("auto", "tf_config", "slurm")


def in_slurm_step(environ=None):
  """Whether this process is a task of a Slurm job step (started by `srun`)."""
  environ = os.environ if environ is None else environ
  return "SLURM_PROCID" in environ and ("SLURM_STEP_NODELIST" in environ
                                        or "SLURM_JOB_NODELIST" in environ)


# More nodes than any Slurm cluster has: a list longer than this is a typo, not a job (and
# "n[0-99999999]" would fill the memory before anything else happened).
MAX_SLURM_NODES = 100000


def expand_hostlist(text):
  """Slurm's compressed host list, "gpu[01-03,7],login1" -> [gpu01, gpu02, gpu03, gpu7,
  login1] (zero padding kept, ranges in order)."""
  hosts = []
  bad = UsageError(f"SLURM node list {text!r} is not in Slurm's host list form")
  if text.count("[") != text.count("]"):
    raise bad  # an unclosed bracket would otherwise be a host named "node[1-"
  for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?[^,]*", text):
    match = re.fullmatch(r"([^\[]*)\[([^\]]*)\](.*)", part)
    if not match:
      if "[" in part or "]" in part:
        raise bad
      hosts.append(part)
      continue
    prefix, ranges, suffix = match.groups()
    for item in ranges.split(","):
      first, _, last = item.partition("-")
      if not first.isdigit() or (last and not last.isdigit()):
        raise bad
      if len(hosts) + int(last or first) - int(first) >= MAX_SLURM_NODES:
        raise UsageError(f"SLURM node list {text!r} names more than {MAX_SLURM_NODES} nodes")
      for number in range(int(first), int(last or first) + 1):
        hosts.append(f"{prefix}{number:0{len(first)}d}{suffix}")
  return hosts


def _count(value, name):
  """A Slurm variable that must be a number >= 0; UsageError naming it otherwise."""
  if value is None or not str(value).strip().isdigit():
    raise UsageError(f"{name}={value!r} is not a number: this does not look like a task "
                     "started by srun (use --cluster_resolver=tf_config or unset SLURM_*)")
  return int(value)


def expand_tasks_per_node(text):
  """Slurm's "2(x3),1" -> [2, 2, 2, 1]."""
  counts = []
  for part in text.split(","):
    match = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
    if not match:
      raise UsageError(f"SLURM tasks per node {text!r} is not in Slurm's form, e.g. 2(x3),1")
    counts += [int(match[1])] * int(match[2] or 1)
  return counts


def from_slurm(layout, port_base=SLURM_PORT_BASE, environ=None):
  """The Task of this Slurm task. Ranks (SLURM_PROCID) are laid out over the step's nodes in
  order, a node's tasks on ports port_base, port_base + 1, ... (srun's default block
  distribution, and TensorFlow's SlurmClusterResolver's numbering); `layout` gives the jobs
  in rank order, e.g. [("chief", 1), ("ps", 1), ("worker", None)], None taking the rest."""
  environ = os.environ if environ is None else environ
  get = lambda *names: next((environ[n] for n in names if n in environ), None)
  nodes = expand_hostlist(get("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST") or "")
  per_node = expand_tasks_per_node(get("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE")
                                   or ",".join("1" for _ in nodes))
  if len(per_node) != len(nodes):
    raise UsageError(f"SLURM lists {len(nodes)} node(s) but tasks for {len(per_node)}")
  addresses = [f"{host}:{port_base + k}" for host, count in zip(nodes, per_node)
               for k in range(count)]
  rank = _count(get("SLURM_PROCID"), "SLURM_PROCID")
  fixed = sum(count for _, count in layout if count is not None)
  needed = fixed + sum(1 for _, count in layout if count is None)
  if len(addresses) < needed or not 0 <= rank < len(addresses):
    raise UsageError(f"the Slurm step has {len(addresses)} task(s) and this is task {rank}; "
                     f"the job needs {needed} or more ("
                     + ", ".join(f"{count or 'at least 1'} {job}" for job, count in layout)
                     + ")")
  cluster, start, task = {}, 0, None
  for job, count in layout:
    count = len(addresses) - fixed if count is None else count
    cluster[job] = addresses[start:start + count]
    if start <= rank < start + count:
      task = Task(cluster, job, rank - start)
    start += count
  node = environ.get("SLURMD_NODENAME")
  host = addresses[rank].rpartition(":")[0]
  if node and node != host:
    raise UsageError(f"Slurm task {rank} runs on {node} but the block layout puts it on "
                     f"{host}; run srun with --distribution=block (its default)")
  return Task({job: hosts for job, hosts in cluster.items() if hosts}, task.type, task.index)


def resolve(resolver, layout, port_base=SLURM_PORT_BASE, environ=None):
  """This process's Task from --cluster_resolver (auto: TF_CONFIG if set, else Slurm's step
  if this is one of several tasks, else none: `srun -n 1` trains on its machine). A Slurm
  task's cluster is written into this process's TF_CONFIG, where TensorFlow's strategies and
  the rest of this project read it."""
  environ = os.environ if environ is None else environ
  if resolver not in RESOLVERS:
    raise UsageError(f"--cluster_resolver must be one of {', '.join(RESOLVERS)}, got "
                     f"{resolver!r}")
  use_slurm = resolver == "slurm" or (
      resolver == "auto" and not environ.get("TF_CONFIG") and in_slurm_step(environ)
      and _count(environ.get("SLURM_STEP_NUM_TASKS", environ.get("SLURM_NTASKS", "1")),
                 "SLURM_STEP_NUM_TASKS or SLURM_NTASKS") > 1)
  if not use_slurm:
    return parse(environ.get("TF_CONFIG"))
  if not in_slurm_step(environ):
    raise UsageError("--cluster_resolver=slurm but this is not a Slurm job step: start each "
                     "task with srun (SLURM_PROCID and SLURM_STEP_NODELIST are not set)")
  task = from_slurm(layout, port_base, environ)
  environ["TF_CONFIG"] = to_json(task.cluster, task.type, task.index)
  return task
