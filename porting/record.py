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

A record folder (porting.record_files): `record.json` (written last: a folder without it is
no record), `start.npz` (the weights), `regularization.npz` and `step-<s>.npz`, every file
through tf.io.gfile (any filesystem TensorFlow knows). It is written whole under a temporary name beside the folder
and renamed to it at the end (porting.outputs); a recording stopped midway leaves no record,
and the same command run again removes what it left.
"""

import json
import os
import posixpath

import tensorflow as tf

from porting import checkpoint_extras
from porting import devices as replica_devices
from porting import evidence
from porting import hyperparameters
from porting import layer_settings
from tfbits import machine
from porting import outputs
from porting import record_files as files
from porting import spec
from porting import tf1_towers
from porting import use_order
from porting.errors import PortError
from porting.trace import Step
from porting.trace import Trace

def write(port, batches, path, *, replicas=2, steps=3):
  """Runs `port`'s TF1 towers for `steps` steps from their own initial weights and records
  them at `path` (a new or empty folder); returns the path of its record.json."""
  spec.Port.__post_init__(port)
  if "://" not in path and os.path.islink(path.rstrip("/")):  # a writer would follow it
    raise PortError(f"a symbolic link is planted at {path}: refused (the record's files would "
                    "be written where it points); give a real folder")
  path = path.rstrip("/")
  outputs.record_target(path, files.HEADER)
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
      files.save(posixpath.join(path, "start.npz"),
                 files.prefixed("weight", {n: values[n] for n, _ in towers.variables()}))
      del values
      # Apart from the weights: compare reads it before the step, the weights once.
      files.save(posixpath.join(path, "regularization.npz"),
                 files.prefixed("regularization", settings.regularization or {}))
    rates = []
    for s in range(steps):
      images, labels = first if s == 0 else spec.checked_batch(batch(s), s, replicas)
      step = towers.step(images, labels)
      rates.append(step.learning_rate)
      with outputs.writing(final):
        outputs_ = {i: o for i, o in enumerate(step.outputs) if o is not None}
        slots = {f"{v}:{kind}": x for (v, kind), x in step.slots.items()}
        files.save(posixpath.join(path, f"step-{s}.npz"), {
            "images": images, "labels": labels,
            **files.prefixed("loss", dict(enumerate(step.losses))),
            **files.prefixed("outputs", outputs_),
            **files.prefixed("gradient", step.gradients),
            **files.prefixed("weight", dict(step.weights)), **files.prefixed("slot", slots),
            **files.prefixed("average", step.averages),
            **files.prefixed("regularization", step.regularization or {})})
    header = {
        "format": files.FORMAT, "replicas": replicas, "steps": steps, "learning_rates": rates,
        "variables": towers.variables(), "trainable": towers.trainable,
        "optimizer_class": towers.optimizer_class,
        "optimizer": {name: getattr(towers.optimizer, name)
                      for name in hyperparameters.tf1_attributes(towers.optimizer_class)
                      if isinstance(getattr(towers.optimizer, name, None), (bool, int, float))},
        # What the report says is not compared, read from the live side only.
        "own_methods": hyperparameters.own_methods(towers.optimizer),
        "beside": checkpoint_extras.beside_line(towers),
        "slot_kinds": sorted({kind for _, kind in towers.slots}),
        "averaged": list(towers.averages),
        # The order tower 0's forward pass reads the variables in: what pairs them with the
        # port's by the model's structure where names do not say (porting.use_order).
        "use_order": use_order.tf1(towers),
        "facts": towers.facts, "machine": machine.describe().line(),
        "settings": {"dropout": settings.dropout, "moving": settings.moving,
                     "debiased": settings.debiased, "unread": settings.unread,
                     "roles": settings.roles,
                     "batch_norm": [vars(b) for b in settings.batch_norm],
                     "layer_norm": [list(n) for n in settings.layer_norm],
                     "label_smoothing": settings.label_smoothing,
                     "regularized": settings.regularization is not None}}
    with outputs.writing(final):
      with tf.io.gfile.GFile(posixpath.join(path, files.HEADER), "w") as f:
        f.write(json.dumps(header, indent=1))
      outputs.move_folder(path, final, last=files.HEADER)
    return posixpath.join(final, files.HEADER)
  finally:
    towers.close()
    try:
      if tf.io.gfile.exists(path):  # stopped by an error: nothing of it stays
        tf.io.gfile.rmtree(path)
    except tf.errors.NotFoundError:
      pass  # ram:// answers `exists` for a renamed folder's old name, which holds nothing


class Recorded:
  """A record folder as the TF1 side of compare(): Towers' interface, replayed."""

  def __init__(self, path):
    self.path = path
    header_path = posixpath.join(path, files.HEADER)
    if not tf.io.gfile.exists(header_path):
      raise PortError(f"{path} holds no record ({files.HEADER} is missing: written last, so "
                      "the recording did not finish)")
    try:
      with tf.io.gfile.GFile(header_path) as f:
        self.header = header = json.loads(f.read())
    except (ValueError, tf.errors.OpError) as e:
      raise PortError(f"the record's {header_path} is damaged ("
                      f"{str(e).splitlines()[0][:200]})") from None
    if isinstance(header, dict) and header.get("format") not in (None, files.FORMAT):
      raise PortError(f"the record {path} is of format {header.get('format')!r}; this kit "
                      f"reads format {files.FORMAT}")
    why = files.damage(header)
    if why:
      raise PortError(f"the record's {header_path} is damaged: {why}")
    self.replicas, self.steps = header["replicas"], header["steps"]
    self.trainable = header["trainable"]
    self.optimizer_class = header["optimizer_class"]
    # What hyperparameters.mismatches reads of a TF1 optimizer: its class name, attributes.
    self.optimizer = type(self.optimizer_class, (), dict(
        header["optimizer"], RECORDED_OWN=header.get("own_methods", [])))()
    self.beside = header.get("beside")  # checkpoint_extras.beside_line, where it was recorded
    if "own_methods" not in header:  # written before records kept them: said, not guessed
      self.beside = ("what the TF1 side holds beside the model and whether its optimizer's "
                     "own compute_gradients or apply_gradients ran: the record was written "
                     "before records kept them (record it again to see them)")
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
      names = files.unprefixed("average", files.load(posixpath.join(self.path, "step-0.npz")))
    return dict.fromkeys(names)

  def use_order(self):
    """The recorded order tower 0's forward pass read the variables in; None in a record
    written before it was kept (paired by names, creation order and shapes then)."""
    return self.header.get("use_order")

  def start(self):
    """{TF1 name: value} of the recorded starting weights."""
    return files.unprefixed("weight", files.load(posixpath.join(self.path, "start.npz")))

  def batch(self, step):
    if step >= self.steps:
      raise PortError(f"the record {self.path} holds {self.steps} step(s); compare at most "
                      "that many")
    arrays = files.load(posixpath.join(self.path, f"step-{step}.npz"))
    return arrays["images"], arrays["labels"]

  def settings(self):
    recorded = self.header["settings"]
    regularization = None
    if recorded["regularized"]:
      regularization = files.unprefixed("regularization", files.load(
          posixpath.join(self.path, "regularization.npz")))
    return layer_settings.Settings(
        [tuple(d) for d in recorded["dropout"]],
        [layer_settings.BatchNorm(**b) for b in recorded["batch_norm"]],
        recorded["moving"], regularization, recorded.get("debiased", {}),
        recorded.get("unread", []), recorded.get("roles", {}),
        # A record from before the kit read them holds none: then not compared, and said.
        [tuple(n) for n in recorded.get("layer_norm", [])],
        recorded.get("label_smoothing", []))

  def trace(self):
    # A record keeps the facts its kit wrote: one a later kit no longer declares is left out.
    facts = {k: v for k, v in self.header["facts"].items() if k in evidence.Evidence.names()}
    facts["random_draws"] = {int(i): [(kind, tuple(shape) if shape is not None else None)
                                      for kind, shape in draws]
                             for i, draws in facts.get("random_draws", {}).items()}
    facts["recorded"] = self.machine
    return Trace(self.variables(), self.trainable, facts=facts)

  def step(self, images, labels):
    del images, labels  # the recorded batch of this step (batch()) is what was fed
    arrays = files.load(posixpath.join(self.path, f"step-{self.steps_run}.npz"))
    rate = self.header["learning_rates"][self.steps_run]
    self.steps_run += 1
    slots = {tuple(k.rsplit(":", 1)): v for k, v in files.unprefixed("slot", arrays).items()}
    losses = files.unprefixed("loss", arrays)
    outputs = files.unprefixed("outputs", arrays)
    return Step([losses[str(i)] for i in range(len(losses))],
                [outputs.get(str(i)) for i in range(len(losses))],
                files.unprefixed("gradient", arrays), rate, files.unprefixed("weight", arrays),
                slots, files.unprefixed("regularization", arrays),
                files.unprefixed("average", arrays))

  def close(self):
    pass
