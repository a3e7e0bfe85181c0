r"""Where a profiled step's time goes: reads what --profile_steps wrote, for either trainer.

  python -m strategies.train --num_gpus=2 --max_steps=40 --profile_steps=25,34 \
      --train_dir=/tmp/tf2
  python -m compat_v1.train  --num_gpus=2 --max_steps=40 --profile_steps=25,34 \
      --train_dir=/tmp/v1
  python -m benchmarks.profile_ops /tmp/v1 /tmp/tf2

For each train_dir (the newest profile under plugins/profile) it prints, per profiled step:
the step's wall time (a `Session.run` of the towers, or a call of the TF2 step function: K
steps under --steps_per_loop=K, so profile K = 1 to compare with v1), the
host time between steps (Python, logging, checks), the time all TensorFlow kernels took
(summed over threads, so on two busy cores it is about twice the wall time) and that kernel
time by op type, the largest first, side by side. The op types are the kernels TensorFlow
ran (oneDNN's `_MklNativeFusedConv2D` rather than the `Conv2D` of the graph), on the
executor's threads and tf.data's, so both trainers are counted the same way.
"""

import collections
import dataclasses
import glob
import os

from absl import flags

from cifar10.errors import UsageError
from harness.command_line import cli

# The Python-thread events that are one step: a Session.run of the v1 towers; a call of the
# TF2 step function (strategies.step names them).
STEP_EVENTS = ("SessionRun", "_quiet_step", "_recording_step", "_steps")


@dataclasses.dataclass
class Profile:
  steps: int
  step_ms: list          # wall time of each step, in order
  gap_ms: list           # host time between consecutive steps
  op_ms: collections.Counter  # kernel time per op type, summed over the steps and threads

  def per_step(self, value):
    return value / max(self.steps, 1)


def newest(train_dir):
  """The newest *.xplane.pb under train_dir/plugins/profile (or train_dir itself is one)."""
  if os.path.isfile(train_dir):
    return train_dir
  found = sorted(glob.glob(os.path.join(train_dir, "plugins", "profile", "*", "*.xplane.pb")))
  if not found:
    raise FileNotFoundError(f"no profile under {train_dir}/plugins/profile; run the trainer "
                            "with --profile_steps=A,B first")
  return found[-1]


def read(train_dir):
  """The Profile of the newest profile written into train_dir."""
  from tensorflow.tsl.profiler.protobuf import xplane_pb2  # pylint: disable=g-import-not-at-top
  space = xplane_pb2.XSpace()
  with open(newest(train_dir), "rb") as f:
    space.ParseFromString(f.read())
  host = next(p for p in space.planes if p.name == "/host:CPU")
  names = {key: meta.name for key, meta in host.event_metadata.items()}
  spans, ops = [], collections.Counter()
  for line in host.lines:
    for event in line.events:
      name = names[event.metadata_id]
      if line.name.startswith("tf_"):
        # Kernels are "node:OpType"; executor and tf.data bookkeeping events use "::" or
        # no colon at all and contain kernels, so they are not counted again.
        if ":" in name and "::" not in name:
          ops[name.rsplit(":", 1)[1]] += event.duration_ps / 1e9
      elif name in STEP_EVENTS:
        spans.append((event.offset_ps / 1e9, event.duration_ps / 1e9))
  spans.sort()
  gaps = [b[0] - (a[0] + a[1]) for a, b in zip(spans, spans[1:])]
  return Profile(len(spans), [s[1] for s in spans], gaps, ops)


def table(profiles, top=25):
  """Lines comparing {label: Profile}, per step."""
  labels = list(profiles)
  width = max(12, *(len(l) for l in labels))
  cell = "{:>%d}" % width
  lines = ["{:<36}".format("per step, ms") + "".join(cell.format(l) for l in labels)]

  def row(title, values):
    lines.append("{:<36}".format(title) + "".join(cell.format(v) for v in values))

  row("steps profiled", [p.steps for p in profiles.values()])
  row("step wall time", ["%.1f" % (sum(p.step_ms) / max(p.steps, 1))
                         for p in profiles.values()])
  row("host time between steps", ["%.2f" % (sum(p.gap_ms) / max(len(p.gap_ms), 1))
                                  for p in profiles.values()])
  row("all kernels (summed over threads)", ["%.1f" % p.per_step(sum(p.op_ms.values()))
                                            for p in profiles.values()])
  kinds = sorted(set().union(*(p.op_ms for p in profiles.values())),
                 key=lambda k: -max(p.per_step(p.op_ms[k]) for p in profiles.values()))
  for kind in kinds[:top]:
    row("  " + kind[:34], ["%.2f" % p.per_step(p.op_ms[kind]) for p in profiles.values()])
  return lines


def define_flags(fv):  # pylint: disable=unused-argument  # its arguments are the folders
  pass


def main(values, train_dirs):  # pylint: disable=unused-argument
  if not train_dirs:
    raise UsageError("name one or more train_dirs the trainers profiled into: python -m "
                     "benchmarks.profile_ops /tmp/prof_v1 /tmp/prof_tf2")
  try:
    profiles = {os.path.basename(os.path.normpath(d)) or d: read(d) for d in train_dirs}
  except (FileNotFoundError, OSError) as e:
    raise UsageError(str(e)) from None
  print("\n".join(table(profiles)))


if __name__ == "__main__":
  cli.app_run(flags.FLAGS, define_flags, main, takes_args=True)
