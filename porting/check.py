"""`compare(port, batches, replicas, steps, tolerance)`: both sides, step by step, and the
report (porting.compared.Report). See the package docstring for a call.

compare opens the two sides (live towers or a record, and the TF2 replicas), refuses what
would make the comparison meaningless (optimizers' or layers' settings apart, variables it
cannot pair), starts both from the same weights, runs the steps (porting.stepping) and hands
what it measured to the diagnosis."""

import tensorflow as tf

from porting.errors import PortError
from porting import devices as replica_devices
from porting import checkpoint_extras
from porting import checkpoints
from porting.compared import Report
from porting import combination as combination_lib
from porting import diagnosis
from porting import ema_settings
from porting import hyperparameters
from porting import layer_mismatches
from porting import layer_probes
from tfbits import machine
from porting import loss_scales
from porting import matching
from porting import record as tf1_record
from porting import spec
from porting import stepping
from porting import tf1_towers
from porting import tf2_replicas
from porting import use_order


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
  towers, tf2, batch, replicas = _open(port, batches, replicas, steps, start_from, record)
  first = batch(0)
  try:
    inner2, unread, scaled = _optimizers_checked(port, towers, tf2, steps)
    pairing = []  # what the pairing could not read from names: said in the report
    pairs = matching.match(towers.variables(), tf2.variables(), port.variable_map,
                           use_order.of_sides(towers, tf2, first), pairing)
    start, first_step = _started(towers, tf2, pairs, start_from, record)
    settings = _settings_checked(towers, tf2, pairs, first, unread)
    trace1, trace2 = towers.trace(), tf2.trace()
    # Both sides ran under these (replica_devices.session_config hands them to the Session).
    trace1.facts["graph_rewrites"] = tf.config.optimizer.get_experimental_options()
    optimizers = (towers.optimizer_class, type(inner2).__name__)
    combination = towers_combination(port, trace1)
    sides = stepping.Sides(towers, tf2, pairs, trace1, trace2)
    table, start = stepping.run(
        sides, batch, steps, factor=combination.loss_factor(replicas, port.gradient_reduction),
        optimizers=optimizers, start=start, settings=settings,
        # Kept where step 0's forward passes part, for the layers' comparison; a record's
        # towers cannot be probed.
        parted=lambda rows: record is None and any(
            r.kind in ("loss", "outputs") and not r.diff.within(tolerance) for r in rows))
    trace2.facts.update(tf2.facts())
    if scaled:
      trace2.facts["loss_scale"] = scaled
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
  found = diagnosis.causes(pairs, trace1, trace2, table, tolerance, replicas, optimizers,
                           port.gradient_reduction, onednn=where.onednn,
                           combination=combination)
  return Report(pairs, table, trace1, trace2, tolerance, found, replicas, where,
                [line for line in unread if line], pairing)


def _open(port, batches, replicas, steps, start_from, record):
  """(the TF1 side: live towers or a record; the TF2 replicas; step -> its checked global
  batch; N): a record's N and batches are its own."""
  if record is not None:
    if start_from is not None:
      raise PortError("give start_from or record, not both: a record starts where it was "
                      "recorded")
    recorded = tf1_record.Recorded(record)
    replicas, source = recorded.replicas, recorded.batch
  else:
    source = spec.batch_source(batches, steps)
  devices = replica_devices.replica_devices(replicas)
  tf2 = tf2_replicas.Replicas(port, replica_devices.strategy(devices))
  first = spec.checked_batch(source(0), 0, replicas)
  towers = recorded if record is not None else tf1_towers.Towers(
      port, devices, first, replica_devices.session_config(devices))
  batch = lambda s: first if s == 0 else spec.checked_batch(source(s), s, replicas)
  return towers, tf2, batch, replicas


def _optimizers_checked(port, towers, tf2, steps):
  """(TF2's optimizer as the kit reads it, the lines of what could not be compared, the loss
  scale's note or None); PortError where the two optimizers' settings or loss scales differ."""
  inner2 = loss_scales.tf2_inner(tf2.optimizer)  # the wrapped optimizer, under a loss scale
  differ = hyperparameters.mismatches(towers.optimizer, inner2)
  unread = [hyperparameters.unread(towers.optimizer, inner2)]
  if port.tf1_gradients is not None:  # TF1's clipping is there, in code the kit cannot read
    differ = [d for d in differ if not d.startswith(hyperparameters.CLIPPING)]
    # Read from the optimizer: the mismatches are none where the kit cannot read a class.
    tf2_clips = ", ".join(hyperparameters.clipping(inner2))
    unread.append("what tf1_gradients makes of the towers' combined gradients (a clipping "
                  "or any other transform): the kit does not read its code (TF2's clipping: "
                  f"{tf2_clips or 'none'}); the steps' numbers compare them")
  if differ:
    raise PortError(f"the optimizers' hyper-parameters differ: {'; '.join(differ)}; set them "
                    "alike in tf2_optimizer (or tf1_optimizer) before comparing")
  scales = getattr(towers, "scaled_optimizer", None)  # a record keeps no loss scale
  if scales is not None and loss_scales.mismatch(scales, tf2.optimizer, steps):
    raise PortError(loss_scales.mismatch(scales, tf2.optimizer, steps))
  return inner2, unread, None if scales is None else loss_scales.note(scales, tf2.optimizer,
                                                                       steps)


def _started(towers, tf2, pairs, start_from, record):
  """Both sides set to where the comparison starts: a record's starting weights, the TF2
  model's initial ones, or the team's checkpoint (its weights, slots, step and averages).
  Returns ({TF2 name: starting value}, the checkpoint's global step or None)."""
  first_step = None
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
  return start, first_step


def _settings_checked(towers, tf2, pairs, first, unread):
  """Both sides' layer settings (read from their graphs for the global batch `first`);
  what could not be compared appended to `unread`; PortError where the EMAs' or the layers'
  settings differ."""
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
  return settings


def towers_combination(port, trace1):
  """The TowerCombination the TF1 side ran: the Port's, or a record's as it was recorded."""
  if "recorded" in trace1.facts or "combination" in trace1.facts:
    return combination_lib.from_record(trace1.facts)
  return port.combination


def _beside(towers):
  """checkpoint_extras.beside_line of the live towers, or the one a record kept (None in a
  record written before records kept it)."""
  if not hasattr(towers, "all_variables"):
    return getattr(towers, "beside", None)
  return checkpoint_extras.beside_line(towers)


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
