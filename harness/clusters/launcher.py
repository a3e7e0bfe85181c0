"""A local cluster on 127.0.0.1: one process per task, and nothing left behind, ever.

Both `strategies.launch` and `compat_v1.launch` are built on `run(tasks)`: it starts every
task in its own process group, prefixes each output line with the task (`[worker:1] ...`),
forwards Ctrl-C/SIGTERM, and ends the job when the chief finishes (servers such as ps tasks
never exit on their own) or as soon as any task fails. Every process group still alive is
then sent SIGTERM (servers last: a trainer saving its checkpoint on SIGTERM may need them)
and, after a grace period, SIGKILL. The return value is the job's exit
status: 0 only if the chief and every worker that finished succeeded.
"""

import dataclasses
from typing import Optional
import os
import signal
import socket
import subprocess
import sys
import threading
import time

from harness.clusters import gpu_split
from harness.control import run_errors

HOST = "127.0.0.1"


@dataclasses.dataclass
class Task:
  job: str
  index: int
  argv: list
  env: dict = dataclasses.field(default_factory=dict)
  server: bool = False  # runs until stopped (ps, or a PSS worker)
  expendable: bool = False  # its failure is reported but does not end the job
  gpus: Optional[int] = None  # GPUs it computes on (harness.clusters.gpu_split); None: env as is

  @property
  def name(self):
    return f"{self.job}:{self.index}"


def free_ports(count):
  """`count` distinct TCP ports that were free on 127.0.0.1 a moment ago."""
  sockets = []
  try:
    for _ in range(count):
      s = socket.socket()
      s.bind((HOST, 0))
      sockets.append(s)
    return [s.getsockname()[1] for s in sockets]
  finally:
    for s in sockets:
      s.close()


def cluster(**jobs):
  """{'worker': ['127.0.0.1:p', ...], ...} for job sizes like worker=2, ps=1 (0s dropped)."""
  ports = iter(free_ports(sum(jobs.values())))
  return {job: [f"{HOST}:{next(ports)}" for _ in range(n)] for job, n in jobs.items() if n}


def _die_with_parent():
  # Linux: if the launcher itself is SIGKILLed (no chance to clean up), the kernel kills
  # each task too. Elsewhere the launcher's own cleanup is all there is.
  try:
    import ctypes  # pylint: disable=g-import-not-at-top
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
  except (OSError, AttributeError):
    pass


def _pump(task, stream, lock, kept):
  for line in stream:
    with lock:
      if kept is None:
        sys.stdout.write(f"[{task.name}] {line}")
        sys.stdout.flush()
      else:
        kept.append(f"[{task.name}] {line}")
        del kept[:-200]


def _signal_and_wait(procs, sig, grace):
  for proc in procs:
    if proc.poll() is None:
      try:
        os.killpg(proc.pid, sig)
      except ProcessLookupError:
        pass
  deadline = time.time() + grace
  for proc in procs:
    try:
      proc.wait(max(0.0, deadline - time.time()))
    except subprocess.TimeoutExpired:
      pass


def _stop(procs, grace, servers=()):
  """SIGTERM, then SIGKILL after `grace` s. Trainers save a checkpoint on SIGTERM (see
  harness.control.signals), and may need their servers (ps tasks, PSS workers) to do it: those are
  stopped only after the others have exited or had their grace period."""
  _signal_and_wait([p for name, p in procs.items() if name not in servers], signal.SIGTERM,
                   grace)
  _signal_and_wait([p for name, p in procs.items() if name in servers], signal.SIGTERM, 1.0)
  for proc in procs.values():
    try:
      os.killpg(proc.pid, signal.SIGKILL)  # the group too: no grandchild survives
    except ProcessLookupError:
      pass
    proc.wait()


def _let_finish(procs, grace):
  """Once the chief is done, the other workers get `grace` seconds to finish on their own."""
  deadline = time.time() + grace
  for proc in procs:
    try:
      code = proc.wait(max(0.0, deadline - time.time()))
    except subprocess.TimeoutExpired:
      continue
    if code:
      return code if code > 0 else 128 - code
  return 0


def describe(status):
  """The one-line error for a job that ended with a non-zero `status` from run()."""
  if status == 130:
    return ("the job was stopped (Ctrl-C or SIGTERM); its trainers saved a checkpoint if they "
            "could: launch it again to continue")
  if status == 124:
    return "the job ran out of --timeout_secs and was stopped"
  if status == run_errors.PREEMPTED_EXIT_STATUS:
    return ("a task was asked to stop (SIGTERM) and saved a checkpoint: launch the job again "
            "to continue")
  return f"the job failed (exit status {status})"


def run(tasks, chief, timeout=None, grace=5.0, echo=True):
  """Runs the job; returns its exit status (124 on timeout, 130 when interrupted).

  With echo=False the tasks' output is kept back and only its last lines are printed, if the
  job fails (for callers whose own output is the point, such as `python -m equivalence`).
  """
  gpu_split.assign(tasks, gpu_split.machine_gpus())  # each task its own GPUs, before any starts
  interrupted = []
  previous = {s: signal.signal(s, lambda n, _: interrupted.append(n))
              for s in (signal.SIGINT, signal.SIGTERM)}
  procs, lock, threads = {}, threading.Lock(), []
  kept = None if echo else []
  lost = set()
  status = None
  try:
    for task in tasks:
      proc = subprocess.Popen(task.argv, env={**os.environ, **task.env}, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, start_new_session=True,
                              preexec_fn=_die_with_parent)
      procs[task.name] = proc
      thread = threading.Thread(target=_pump, args=(task, proc.stdout, lock, kept),
                                daemon=True)
      thread.start()
      threads.append(thread)
    deadline = None if timeout is None else time.time() + timeout
    finite = [t for t in tasks if not t.server and not t.expendable]
    while status is None:
      if interrupted:
        with lock:
          print(f"[launch] stopping the job: the tasks get {grace:g} s to save and exit",
                flush=True)
        status = 130
        break
      if deadline is not None and time.time() > deadline:
        status = 124
        break
      for task in tasks:
        code = procs[task.name].poll()
        if code not in (None, 0) and task.expendable:
          if task.name not in lost:
            lost.add(task.name)
            with lock:
              print(f"[launch] {task.name} exited with status {code}; the job goes on",
                    flush=True)
          continue
        if code not in (None, 0):
          with lock:
            print(f"[launch] {task.name} failed with exit status {code}; stopping the job",
                  flush=True)
          status = code if code > 0 else 128 - code
          break
      else:
        done = procs[chief].poll() == 0
        if done or all(procs[t.name].poll() == 0 for t in finite):
          status = 0
      time.sleep(0.1)
    if status == 0:
      status = _let_finish([procs[t.name] for t in finite], grace)
  finally:
    _stop(procs, grace, servers={t.name for t in tasks if t.server})
    for thread in threads:
      thread.join(5)
    for sig, handler in previous.items():
      signal.signal(sig, handler)
  if status and kept:
    sys.stdout.write("".join(kept[-40:]))
  return status
