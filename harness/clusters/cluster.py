"""TF_CONFIG, read and written in one place: which cluster a process is part of, and its task.

  {"cluster": {"chief": [...], "worker": ["host:port", ...], "ps": [...]},
   "task": {"type": "worker", "index": 1}}

`current()` reads the environment's TF_CONFIG (both trainers' entry points and loops ask it,
never the environment); `to_json` writes one for a launcher. TensorFlow's own
TFConfigClusterResolver reads the same variable inside MultiWorkerMirroredStrategy and
ParameterServerStrategy.

Managed clusters write it the same way: Kubeflow's TFJob and Vertex AI / AI Platform add keys
of their own (`"environment": "cloud"`, `"job"`, `"trial"`), ignored here. Their `evaluator`
task (`"task": {"type": "evaluator", "index": 0}`) is not part of the training cluster: its
cluster usually does not list it (AI Platform's never does; some hand-written ones do), and
`training_cluster` leaves it out of what the training tasks connect to.
"""

import dataclasses
import errno
import json
import os
import socket
from typing import Optional

from cifar10.errors import UsageError


EVALUATOR = "evaluator"


@dataclasses.dataclass(frozen=True)
class Task:
  """This process's place in a cluster; cluster is None on a single machine."""
  cluster: Optional[dict]
  type: str = "worker"
  index: int = 0

  def __post_init__(self):
    if self.cluster is None:
      return
    if not isinstance(self.cluster, dict) or not all(
        isinstance(hosts, list) for hosts in self.cluster.values()):
      raise UsageError("TF_CONFIG's cluster must map each job to a list of host:port")
    for job, hosts in self.cluster.items():
      for host in hosts:
        _check_address(job, host)

  @property
  def is_evaluator(self):
    """The side-car evaluator of a managed cluster: it scores the chief's checkpoints."""
    return self.cluster is not None and self.type == EVALUATOR

  @property
  def training_cluster(self):
    """The cluster without its evaluator: the tasks that train and talk gRPC."""
    if self.cluster is None:
      return None
    return {job: hosts for job, hosts in self.cluster.items() if job != EVALUATOR}

  @property
  def num_workers(self):
    return len((self.cluster or {}).get("worker", [])) or 1

  @property
  def is_chief(self):
    """The task that writes checkpoints and summaries: chief, or worker 0 without a chief."""
    if "chief" in (self.cluster or {}):
      return self.type == "chief"
    return self.type == "worker" and self.index == 0


def check_port(task):
  """UsageError if this task's own port is taken on this machine (another process listens
  there): TensorFlow would fail to start its gRPC server with a traceback and no address."""
  if task.cluster is None or task.is_evaluator:
    return
  address = task.cluster[task.type][task.index]
  port = int(address.rpartition(":")[2])
  with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
    # As gRPC does: a port held only by connections in TIME_WAIT is free to listen on.
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
      probe.bind(("", port))
    except OSError as e:
      if e.errno == errno.EADDRINUSE:
        raise UsageError(f"{task.type}:{task.index} cannot listen on {address}: port {port} "
                         "is in use by another process on this machine") from None
      raise


def _check_address(job, address):
  """UsageError unless `address` is host:port, port 1..65535 (gRPC's form, IPv6 as [::1]:p)."""
  host, _, port = str(address).rpartition(":")
  if not (host and port.isdigit() and 0 < int(port) < 65536):
    raise UsageError(f"the {job} job's address {address!r} is not host:port "
                     "(e.g. 10.0.0.2:2222)")


def parse(text):
  """The Task of a TF_CONFIG value (None or "" for none)."""
  try:
    value = json.loads(text or "{}")
  except ValueError as e:
    raise UsageError(f"TF_CONFIG is not JSON ({e})") from None
  if not isinstance(value, dict):
    raise UsageError("TF_CONFIG must be a JSON object with 'cluster' and 'task'")
  task = value.get("task") or {}
  try:
    result = Task(value.get("cluster") or None, task.get("type", "worker"),
                  int(task.get("index", 0)))
  except (TypeError, ValueError, AttributeError):
    raise UsageError(f"TF_CONFIG has a malformed task: {task!r}") from None
  if result.cluster is not None and not result.is_evaluator:
    tasks = len(result.cluster.get(result.type, []))
    if not 0 <= result.index < tasks:
      raise UsageError(f"TF_CONFIG names task {result.type}:{result.index}, but its cluster "
                       f"has {tasks} {result.type} task(s)")
  return result


def current():
  """The Task of this process's TF_CONFIG; UsageError (one line) if it is malformed."""
  return parse(os.environ.get("TF_CONFIG"))


def is_set():
  return bool(os.environ.get("TF_CONFIG"))


def to_json(cluster, job, index):
  """The TF_CONFIG value of task (job, index) of `cluster`."""
  return json.dumps({"cluster": cluster, "task": {"type": job, "index": index}})


def drop_evaluator_from_environment(task):
  """Rewrites this process's TF_CONFIG without the evaluator job, for TensorFlow's own
  resolver in a training task (it would otherwise count the evaluator as a gRPC peer)."""
  if task.cluster and EVALUATOR in task.cluster and not task.is_evaluator:
    value = json.loads(os.environ["TF_CONFIG"])
    value["cluster"] = task.training_cluster
    os.environ["TF_CONFIG"] = json.dumps(value)
