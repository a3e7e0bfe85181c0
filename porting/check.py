"""`compare(port, batches, replicas, steps, tolerance)`: both sides, step by step, and the
report. See the package docstring for a call."""

import dataclasses

import numpy as np
import tensorflow as tf

from porting.errors import PortError
from porting import devices as replica_devices
from porting import checkpoint_extras
from porting import checkpoints
from porting import combination as combination_lib
from porting import diagnosis
from porting import ema_settings
from porting import hyperparameters
from porting import layer_mismatches
from porting import layer_probes
from tfbits import machine
from porting import matching
from porting import penalties
from porting import record as tf1_record
from porting import report
from porting import screen
from porting import spec
from porting import tf1_towers
from porting import tf2_replicas


@dataclasses.dataclass
class Report:
  """pairs: [(TF1 name, TF2 name)]; rows: every report.Row; tf1, tf2: the two Traces;
  hints: the known causes that fit the numbers; equal: every row within `tolerance`;
  machine: the tfbits.machine.Machine it ran on (bits are its kernels'); unread: what the
  kit could not read on a side and so did not compare before the steps (the numbers did)."""
  pairs: list
  rows: list
  tf1: object
  tf2: object
  tolerance: float
  hints: list
  replicas: int
  machine: object = None
  unread: list = dataclasses.field(default_factory=list)

  @property
  def equal(self):
    return report.first_difference(self.rows, self.tolerance) is None and (
        self.learning_rates[0] == self.learning_rates[1])

  @property
  def first_difference(self):
    """The first report.Row outside the tolerance (by step, then kind), or None."""
    return report.first_difference(self.rows, self.tolerance)

  @property
  def learning_rates(self):
    return ([s.learning_rate for s in self.tf1.steps], [s.learning_rate for s in self.tf2.steps])

  @property
  def left_out(self):
    """TF1 variables the variable map left out of the comparison (mapped to None)."""
    paired = {a for a, _ in self.pairs}
    return [n for n, _ in self.tf1.variables if n not in paired]

  def text(self, width=None):
    """The report; `width`: at most that many columns, the verdict, the first difference and
    the causes first (porting.screen: what the command prints); None: each line whole."""
    if width:
      return "\n".join(screen.lines(self, width))
    verdict = "EQUAL" if self.equal else "NOT EQUAL"
    where = "".join(f"  {line}\n" for line in self.notes())
    text = report.text(self.rows, self.tolerance, self.learning_rates, self.hints,
                       self.title(bound=False))
    head, _, body = text.partition("\n")
    return f"{head}\n{where}{body}\n{verdict}"

  def title(self, bound=True):
    title = (f"TF1 {self.replicas} tower(s) vs TF2 {self.replicas} replica(s), "
             f"{len(self.tf1.steps)} step(s)")
    if "start" in self.tf1.facts:
      path, step = self.tf1.facts["start"]
      title += f" from {path} (global step {step})"
    if self.left_out:
      title += f"; not compared (variable_map): {', '.join(self.left_out)}"
    if bound:
      title += f" ({report.bound(self.tolerance)}; steps count from 0)"
    return title

  def notes(self):
    """Where the bits were made and what was not compared, a line each."""
    notes = [f"machine: {self.machine.line()}"] if self.machine else []
    if "recorded" in self.tf1.facts:
      notes.append(f"TF1 side recorded on: {self.tf1.facts['recorded']}")
    notes += [f"not compared: {line}" for line in self.unread]
    apart = self.tf2.facts.get("replicas_apart", {})
    if apart:
      names = ", ".join(f"{n} (up to {d:.3g})" for n, d in list(apart.items())[:3])
      notes.append(f"replicas apart: {len(apart)} TF2 variable(s) hold other values on other "
                   f"replicas than on replica 0 after the last step: {names}"
                   f"{', ...' if len(apart) > 3 else ''}; replica 0's are compared (the "
                   "checkpoint saves them), a read on another replica sees its own")
    return notes


def compare(port, batches=None, *, replicas=2, steps=3, tolerance=0.0, start_from=None,
            record=None):
  """Runs `port`'s TF1 towers and TF2 replicas from the same weights on the same global
  batches for `steps` steps; returns the Report.

  batches: a list of (images, labels) numpy global batches (replicas x the per-replica
    batch), or a function step -> that.
  tolerance: the largest max relative difference per variable that still counts as equal;
    0 (the default) asks for the same bits.
  start_from: a TF1 checkpoint (the team's Saver's) both sides start from, its weights,
    optimizer slots and step, so that the schedule is where the run was; None: the TF2
    model's initial weights, at step 0.
  record: a folder porting.record.write filled (the TF1 side run elsewhere, another
    TensorFlow perhaps): its towers are replayed, and the TF2 side starts from its weights
    and takes its batches (`batches` and `replicas` are the record's).
  Raises PortError for a port it cannot compare (variables left unmatched, no gradient,
  optimizers' hyper-parameters or layers' settings that differ: porting.layer_mismatches).
  """
  spec.Port.__post_init__(port)
  if not 0 <= tolerance < float("inf"):  # NaN fails this too
    raise PortError(f"tolerance must be a finite number >= 0, got {tolerance!r}")
  if record is not None:
    if start_from is not None:
      raise PortError("give start_from or record, not both: a record starts where it was "
                      "recorded")
    recorded = tf1_record.Recorded(record)
    replicas, batch = recorded.replicas, recorded.batch
  else:
    batch = spec.batch_source(batches, steps)
  devices = replica_devices.replica_devices(replicas)
  tf2 = tf2_replicas.Replicas(port, replica_devices.strategy(devices))
  first = spec.checked_batch(batch(0), 0, replicas)
  towers = recorded if record is not None else tf1_towers.Towers(
      port, devices, first, replica_devices.session_config(devices))
  differ = hyperparameters.mismatches(towers.optimizer, tf2.optimizer)
  unread = [hyperparameters.unread(towers.optimizer, tf2.optimizer)]
  if port.tf1_gradients is not None:  # TF1's clipping is there, in code the kit cannot read
    clips = [d for d in differ if d.startswith(hyperparameters.CLIPPING)]
    differ = [d for d in differ if d not in clips]
    tf2_clips = ", ".join(f"{c.split()[0]} {c.rsplit('TF2 ', 1)[1]}" for c in clips)
    unread.append("what tf1_gradients makes of the towers' combined gradients (a clipping "
                  "or any other transform): the kit does not read its code (TF2's clipping: "
                  f"{tf2_clips or 'none'}); the steps' numbers compare them")
  if differ:
    towers.close()
    raise PortError(f"the optimizers' hyper-parameters differ: {'; '.join(differ)}; set them "
                    "alike in tf2_optimizer (or tf1_optimizer) before comparing")
  try:
    pairs = matching.match(towers.variables(), tf2.variables(), port.variable_map)
    if record is not None:  # the TF2 side starts where the recorded towers started
      recorded_start = towers.start()
      start = {b: recorded_start[a] for a, b in pairs}
      del recorded_start
      tf2.assign(start)
    elif start_from is None:
      start = tf2.values()
      towers.assign({a: start[b] for a, b in pairs})
    else:
      first_step = checkpoints.load_tf1(start_from, towers, tf2, pairs,
                                        checkpoints.slot_pairs(towers, tf2, pairs))
      start = tf2.values()
    _start_averages(towers, tf2, pairs, start if start_from is None else
                    checkpoints.averages_of(start_from, towers, pairs), record is None)
    differ = ema_settings.differ(towers, tf2, pairs)
    if differ:
      raise PortError(differ)
    settings = towers.settings(), tf2.settings(first)
    differ = layer_mismatches.mismatches(*settings, pairs)
    unread += (layer_mismatches.unread(*settings, pairs) + [_beside(towers)]
               + ema_settings.unread(towers, tf2))
    if differ:
      raise PortError(f"the layers' settings differ: {'; '.join(differ)}; set them alike on "
                      "both sides before comparing")
    trace1, trace2 = towers.trace(), tf2.trace()
    # Both sides ran under these (replica_devices.session_config hands them to the Session).
    trace1.facts["graph_rewrites"] = tf.config.optimizer.get_experimental_options()
    optimizers = (towers.optimizer_class, type(tf2.optimizer).__name__)
    combination = towers_combination(port, trace1)
    factor = combination.loss_factor(replicas, port.gradient_reduction)
    table = []
    for s in range(steps):
      images, labels = first if s == 0 else spec.checked_batch(batch(s), s, replicas)
      a, b = towers.step(images, labels), tf2.step(images, labels)
      # Streamed: the step's rows now, then only what the diagnosis reads is kept (step 0's
      # gradients), so memory stays that of one step of both sides, at any number of steps.
      table += report.step_rows(s, a, b, pairs, trace1, optimizers, factor)
      if hasattr(towers, "global_step_now"):  # where the TF1 schedule reads its step
        trace1.facts.setdefault("global_steps", []).append(towers.global_step_now())
      # Each step's largest TF1 gradient: what a vanishing gradient is measured against.
      trace1.facts.setdefault("largest_gradient", []).append(max(
          (float(np.abs(g).max()) for g in a.gradients.values() if np.size(g)), default=0.0))
      if s == 0 and hasattr(towers, "step0"):
        trace1.facts.update(towers.step0)
      if s == 0:  # the starting weights fit a penalty written by hand, then go
        trace1.facts["penalty"] = penalties.fit(pairs, trace1.trainable, a, b, start)
        trace1.facts["penalty_frameworks"] = penalties.framework(
            pairs, trace1.facts["penalty"], settings[0].regularization,
            settings[1].regularization, start)
        # Kept where step 0's forward passes part: the layers are compared from them.
        parted = record is None and any(
            r.kind in ("loss", "outputs") and not r.diff.within(tolerance) for r in table)
        start = start if parted else None
      trace1.steps.append(_kept(a, s))
      trace2.steps.append(_kept(b, s))
      del a, b
    trace2.facts.update(tf2.facts())
    trace2.facts["replicas_apart"] = tf2.apart()
    if start is not None:
      layer_probes.probe_both(towers, tf2, pairs, start, first, trace1, trace2)
      del start
  finally:
    towers.close()
  where = machine.describe()
  trace2.facts["machine"] = where.line()
  if start_from is not None:
    trace1.facts["start"] = trace2.facts["start"] = (start_from, first_step)
  hints = diagnosis.causes(pairs, trace1, trace2, table, tolerance, replicas, optimizers,
                           port.gradient_reduction, onednn=where.onednn,
                           combination=combination)
  return Report(pairs, table, trace1, trace2, tolerance, hints, replicas, where,
                [line for line in unread if line])


def towers_combination(port, trace1):
  """The TowerCombination the TF1 side ran: the Port's, or a record's as it was recorded."""
  if "recorded" in trace1.facts or "combination" in trace1.facts:
    return combination_lib.from_record(trace1.facts)
  return port.combination


def _beside(towers):
  """The line naming TF1 variables beside the model, its slots, step and averages (an
  optimizer of the team's own keeps its moments so: BERT's adam_m, adam_v), which no row
  compares; None where there are none (a record holds only what the kit reads)."""
  if not hasattr(towers, "all_variables"):
    return None
  names = [n for n in checkpoint_extras.others(towers) if n != towers.rate_variable and
           not n.endswith("seed_generator_state")]  # Keras 3's dropout stream: the kit draws
  if not names:
    return None
  return (f"{len(names)} TF1 variable(s) beside the model and tf.compat.v1.train's slots "
          f"({', '.join(names[:3])}{', ...' if len(names) > 3 else ''}: an optimizer of the "
          "team's own keeps its state so): no row compares them; the weights' rows compare "
          "what they do")


def _start_averages(towers, tf2, pairs, start, tf1_too):
  """Both sides' moving averages (EMA shadows) set to where the comparison starts: a shadow
  starts at its variable's initial value, and the starting weights replaced the initial
  values of one side (or both: a checkpoint's shadows where it holds them). `start` is keyed
  by TF2 name ({TF2 name: value}) or, from a checkpoint, by TF1 name."""
  if tf2.ema is None:
    return
  to2 = dict(pairs)
  by2 = {b: start[b] if b in start else start.get(a) for a, b in pairs}
  tf2.assign_averages({b: v for b, v in by2.items() if v is not None})
  if tf1_too:
    towers.assign_averages({a: by2[to2[a]] for a in towers.averages
                            if by2.get(to2.get(a)) is not None})


def _kept(step, number):
  """What a Trace keeps of a compared Step: its losses, outputs and rate; step 0's gradients
  and regularization (the diagnosis reads the first step's); no weights, slots or averages."""
  first = number == 0
  return dataclasses.replace(step, gradients=step.gradients if first else {}, weights={},
                             slots={}, averages={},
                             regularization=step.regularization if first else {})
