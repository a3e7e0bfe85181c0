"""Causes in where the two sides ran: a TF1 side recorded on another TensorFlow or another
machine (porting.record), read from the two machine lines and sized from the numbers."""

import re



def _tensorflow(line):
  match = re.search(r"TensorFlow (\S+?),", line)
  return match.group(1) if match else "?"


def _onednn(line):
  return ", oneDNN on" in line


def _cpu(line):
  return line.split(", oneDNN")[0]


def _kernels(line):
  return "oneDNN's kernels" if _onednn(line) else "TensorFlow's own (Eigen) kernels"


def elsewhere(obs):
  """Whether the TF1 side is a record made on another TensorFlow, oneDNN setting or CPU:
  then any rounding may be the other kernels', and a cause that names another order of the
  same sums cannot be told from them."""
  recorded, here = obs.tf1.facts.get("recorded"), obs.tf2.facts.get("machine")
  return bool(recorded and here) and (
      _tensorflow(recorded), _onednn(recorded), _cpu(recorded)) != (
          _tensorflow(here), _onednn(here), _cpu(here))


def other_runtime(obs):
  """The record's machine line and this one's name another TensorFlow, oneDNN setting or
  CPU, and every difference where the bits first part is of rounding size."""
  recorded, here = obs.tf1.facts.get("recorded"), obs.tf2.facts.get("machine")
  if not obs.bad or not elsewhere(obs):
    return []
  if not obs.rounding(obs.early):
    return []  # a larger difference is the port's, not the kernels' rounding
  what = []
  if _tensorflow(recorded) != _tensorflow(here):
    what.append(f"TensorFlow {_tensorflow(recorded)} there, {_tensorflow(here)} here")
  if _onednn(recorded) != _onednn(here):
    what.append(f"{_kernels(recorded)} there, {_kernels(here)} here")
  if _cpu(recorded) != _cpu(here):
    what.append(f"another CPU ({_cpu(recorded)} there, {_cpu(here)} here)")
  advice = ""
  if _onednn(here) and not _onednn(recorded):
    advice = ("; TF_ENABLE_ONEDNN_OPTS=0 on this side runs TensorFlow's own kernels here "
              "too, which the record's side ran")
  worst = obs.worst(obs.early)
  # Under a tolerance every row past it may be noise on a gradient 0 up to rounding, which
  # worst() leaves out: then that is what is said, not "up to 0".
  size = (f"up to {worst:.2g} relative{obs.noise_note()}" if worst else
          f"none past the tolerance but noise{obs.noise_note()}")
  return [f"the TF1 side was recorded elsewhere: {'; '.join(what)}: other kernels round "
          f"otherwise, and every difference of steps {obs.start}-{obs.start + 1} is of "
          f"rounding size ({size})"
          f"{advice}; compare with a tolerance of that size"]
