"""Reads a checkpoint of either trainer into plain arrays: the bridge between the two worlds.

The two trainers store the same values under different keys (object-based checkpoints escape
"/" in dict keys as ".S"; the TF2 keys end in "/.ATTRIBUTES/VARIABLE_VALUE", left out here):

  what              tf.compat.v1 Saver (compat_v1)              tf.train.Checkpoint (strategies)
  weights           conv1/weights                               params/conv1.Sweights
  moving averages   conv1/weights/ExponentialMovingAverage      ema/conv1.Sweights
  global step       global_step                                 global_step
  loss averages     summaries/total_loss/avg                    loss_averages/total_loss

Runs with `--loss_scale=dynamic` also hold `loss_scale` and `loss_scale_good_steps`. Each
trainer restores those and the loss averages (the original's ExponentialMovingAverage(0.9) of
its loss terms, for summaries) when it resumes its own run; a run started from any checkpoint
with --init_from starts them afresh, and checkpoints written before the loss averages were
saved hold none (`loss_average_keys` is then empty). The original tutorial's
checkpoints use the tf.compat.v1 keys, with a float32 `global_step` (and, trained with
`--use_fp16`, float16 weights and averages). `keys(path)` says where each value lives in a
given file; `read(path)` loads them as float32 arrays and an int step, whatever the dtypes
in the file, with one-line errors for a missing file, a missing variable or a wrong shape.
"""

import dataclasses
import os
import re

import numpy as np
import tensorflow as tf

from cifar10 import losses
from cifar10 import model
from cifar10.errors import UsageError

EMA_SUFFIX = "/ExponentialMovingAverage"
# compat_v1's variable scope of the loss averages (compat_v1.step), so `summaries/<term>/avg`.
LOSS_AVERAGE_SCOPE = "summaries"
# `ckpt-STEP` (strategies.train, tf.train.CheckpointManager), `model.ckpt-STEP` (compat_v1.train
# and the original tutorial, tf.compat.v1.train.Saver).
_PREFIX = re.compile(r"^(?:model\.)?ckpt-(\d+)\.index$")
_DATA = re.compile(r"\.data-\d{5}-of-(\d{5})$")


def _object_key(group, name):
  return f"{group}/{name.replace('/', '.S')}/.ATTRIBUTES/VARIABLE_VALUE"


def candidate_keys(kind, name):
  """(v1 key, TF2 key) for kind 'weights' | 'ema' | 'step' of variable `name`, or kind
  'loss_average' of loss term `name` (cifar10.losses.LOSS_TERMS)."""
  if kind == "step":
    return "global_step", "global_step/.ATTRIBUTES/VARIABLE_VALUE"
  if kind == "loss_average":
    return f"{LOSS_AVERAGE_SCOPE}/{name}/avg", _object_key("loss_averages", name)
  if kind == "ema":
    return name + EMA_SUFFIX, _object_key("ema", name)
  return name, _object_key("params", name)


@dataclasses.dataclass
class State:
  """Weights and moving averages {TF1 name: ndarray} and the global step of a checkpoint;
  the loss averages {term: float32 scalar}, empty where the checkpoint holds none."""
  weights: dict
  averages: dict
  global_step: int
  loss_averages: dict = dataclasses.field(default_factory=dict)


def resolve(path):
  """`path` itself if it is a checkpoint prefix, else the newest checkpoint in that folder."""
  # The prefix first: TensorFlow's ram:// filesystem calls any prefix of a file a folder.
  if path and tf.io.gfile.exists(path + ".index"):
    return path
  if path and tf.io.gfile.isdir(path):
    latest = newest(path)
    if latest is None:
      raise UsageError(f"no checkpoint found in {path}")
    return latest
  if not path or not tf.io.gfile.exists(path + ".index"):
    raise UsageError(f"no checkpoint at {path!r} (expected a folder or a prefix with a "
                     ".index file)")
  return path


def newest(folder):
  """The newest checkpoint of `folder` for a reader (an evaluator): the one its `checkpoint`
  index names, or, where the index is missing, empty, damaged or names files that are gone
  (a trainer recovers from such a folder), the newest complete one on disk; None if none.
  Reads only: the trainer repairs the index (harness.folders.recovery.recover)."""
  try:
    latest = tf.train.latest_checkpoint(folder)
  except Exception:  # pylint: disable=broad-except  # "Invalid checkpoint state" and its kin
    latest = None
  if latest is not None:
    return latest
  complete = [prefix for _, prefix in steps(folder) if is_complete(prefix)]
  return complete[0] if complete else None


def is_complete(prefix):
  """Whether checkpoint `prefix` has its index and every data shard the shard names count."""
  if not tf.io.gfile.exists(prefix + ".index"):
    return False
  shards = [f for f in tf.io.gfile.glob(prefix + ".data-*") if _DATA.search(f)]
  return bool(shards) and len(shards) == int(_DATA.search(shards[0])[1])


def steps(train_dir):
  """[(step, prefix)] of the checkpoints train_dir holds files of, newest first."""
  found = []
  for name in tf.io.gfile.listdir(train_dir) if tf.io.gfile.isdir(train_dir) else []:
    match = _PREFIX.match(name)
    if match:
      found.append((int(match[1]), os.path.join(train_dir, name[:-len(".index")])))
  return sorted(found, reverse=True)


def unreadable(prefix):
  """Why checkpoint `prefix` does not read back whole (a tensor whose checksum fails: flipped
  bits, a data file cut or overwritten), or None if every tensor reads back."""
  try:
    reader = tf.compat.v1.train.NewCheckpointReader(prefix)
    for key in reader.get_variable_to_shape_map():
      reader.get_tensor(key)
  except Exception as e:  # pylint: disable=broad-except  # DataLossError and its kin
    return str(e).splitlines()[0][:200]
  return None


def _reader(path):
  try:
    # Not tf.train.load_checkpoint: it takes a prefix for a folder on ram:// (see resolve).
    return tf.compat.v1.train.NewCheckpointReader(path)
  except Exception as e:  # pylint: disable=broad-except  # TF raises many kinds here
    raise UsageError(f"cannot read checkpoint {path}: {str(e).splitlines()[0][:200]}") from None


def keys(path, kinds=("weights", "ema", "step")):
  """{(kind, name): key in the file at `path`}, checking presence and shapes."""
  shapes = _reader(path).get_variable_to_shape_map()
  found = {}
  for kind in kinds:
    for spec in ([None] if kind == "step" else model.SPECS):
      name = "global_step" if spec is None else spec.name
      options = [k for k in candidate_keys(kind, name) if k in shapes]
      label = {"weights": name, "ema": name + EMA_SUFFIX, "step": "global_step"}[kind]
      if not options:
        raise UsageError(f"checkpoint {path} has no variable {label} (looked for "
                         f"{' or '.join(candidate_keys(kind, name))})")
      want = () if spec is None else spec.shape
      if tuple(shapes[options[0]]) != want:
        raise UsageError(f"checkpoint {path}: {label} has shape {list(shapes[options[0]])}, "
                         f"the model needs {list(want)}")
      found[(kind, name)] = options[0]
  return found


# What a trainer logs when it resumes from a checkpoint that holds no loss averages.
NO_LOSS_AVERAGES = ("%s holds no loss averages (written before they were checkpointed): "
                    "their summaries start again from 0")


def loss_average_keys(path):
  """{term: key} of the loss averages in the file at `path`, or {} if it lacks any of them
  (written before they were saved, by the original tutorial, by examples.keras_fit)."""
  shapes = _reader(path).get_variable_to_shape_map()
  found = {}
  for term in losses.LOSS_TERMS:
    options = [k for k in candidate_keys("loss_average", term) if k in shapes]
    if not options or tuple(shapes[options[0]]):
      return {}
    found[term] = options[0]
  return found


def read(path, kinds=("weights", "ema", "step")):
  """The State of the checkpoint at `path` (a prefix, or a folder: its newest checkpoint)."""
  path = resolve(path)
  where = keys(path, kinds)
  where.update({("loss_average", n): key for n, key in loss_average_keys(path).items()})
  reader = _reader(path)
  try:
    values = {k: reader.get_tensor(key) for k, key in where.items()}
  except Exception as e:  # pylint: disable=broad-except  # e.g. a truncated data file
    raise UsageError(f"cannot read checkpoint {path}: {str(e).splitlines()[0][:200]}") from None
  as_float32 = lambda kind: {n: np.asarray(v, np.float32) for (k, n), v in values.items()
                              if k == kind}
  return State(weights=as_float32("weights"), averages=as_float32("ema"),
               global_step=int(values.get(("step", "global_step"), 0)),
               loss_averages=as_float32("loss_average"))

