"""A port's checkpoints, both ways, through the same variable matching as the comparison.

  porting.tf1_to_tf2(port, "/runs/tf1/model.ckpt-5000", "/runs/tf2/ckpt", example)
  porting.tf2_to_tf1(port, "/runs/tf2/ckpt-1", "/runs/tf1_again/model.ckpt", example)
      (porting.to_tf1)

TF1 -> TF2 reads a name-based checkpoint (the team's Saver's) and writes the object-based
`tf.train.Checkpoint(model=..., optimizer=...)` of the TF2 model: its weights, the optimizer's
slots (in Keras's convention, report.SLOT_CONVENTIONS: Keras SGD's velocity is -lr x
MomentumOptimizer's accumulator, at the rate of the checkpoint's step) and its step count
(`optimizer.iterations`, from the global step). TF2 -> TF1 writes the TF1 names back, which
the team's own `tf.compat.v1.train.Saver` restores. Either writes as porting.outputs does:
never through a planted link, never over a checkpoint unless `overwrite`, never half, and
never into the folder's `checkpoint` index. Values are cast to the receiving
variable's dtype (a float32 global step, float16 weights). `example` is one (images, labels)
batch: the TF1 graph is built from it to learn its variables. A port's moving averages (EMA
shadows) convert both ways: in the TF2 checkpoint they are `averages`, a list of the shadows
in the order of the model's trainable variables (`tf.train.Checkpoint(model=..., optimizer=...,
averages=[ema.average(v) for v in model.trainable_variables])`); a checkpoint on either side
without them gives shadows equal to the weights, where an EMA starts.

TF1's AdamOptimizer keeps its step in `beta1_power` and `beta2_power` (beta after t updates:
beta x beta^t, multiplied in float32 each step), and a team's Saver run of it often has no
global step: TF1 -> TF2 then reads the step from `beta2_power`; TF2 -> TF1 writes both powers
as TF1 would hold them after the checkpoint's steps, so Adam's bias correction continues where
the run was (written at their initial values, the next step was 0.235 relative off).
"""

import numpy as np
import tensorflow as tf

from porting import checkpoint_extras
from porting import conversion_checks
from porting.adam_steps import steps_of as _steps_of
from porting import matching
from porting import outputs
from porting import report
from porting import tf1_towers
from porting import tf2_replicas
from porting import use_order
from porting.errors import PortError


class Sides:
  """Both sides of `port` on one device, their variables paired."""

  def __init__(self, port, example):
    self.tf2 = tf2_replicas.Replicas(port, tf.distribute.get_strategy())
    self.towers = tf1_towers.Towers(port, ["/cpu:0"], example,
                                    tf.compat.v1.ConfigProto(allow_soft_placement=True))
    self.pairs = matching.match(self.towers.variables(), self.tf2.variables(),
                                port.variable_map,
                                use_order.of_sides(self.towers, self.tf2, example))
    self.slots = slot_pairs(self.towers, self.tf2, self.pairs)

  def close(self):
    self.towers.close()


def slot_pairs(towers, tf2, pairs):
  """[(TF1 slot name, TF2 slot variable, factor or None)] of the paired variables' slots."""
  optimizers = (towers.optimizer_class, type(tf2.optimizer).__name__)
  to2 = dict(pairs)
  slots = []
  for (name, kind), slot_name in towers.slot_names().items():
    if name not in to2:  # left out by the variable map
      continue
    kind2, factor = report.slot_convention(optimizers, kind)
    other = tf2.slots.get((to2[name], kind2))
    if other is None:
      raise PortError(f"the TF1 slot {slot_name} ({kind} of {name}) has no TF2 "
                      f"counterpart: the Keras optimizer keeps no {kind2!r} slot for "
                      f"{to2[name]}")
    slots.append((slot_name, other, factor))
  return slots


def load_tf1(path, towers, tf2, pairs, slots, notes=None):
  """Sets both sides from the TF1 checkpoint at `path` (the team's Saver's): the TF1 side's
  model variables, slots, global step, Adam's beta powers and the script's own variables it
  holds (a learning rate variable) as they are; the TF2 side's paired variables, its slots in
  Keras's convention at the rate of the checkpoint's step, its step count and its rate where
  TF1's is a variable (checkpoint_extras, which says in `notes` what it did not carry).
  Returns the step."""
  step_name = towers.global_step.op.name
  names = [a for a, _ in pairs] + [s for s, _, _ in slots]
  held = held_tf1(path)
  extras = read_tf1(path, [n for n in checkpoint_extras.others(towers) if n in held])
  values = read_tf1(path, names + [step_name if step_name in held or not
                                    towers.beta_powers else "beta2_power"])
  if step_name not in values:  # an Adam run without a global step: the step is in beta2_power
    values[step_name] = _steps_of(values.pop("beta2_power"), towers.beta_powers["beta2_power"],
                                  path)
  values.update(read_tf1(path, [n for n in towers.beta_powers if n in held]))
  values.update(extras)
  towers.assign(values)  # for the rate of the checkpoint's step (its decay schedule)
  checkpoint_extras.to_tf2(extras, towers, tf2.optimizer, [] if notes is None else notes)
  lr = np.float32(towers.rate())
  by_name = {tf2_replicas.variable_name(v): v for v in tf2.all}
  for a, b in pairs:
    by_name[b].assign(values[a].astype(_dtype(by_name[b])))
  for slot_name, slot, factor in slots:
    value = values[slot_name].astype(np.float32)
    slot.assign((factor(lr) * value if factor else value).astype(_dtype(slot)))
  tf2.optimizer.iterations.assign(int(values[step_name]))
  kept = non_slots(tf2.optimizer)  # porting.TF1Adam's beta powers: TF1's, as they are
  for name, value in read_tf1(path, list(kept)).items():
    kept[name].assign(value.astype(np.float32))
  return int(values[step_name])


def averages_of(path, towers, pairs):
  """{TF1 averaged variable: where its moving average starts} from the TF1 checkpoint at
  `path`: its EMA shadow where the checkpoint holds one (the team's Saver saves them), else
  the variable's own value (a shadow starts at its variable's value)."""
  if not towers.averages:
    return {}
  held, paired = held_tf1(path), {a for a, _ in pairs}
  shadows = {a: shadow.op.name for a, shadow in towers.averages.items() if a in paired}
  values = read_tf1(path, [shadows[a] if shadows[a] in held else a for a in shadows])
  return {a: values[shadows[a]] if shadows[a] in values else values[a] for a in shadows}


def read_tf1(path, names):
  try:
    reader = tf.train.load_checkpoint(path)
  except (tf.errors.OpError, ValueError) as e:
    raise PortError(f"cannot read the TF1 checkpoint {path}: {str(e).splitlines()[0]}") from None
  have = reader.get_variable_to_shape_map()
  missing = [n for n in names if n not in have]
  if missing:
    raise PortError(f"the TF1 checkpoint {path} lacks {', '.join(missing)} (it holds "
                    f"{len(have)} tensors; is it this model's?)")
  values = {}
  for n in names:
    try:
      values[n] = reader.get_tensor(n)
    # A data file cut (IndexError: "Read less bytes than requested"), missing or overwritten.
    except Exception as e:  # pylint: disable=broad-except  # each is the checkpoint's
      raise PortError(f"the TF1 checkpoint {path} does not read back whole: {n}: "
                      f"{str(e).splitlines()[0][:200]}") from None
  return values


def tf1_to_tf2(port, tf1_checkpoint, tf2_prefix, example, overwrite=False, notes=None):
  """Writes `tf1_checkpoint`'s values as the TF2 model's object-based checkpoint at
  `tf2_prefix`; returns the path written. `notes`, a list, gets a line for the checkpoint's
  variables outside the model carried or not (checkpoint_extras)."""
  sides = Sides(port, example)
  try:
    tf2 = sides.tf2
    load_tf1(tf1_checkpoint, sides.towers, tf2, sides.pairs, sides.slots, notes)
    # The moving averages: the checkpoint's shadows (a shadow it lacks starts at its weight).
    to2 = dict(sides.pairs)
    tf2.assign_averages({to2[a]: v for a, v in averages_of(
        tf1_checkpoint, sides.towers, sides.pairs).items()})
    checkpoint = tf2_checkpoint(tf2)
    # Read back before it replaces anything at tf2_prefix.
    return outputs.written(tf2_prefix, checkpoint.write, overwrite, check=lambda written: (
        conversion_checks.read_back(checkpoint, written, targets(sides))))
  finally:
    sides.close()


def tf2_checkpoint(tf2, with_averages=True):
  """The TF2 side's object-based checkpoint: model, optimizer and, where the port keeps an
  EMA, its shadows as `averages` (a list in the order of the model's trainable variables)."""
  if tf2.ema is None or not with_averages:
    return tf.train.Checkpoint(model=tf2.model, optimizer=tf2.optimizer)
  return tf.train.Checkpoint(model=tf2.model, optimizer=tf2.optimizer,
                             averages=tf2.average_variables())


def held_tf2(path):
  """The top-level names an object-based checkpoint holds ('model', 'optimizer', ...)."""
  try:
    names = tf.train.load_checkpoint(path).get_variable_to_shape_map()
  except (tf.errors.OpError, ValueError):
    return set()  # the read below says why, in one line
  return {name.split("/", 1)[0] for name in names}


def targets(sides):
  """[(name, TF2 variable)] a conversion writes or reads: the paired model variables, the
  slots, the step and a porting.optimizers optimizer's non-slots."""
  tf2 = sides.tf2
  by_name = {tf2_replicas.variable_name(v): v for v in tf2.all}
  out = [(b, by_name[b]) for _, b in sides.pairs]
  out += [(f"{slot_name} (slot)", slot) for slot_name, slot, _ in sides.slots]
  out.append(("optimizer.iterations", tf2.optimizer.iterations))
  if tf2.ema is not None:
    out += [(f"{tf2_replicas.variable_name(v)} (moving average)", shadow)
            for v, shadow in zip(tf2.averaged, tf2.average_variables())]
  return out + [(f"optimizer.{n}", v) for n, v in non_slots(tf2.optimizer).items()]


def non_slots(optimizer):
  """{TF1 name: variable} a porting.optimizers optimizer keeps as TF1 does; {} for Keras's."""
  return dict(getattr(optimizer, "tf1_non_slots", dict)())


def held_tf1(path):
  try:
    return set(tf.train.load_checkpoint(path).get_variable_to_shape_map())
  except (tf.errors.OpError, ValueError):
    return set()  # read_tf1 says why, in one line


def _dtype(variable):
  return np.dtype(tf.as_dtype(variable.dtype).as_numpy_dtype)
