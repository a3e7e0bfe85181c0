"""Reads a checkpoint of either trainer into plain arrays: the bridge between the two worlds.

The two trainers store the same values under different keys:

  what                 tf.compat.v1 Saver (compat_v1)            tf.train.Checkpoint (strategies)
  weights              conv1/weights                             params/conv1.Sweights/.ATTRIBUTES/VARIABLE_VALUE
  moving averages      conv1/weights/ExponentialMovingAverage    ema/conv1.Sweights/.ATTRIBUTES/VARIABLE_VALUE
  global step          global_step                               global_step/.ATTRIBUTES/VARIABLE_VALUE

(object-based checkpoints escape "/" in dict keys as ".S"). Runs with `--loss_scale=dynamic`
also hold `loss_scale` and `loss_scale_good_steps` (each trainer restores its own; a run
started from another's checkpoint with --init_from starts the scale afresh). The original tutorial's
checkpoints use the tf.compat.v1 keys, with a float32 `global_step` (and, trained with
`--use_fp16`, float16 weights and averages). `keys(path)` says where each value lives in a
given file; `read(path)` loads them as float32 arrays and an int step, whatever the dtypes
in the file, with one-line errors for a missing file, a missing variable or a wrong shape.
"""

import dataclasses
import os
import re
import shutil

from absl import logging
import numpy as np
import tensorflow as tf

from cifar10 import model
from cifar10.errors import UsageError

EMA_SUFFIX = "/ExponentialMovingAverage"
# `ckpt-STEP` (strategies.train, tf.train.CheckpointManager), `model.ckpt-STEP` (compat_v1.train
# and the original tutorial, tf.compat.v1.train.Saver).
_PREFIX = re.compile(r"^(?:model\.)?ckpt-(\d+)\.index$")
_DATA = re.compile(r"\.data-\d{5}-of-(\d{5})$")
# What an interrupted save leaves behind: the shards' temporary folder (`ckpt-7_temp`,
# `model.ckpt-7_temp_<hex>`) and the files written atomically through a temporary name
# (`checkpoint.tmp<hex>`, `<file>.tempstate<digits>`, `model.ckpt-7.meta.tmp<hex>`).
_DEBRIS = re.compile(r"(_temp(_[0-9a-f]+)?$|\.tempstate\d*$|\.tmp[0-9a-f]*$)")


def _object_key(group, name):
  return f"{group}/{name.replace('/', '.S')}/.ATTRIBUTES/VARIABLE_VALUE"


def candidate_keys(kind, name):
  """(v1 key, TF2 key) for kind 'weights' | 'ema' | 'step' of variable `name`."""
  if kind == "step":
    return "global_step", "global_step/.ATTRIBUTES/VARIABLE_VALUE"
  if kind == "ema":
    return name + EMA_SUFFIX, _object_key("ema", name)
  return name, _object_key("params", name)


@dataclasses.dataclass
class State:
  """Weights and moving averages {TF1 name: ndarray} and the global step of a checkpoint."""
  weights: dict
  averages: dict
  global_step: int


def resolve(path):
  """`path` itself if it is a checkpoint prefix, else the newest checkpoint in that folder."""
  if path and tf.io.gfile.isdir(path):
    latest = tf.train.latest_checkpoint(path)
    if latest is None:
      raise UsageError(f"no checkpoint found in {path}")
    return latest
  if not path or not tf.io.gfile.exists(path + ".index"):
    raise UsageError(f"no checkpoint at {path!r} (expected a folder or a prefix with a "
                     ".index file)")
  return path


def is_complete(prefix):
  """Whether checkpoint `prefix` has its index and every data shard the shard names count."""
  if not tf.io.gfile.exists(prefix + ".index"):
    return False
  shards = [f for f in tf.io.gfile.glob(prefix + ".data-*") if _DATA.search(f)]
  return bool(shards) and len(shards) == int(_DATA.search(shards[0])[1])


def _steps(train_dir):
  """[(step, prefix)] of the checkpoints train_dir holds files of, newest first."""
  found = []
  for name in tf.io.gfile.listdir(train_dir) if tf.io.gfile.isdir(train_dir) else []:
    match = _PREFIX.match(name)
    if match:
      found.append((int(match[1]), os.path.join(train_dir, name[:-len(".index")])))
  return sorted(found, reverse=True)


def _indexed(train_dir):
  """(newest, all) prefixes the `checkpoint` index file names, absolute; (None, []) if it is
  missing, empty or unreadable."""
  try:
    state = tf.train.get_checkpoint_state(train_dir)
  except Exception:  # pylint: disable=broad-except  # a damaged file: parse errors of all kinds
    return None, []
  if state is None or not state.model_checkpoint_path:
    return None, []
  absolute = lambda p: p if os.path.isabs(p) else os.path.join(train_dir, p)
  return absolute(state.model_checkpoint_path), [absolute(p) for p in
                                                 state.all_model_checkpoint_paths]


def write_index(train_dir, prefixes):
  """Replaces train_dir's `checkpoint` index (atomically) with `prefixes`, oldest first, the
  last the newest, as paths relative to train_dir, so the folder can be moved or copied."""
  names = [os.path.basename(p) for p in prefixes]
  # With the time each was written, so tf.train.CheckpointManager counts them against
  # max_to_keep (it never deletes a checkpoint older than last_preserved_timestamp).
  times = [os.path.getmtime(p + ".index") for p in prefixes]
  text = (f'model_checkpoint_path: "{names[-1]}"\n'
          + "".join(f'all_model_checkpoint_paths: "{n}"\n' for n in names)
          + "".join(f"all_model_checkpoint_timestamps: {t!r}\n" for t in times)
          + "last_preserved_timestamp: 0.0\n")
  tmp = os.path.join(train_dir, f"checkpoint.tmp{os.getpid():x}")
  with open(tmp, "w", encoding="utf-8") as f:
    f.write(text)
  os.replace(tmp, os.path.join(train_dir, "checkpoint"))


def recover(train_dir, repair=True):
  """The newest complete checkpoint of train_dir (or None) and the complete ones to keep
  counting against --max_checkpoints_to_keep, oldest first. Run before a trainer resumes.

  The `checkpoint` index file is only a pointer: when it is missing, damaged, names a
  checkpoint whose files are gone, or is older than a complete checkpoint on disk (a save
  interrupted between its data and the index), the files are scanned and the index is
  rewritten, with a log line naming what was taken. Paths in it become relative. Debris of
  interrupted saves is removed. With repair=False (a process that only reads train_dir) the
  folder is left as it is.
  """
  if not tf.io.gfile.isdir(train_dir):
    return None, []
  removed = [n for n in tf.io.gfile.listdir(train_dir)
             if repair and _DEBRIS.search(n.rstrip("/"))]
  for name in removed:
    path = os.path.join(train_dir, name.rstrip("/"))
    shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else os.remove(path)
  if removed:
    logging.info("Removed %d file(s) of an interrupted save from %s: %s", len(removed),
                 train_dir, ", ".join(sorted(removed)))
  complete = [p for _, p in _steps(train_dir) if is_complete(p)]
  newest, listed = _indexed(train_dir)
  if not complete:
    return None, []
  keep = [p for p in listed if p in complete] or complete[::-1]
  if not repair:
    return complete[0], keep
  if newest != complete[0] or any(os.path.isabs(p) for p in _raw_paths(train_dir)):
    if newest != complete[0]:
      logging.warning("The checkpoint index of %s names %s; resuming from %s, the newest "
                      "complete checkpoint in the folder", train_dir, newest or "nothing",
                      complete[0])
    keep = [p for p in keep if p != complete[0]] + [complete[0]]
    write_index(train_dir, keep)
  return complete[0], keep


def _raw_paths(train_dir):
  """The paths the index file holds, as written (absolute ones are rewritten relative)."""
  try:
    with open(os.path.join(train_dir, "checkpoint"), encoding="utf-8") as f:
      return re.findall(r'^\w*model_checkpoint_paths?: "([^"]*)"', f.read(), re.MULTILINE)
  except (OSError, UnicodeDecodeError):
    return []


def _reader(path):
  try:
    return tf.train.load_checkpoint(path)
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


def read(path, kinds=("weights", "ema", "step")):
  """The State of the checkpoint at `path` (a prefix, or a folder: its newest checkpoint)."""
  path = resolve(path)
  where = keys(path, kinds)
  reader = _reader(path)
  try:
    values = {k: reader.get_tensor(key) for k, key in where.items()}
  except Exception as e:  # pylint: disable=broad-except  # e.g. a truncated data file
    raise UsageError(f"cannot read checkpoint {path}: {str(e).splitlines()[0][:200]}") from None
  as_float32 = lambda kind: {n: np.asarray(v, np.float32) for (k, n), v in values.items()
                              if k == kind}
  return State(weights=as_float32("weights"), averages=as_float32("ema"),
               global_step=int(values.get(("step", "global_step"), 0)))

