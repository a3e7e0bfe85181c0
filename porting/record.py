"""The TF1 side recorded where it runs, compared where the port runs.

Much TF1 code runs only on an older TensorFlow (Keras 2, `tf.estimator`, `tf.contrib`, gone
in 2.16+), while its port needs a new one. `write` runs the team's towers there, from their
own initial weights, and records what `compare` reads of a TF1 side: the variables, the
starting weights, the batches, and for every step the towers' losses and outputs, the
averaged gradients, the weights, slots and moving averages after it, the learning rate, with
the optimizer's hyper-parameters, the layers' settings and the graph's facts. `Recorded`
replays it as the TF1 side of a comparison, which starts the TF2 side from the recorded
weights and feeds it the recorded batches.

  python -m porting record --port=team.port:PORT --batches=team.port:batches RECORD_DIR
  python -m porting compare --port=team.port:PORT --record=RECORD_DIR

A record folder: `record.json` (written last: a folder without it is no record), `start.npz`
(the weights), `regularization.npz` and `step-<s>.npz`, every file through tf.io.gfile (any
filesystem TensorFlow knows). It is written whole under a temporary name beside the folder
and renamed to it at the end (porting.outputs); a recording stopped midway leaves no record,
and the same command run again removes what it left.
"""

import io
import json
import os
import posixpath
import zipfile

import numpy as np
import tensorflow as tf

from porting import devices as replica_devices
from porting import hyperparameters
from porting import layer_settings
from tfbits import machine
from porting import outputs
from porting import spec
from porting import tf1_towers
from porting.errors import PortError
from porting.trace import Step
from porting.trace import Trace

FORMAT = 1
HEADER = "record.json"


def _save(path, arrays):
  buffer = io.BytesIO()
  np.savez(buffer, **arrays)
  with tf.io.gfile.GFile(path, "wb") as f:
    f.write(buffer.getvalue())


def _load(path):
  try:
    with tf.io.gfile.GFile(path, "rb") as f:
      return dict(np.load(io.BytesIO(f.read())))
  except (tf.errors.OpError, OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
    raise PortError(f"cannot read the record's {path}: {str(e).splitlines()[0]}") from None


def _prefixed(prefix, values):
  return {f"{prefix}/{k}": np.asarray(v) for k, v in values.items()}


def _unprefixed(prefix, arrays):
  return {k[len(prefix) + 1:]: v for k, v in arrays.items() if k.startswith(prefix + "/")}


def write(port, batches, path, *, replicas=2, steps=3):
  """Runs `port`'s TF1 towers for `steps` steps from their own initial weights and records
  them at `path` (a new or empty folder); returns the path of its record.json."""
  spec.Port.__post_init__(port)
  if "://" not in path and os.path.islink(path.rstrip("/")):  # a writer would follow it
    raise PortError(f"a symbolic link is planted at {path}: refused (the record's files would "
                    "be written where it points); give a real folder")
  path = path.rstrip("/")
  outputs.record_target(path, HEADER)
  batch = spec.batch_source(batches, steps)
  devices = replica_devices.replica_devices(replicas)
  first = spec.checked_batch(batch(0), 0, replicas)
  towers = tf1_towers.Towers(port, devices, first, replica_devices.session_config(devices))
  # Written whole under a temporary name, then renamed to `final`.
  final, path = path, outputs.temporary_folder(path)
  try:
    with outputs.writing(final):
      tf.io.gfile.makedirs(path)
    values = towers.values()
    settings = towers.settings()
    with outputs.writing(final):
      _save(posixpath.join(path, "start.npz"),
            _prefixed("weight", {n: values[n] for n, _ in towers.variables()}))
      del values
      # Apart from the weights: compare reads it before the step, the weights once.
      _save(posixpath.join(path, "regularization.npz"),
            _prefixed("regularization", settings.regularization or {}))
    rates = []
    for s in range(steps):
      images, labels = first if s == 0 else spec.checked_batch(batch(s), s, replicas)
      step = towers.step(images, labels)
      rates.append(step.learning_rate)
      with outputs.writing(final):
        _save(posixpath.join(path, f"step-{s}.npz"), {
            "images": images, "labels": labels,
            **_prefixed("loss", dict(enumerate(step.losses))),
            **_prefixed("outputs", {i: o for i, o in enumerate(step.outputs) if o is not None}),
            **_prefixed("gradient", step.gradients), **_prefixed("weight", dict(step.weights)),
            **_prefixed("slot", {f"{v}:{kind}": x for (v, kind), x in step.slots.items()}),
            **_prefixed("average", step.averages),
            **_prefixed("regularization", step.regularization or {})})
    header = {
        "format": FORMAT, "replicas": replicas, "steps": steps, "learning_rates": rates,
        "variables": towers.variables(), "trainable": towers.trainable,
        "optimizer_class": towers.optimizer_class,
        "optimizer": {name: getattr(towers.optimizer, name)
                      for name in hyperparameters.tf1_attributes(towers.optimizer_class)
                      if isinstance(getattr(towers.optimizer, name, None), (bool, int, float))},
        "slot_kinds": sorted({kind for _, kind in towers.slots}),
        "averaged": list(towers.averages),
        "facts": towers.facts, "machine": machine.describe().line(),
        "settings": {"dropout": settings.dropout, "moving": settings.moving,
                     "debiased": settings.debiased, "unread": settings.unread,
                     "roles": settings.roles,
                     "batch_norm": [vars(b) for b in settings.batch_norm],
                     "layer_norm": [list(n) for n in settings.layer_norm],
                     "regularized": settings.regularization is not None}}
    with outputs.writing(final):
      with tf.io.gfile.GFile(posixpath.join(path, HEADER), "w") as f:
        f.write(json.dumps(header, indent=1))
      outputs.move_folder(path, final, last=HEADER)
    return posixpath.join(final, HEADER)
  finally:
    towers.close()
    try:
      if tf.io.gfile.exists(path):  # stopped by an error: nothing of it stays
        tf.io.gfile.rmtree(path)
    except tf.errors.NotFoundError:
      pass  # ram:// answers `exists` for a renamed folder's old name, which holds nothing


def _damage(header):
  """What is wrong with a record.json's contents (None: nothing): every field `Recorded`
  reads, of the type it reads, the learning rates one a step."""
  if not isinstance(header, dict):
    return f"a JSON {type(header).__name__}, not an object"
  kinds = {"format": int, "replicas": int, "steps": int, "learning_rates": list,
           "variables": list, "trainable": list, "optimizer_class": str, "optimizer": dict,
           "slot_kinds": list, "facts": dict, "machine": str, "settings": dict}
  for key, kind in kinds.items():
    if not isinstance(header.get(key), kind):
      return f"{key} is {'missing' if key not in header else type(header[key]).__name__}"
  if header["steps"] < 1 or header["replicas"] < 1:
    return f"{header['steps']} steps of {header['replicas']} replicas"
  if len(header["learning_rates"]) != header["steps"] or not all(
      isinstance(r, (int, float)) for r in header["learning_rates"]):
    return (f"{len(header['learning_rates'])} learning rate(s) for {header['steps']} "
            "step(s)")
  if not all(isinstance(v, list) and len(v) == 2 and isinstance(v[0], str)
             and isinstance(v[1], list) for v in header["variables"]):
    return "variables are not [name, shape] pairs"
  settings = header["settings"]
  for key in ("dropout", "batch_norm", "moving", "regularized"):
    if key not in settings:
      return f"settings lack {key}"
  return None


class Recorded:
  """A record folder as the TF1 side of compare(): Towers' interface, replayed."""

  def __init__(self, path):
    self.path = path
    header_path = posixpath.join(path, HEADER)
    if not tf.io.gfile.exists(header_path):
      raise PortError(f"{path} holds no record ({HEADER} is missing: written last, so the "
                      "recording did not finish)")
    try:
      with tf.io.gfile.GFile(header_path) as f:
        self.header = header = json.loads(f.read())
    except (ValueError, tf.errors.OpError) as e:
      raise PortError(f"the record's {header_path} is damaged ("
                      f"{str(e).splitlines()[0][:200]})") from None
    if isinstance(header, dict) and header.get("format") not in (None, FORMAT):
      raise PortError(f"the record {path} is of format {header.get('format')!r}; this kit "
                      f"reads format {FORMAT}")
    why = _damage(header)
    if why:
      raise PortError(f"the record's {header_path} is damaged: {why}")
    self.replicas, self.steps = header["replicas"], header["steps"]
    self.trainable = header["trainable"]
    self.optimizer_class = header["optimizer_class"]
    # What hyperparameters.mismatches reads of a TF1 optimizer: its class name, attributes.
    self.optimizer = type(self.optimizer_class, (), dict(header["optimizer"]))()
    self.slot_kinds = header["slot_kinds"]
    self.machine = header["machine"]
    self.facts = header["facts"]  # what the towers showed as they were built (Towers.facts)
    self.steps_run = 0

  def variables(self):
    return [(n, tuple(shape)) for n, shape in self.header["variables"]]

  @property
  def averages(self):
    """{TF1 variable its EMA averages: None} (a record keeps the averages' values, not their
    variables); a record written before "averaged" was kept: the averages of its step 0."""
    names = self.header.get("averaged")
    if names is None:
      names = _unprefixed("average", _load(posixpath.join(self.path, "step-0.npz")))
    return dict.fromkeys(names)

  def start(self):
    """{TF1 name: value} of the recorded starting weights."""
    return _unprefixed("weight", _load(posixpath.join(self.path, "start.npz")))

  def batch(self, step):
    if step >= self.steps:
      raise PortError(f"the record {self.path} holds {self.steps} step(s); compare at most "
                      "that many")
    arrays = _load(posixpath.join(self.path, f"step-{step}.npz"))
    return arrays["images"], arrays["labels"]

  def settings(self):
    recorded = self.header["settings"]
    regularization = None
    if recorded["regularized"]:
      regularization = _unprefixed("regularization", _load(
          posixpath.join(self.path, "regularization.npz")))
    return layer_settings.Settings(
        [tuple(d) for d in recorded["dropout"]],
        [layer_settings.BatchNorm(**b) for b in recorded["batch_norm"]],
        recorded["moving"], regularization, recorded.get("debiased", {}),
        recorded.get("unread", []), recorded.get("roles", {}),
        # A record from before the kit read them holds none: then not compared, and said.
        [tuple(n) for n in recorded.get("layer_norm", [])])

  def trace(self):
    facts = dict(self.header["facts"])
    facts["random_draws"] = {int(i): [(kind, tuple(shape) if shape is not None else None)
                                      for kind, shape in draws]
                             for i, draws in facts.get("random_draws", {}).items()}
    facts["recorded"] = self.machine
    return Trace(self.variables(), self.trainable, facts=facts)

  def step(self, images, labels):
    del images, labels  # the recorded batch of this step (batch()) is what was fed
    arrays = _load(posixpath.join(self.path, f"step-{self.steps_run}.npz"))
    rate = self.header["learning_rates"][self.steps_run]
    self.steps_run += 1
    slots = {tuple(k.rsplit(":", 1)): v for k, v in _unprefixed("slot", arrays).items()}
    losses = _unprefixed("loss", arrays)
    outputs = _unprefixed("outputs", arrays)
    return Step([losses[str(i)] for i in range(len(losses))],
                [outputs.get(str(i)) for i in range(len(losses))],
                _unprefixed("gradient", arrays), rate, _unprefixed("weight", arrays), slots,
                _unprefixed("regularization", arrays), _unprefixed("average", arrays))

  def close(self):
    pass
