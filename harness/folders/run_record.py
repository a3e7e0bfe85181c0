"""The settings a run's numbers depend on, written into its train_dir and checked on restart.

A train_dir holds one run. Resuming it with another batch size, dataset, seed, replica count,
precision or schedule would go on silently with other numbers than the steps it already
took (a quickstart train_dir reused by a real run resumed its synthetic batch-32 run with
batch 128 on CIFAR-10). So the chief of every trainer calls

  record = run_record.check(config, replicas)      # before it writes anything (the driver)
  ...                                              # owns train_dir
  run_record.write(config.train_dir, record)

The record also lists the machines the run has trained on (tfbits.machine's line: CPU,
instruction sets, oneDNN, versions, GPUs). Another kind of machine is no error, but its
kernels round otherwise (docs/determinism.md, "Machines"): a resume there says so in one
warning line and adds it to the list.

`check` raises a one-line UsageError naming each difference with the recorded run and the
ways out: the same flags, a new --train_dir (with --init_from to keep the weights), or
--override_run_config to continue with the new settings on purpose (the change is logged
and kept in the record's history). A train_dir without checkpoints holds no run yet, so
its record is replaced; one with checkpoints but no record (older versions, TF1's own runs,
a deleted or damaged record) takes no settings silently: --override_run_config records the
given ones.
"""

import dataclasses
import json
import os

from absl import logging
import tensorflow as tf

from cifar10 import settings as declarations
from cifar10.config import TrainConfig
from cifar10.errors import UsageError
from harness.folders import recovery
from harness.folders import run_folder
from tfbits import machine
from tfbits import threads

RECORD = "run_config.json"


def _guarded():
  """{setting: the flag that sets it} of what a run records: TrainConfig's guarded settings
  (cifar10.settings), and after the batch size the replicas, which no one flag sets."""
  out = {}
  for field, declared in declarations.declared(TrainConfig):
    if declared.guarded:
      out[field.name] = "--" + declarations.flag_name(field, declared)
      if field.name == "batch_size":
        out["replicas"] = "--num_gpus or the cluster's size"
  return out


# The recorded settings, each with the flag that sets it; the thread pools' counts as the
# process runs them (tfbits.threads: 0 resolved), which a resume sets again (resumed_threads).
THREADS = {"intra_op_threads": "--intra_op_threads", "inter_op_threads": "--inter_op_threads"}
FLAGS = {**_guarded(), **THREADS}


def settings(config, replicas):
  """The settings of TrainConfig `config` on `replicas` replicas that change its numbers."""
  data_dir = config.data_dir
  if data_dir and run_folder.is_local(data_dir):
    data_dir = os.path.abspath(data_dir)
  values = {name: getattr(config, name, None) for name in FLAGS}
  values.update(data_dir=data_dir, replicas=int(replicas), loss_scale=config.scale)
  values.update(zip(THREADS, threads.effective()))
  return values


def resumed_threads(device_config, train_config):
  """`device_config` with the thread counts its run recorded where the flags leave them to
  TensorFlow (0): a resume trains with the pools the run started with, on whatever CPU set it
  lands on, so its bits are the uninterrupted run's. A count given explicitly stays, and the
  record's check refuses it if it is another (guarded as any setting that moves the bits)."""
  try:
    record = read(train_config.train_dir) if recovery.has_checkpoint(
        train_config.train_dir) else None
  except (UsageError, tf.errors.OpError):
    record = None  # said by the check, once the run starts
  recorded = (record or {}).get("settings", {})
  counts = {name: getattr(device_config, name) or recorded.get(name) or 0 for name in THREADS}
  return dataclasses.replace(device_config, **counts)


def read(train_dir):
  """The recorded {"settings", "history"} of train_dir, or None."""
  path = os.path.join(train_dir, RECORD)
  try:
    text = run_folder.read_text(path)
    if text is None:
      return None
    record = json.loads(text)
    if not isinstance(record.get("settings"), dict):
      raise ValueError("no settings")
    return record
  except (tf.errors.OpError, ValueError, KeyError, TypeError, AttributeError):
    # Not "delete it": a folder with checkpoints and no record would then take any settings.
    raise UsageError(f"{path} is damaged; it records the settings of the run in "
                     "--train_dir: restore it, or pass --override_run_config to record these "
                     "settings as the run's") from None


def _show(value):
  return "unset" if value is None else json.dumps(value)


def _on_this_machine(record, train_dir):
  """`record` with this machine last in its "machines", saying so where it is another."""
  here = machine.describe().line()
  machines = list(record.get("machines", []))
  if machines and machines[-1] != here:
    logging.warning("The run in %s last trained on %s; it continues on %s: from here its bits "
                    "are this machine's kernels' (docs/determinism.md, \"Machines\")",
                    train_dir, machines[-1], here)
  if not machines or machines[-1] != here:
    machines.append(here)
  return {**record, "machines": machines}


def check(config, replicas):
  """The record to write for this run; UsageError if train_dir holds a run with other
  settings and config.override_run_config is off."""
  return _on_this_machine(_checked(config, replicas), config.train_dir)


def _checked(config, replicas):
  now = settings(config, replicas)
  if not recovery.has_checkpoint(config.train_dir):
    return {"settings": now, "history": []}  # no run yet: nothing to protect
  try:
    record = read(config.train_dir)
  except UsageError:
    if not config.override_run_config:
      raise
    record = None
  if record is None:
    # Checkpoints and no record: a run of an older version, of the original tutorial, or one
    # whose record was deleted. Its settings are unknown, so none are taken silently.
    if not config.override_run_config:
      raise UsageError(f"--train_dir={config.train_dir} holds checkpoints but no {RECORD} of "
                       "their settings: pass --override_run_config to go on with these, or "
                       "use a new --train_dir (--init_from keeps the weights)")
    logging.warning("Recording these settings for the run in %s, as --override_run_config "
                    "asks (it had no record)", config.train_dir)
    return {"settings": now, "history": []}
  before = record["settings"]
  # A record from before the counts were recorded takes the process's.
  before = {**{name: now[name] for name in THREADS if name not in before}, **before}
  changed = {name: (before.get(name), now[name]) for name in FLAGS
             if before.get(name) != now[name]}
  if not changed:
    return {**record, "settings": before}
  what = ", ".join(f"{FLAGS[name]} was {_show(old)}, now {_show(new)}"
                   for name, (old, new) in changed.items())
  if not config.override_run_config:
    raise UsageError(f"--train_dir={config.train_dir} holds a run of other settings "
                     f"({what}): rerun with its own, use a new --train_dir (--init_from "
                     "keeps the weights), or pass --override_run_config")
  logging.warning("Continuing %s with other settings, as --override_run_config asks: %s",
                  config.train_dir, what)
  history = record.get("history", []) + [{name: old for name, (old, _) in changed.items()}]
  return {"settings": now, "history": history}


def write(train_dir, record):
  """Writes `record` into train_dir atomically (a crash leaves the old one or the new), unless
  it is there already: a restart with the same settings writes nothing."""
  path = os.path.join(train_dir, RECORD)
  try:
    if read(train_dir) == record:
      return
  except UsageError:
    pass  # damaged: replaced below
  tf.io.gfile.makedirs(train_dir)
  run_folder.write_atomically(path, json.dumps(record, indent=1, sort_keys=True) + "\n")
