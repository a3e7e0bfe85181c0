"""A full disk and a read-only disk, for real: run by test_run_folder as
`unshare -m python -m tests.storage_faults DIR`, in a private mount namespace where small
tmpfs mounts under DIR are the disks (they vanish with the process).

For each trainer: train to step 1; fill the disk; train on, which must fail in one line and
leave the index on the complete step-1 checkpoint; free the disk; train on, which must resume
at step 1 and reach step 3 with no temporary files left. Then, on a read-only view of the
disk: a trainer on it and an evaluator writing to it are one line, and an evaluator that
only reads it works. Prints one JSON object of what it saw, on the last line of stdout.
"""

import json
import os
import subprocess
import sys

from tests import helpers

TRAINERS = ("strategies.train", "compat_v1.train", "examples.keras_fit")
FLAGS = ("--dataset=synthetic", "--batch_size=4", "--save_checkpoint_steps=1")
# Room for a few checkpoints: 8.5 MB of weights and averages, and for compat_v1 a 4.4 MB
# .meta graph (the seed's initial values are constants in it) and 9 MB of graph per events file.
MOUNT_SIZE = "96m"


def _fill(path):
  """Writes zeros to `path` until the disk is full, to the last block. Unbuffered: a buffered
  file kept the part of its last write that did not fit and failed again at close."""
  fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
  try:
    for chunk in (1 << 20, 1 << 12):
      try:
        while True:
          os.write(fd, b"\0" * chunk)
      except OSError:
        pass
  finally:
    os.close(fd)


def _state(trainer, train_dir):
  """The newest checkpoint of train_dir (complete: all its files there), and debris."""
  from cifar10 import checkpoints  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  debris = sorted(f for f in os.listdir(train_dir)
                  if "_temp" in f or ".tmp" in f or ".tempstate" in f)
  latest = tf.train.latest_checkpoint(train_dir)
  return {"latest": os.path.basename(latest) if latest else None,
          "complete": bool(latest) and checkpoints.is_complete(latest),
          "step": checkpoints.read(latest).global_step if latest else None, "debris": debris}


def _result(completed):
  return {"status": completed.returncode, "line": helpers.error_line(completed),
          "printed": completed.stdout, "tail": completed.stderr[-1500:]}


def _read_only_view(path):
  """A read-only bind mount of `path` (the runs in this process may still hold files there
  open, so `path` itself cannot be remounted read-only)."""
  view = path + ".read_only"
  os.mkdir(view)
  subprocess.run(["mount", "--bind", path, view], check=True)
  subprocess.run(["mount", "-o", "remount,bind,ro", view], check=True)
  return view


def main(root):
  seen = {}
  for trainer in TRAINERS:
    disk = os.path.join(root, trainer)  # a disk of its own for each trainer
    os.mkdir(disk)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={MOUNT_SIZE}", "tmpfs", disk],
                   check=True)
    train_dir, filler = os.path.join(disk, "train"), os.path.join(disk, "filler")
    first = helpers.call(trainer, *FLAGS, "--max_steps=1", f"--train_dir={train_dir}")
    _fill(filler)
    full = helpers.call(trainer, *FLAGS, "--max_steps=3", f"--train_dir={train_dir}")
    after_full = _state(trainer, train_dir)
    os.remove(filler)
    again = helpers.call(trainer, *FLAGS, "--max_steps=3", f"--train_dir={train_dir}")
    seen[trainer] = {"first": _result(first), "full": _result(full), "after_full": after_full,
                     "again": _result(again), "resumed": "at step 1" in again.stderr,
                     "final": _state(trainer, train_dir)}
    view = os.path.join(_read_only_view(disk), "train")
    seen[trainer]["read_only"] = _result(
        helpers.call(trainer, *FLAGS, "--max_steps=4", f"--train_dir={view}"))
  view = os.path.join(root, "strategies.train.read_only")
  for evaluator in ("strategies.eval", "compat_v1.eval"):
    eval_flags = ("--dataset=synthetic", "--run_once", "--num_examples=8", "--batch_size=8",
                  f"--checkpoint_dir={view}/train")
    seen[evaluator] = {
        "eval_dir_read_only": _result(helpers.call(evaluator, *eval_flags,
                                                   f"--eval_dir={view}/eval")),
        "checkpoint_dir_read_only": _result(helpers.call(
            evaluator, *eval_flags, f"--eval_dir={root}/eval"))}
  print("\n" + json.dumps(seen))


if __name__ == "__main__":
  main(sys.argv[1])
