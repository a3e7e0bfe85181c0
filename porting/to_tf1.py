"""TF2 -> TF1: a port's TF2 checkpoint written under the TF1 names its program restores.

  porting.tf2_to_tf1(port, "/runs/tf2/ckpt-1", "/runs/tf1_again/model.ckpt", example,
                     tf1_checkpoint="/runs/tf1/model.ckpt-5000")

The kit's TF1 graph is the port's towers: the model's variables, the optimizer's slots, the
global step, Adam's beta powers, the EMA shadows the Port declares, and what the towers'
code makes beside them. A team's program may make more outside the towers (the loss averages
its training function keeps for summaries, an EMA the Port does not declare), and its Saver
then restores no checkpoint that lacks them. The kit cannot see those, so it says so:

- without `tf1_checkpoint`, a note says what the checkpoint holds and what it cannot hold;
- with it (the run's own TF1 checkpoint), every variable of that checkpoint is written: those
  the kit's graph has no place for are carried as they are there (said in a note, the EMA
  shadows the Port does not declare by name: they are that run's averages, not the TF2
  run's), and the checkpoint written is read back to hold every one of them.
"""

import numpy as np
import tensorflow as tf

from porting import checkpoint_extras
from porting import checkpoints
from porting import conversion_checks
from porting import outputs
from porting.adam_steps import power
from porting.errors import PortError

EMA_SUFFIX = "/ExponentialMovingAverage"


def tf2_to_tf1(port, tf2_checkpoint, tf1_prefix, example, overwrite=False,
               tf1_checkpoint=None, notes=None):
  """Writes the TF2 checkpoint `tf2_checkpoint` (`tf.train.Checkpoint(model=...,
  optimizer=...)`) under TF1 names at `tf1_prefix`, for a tf.compat.v1.train.Saver; returns
  the path written. TF1 variables the port has no counterpart of (variable_map to None:
  Inception's loss averages) take their values from `tf1_checkpoint`, the run's own TF1
  checkpoint; without it such a port is refused: their initial values are not the run's.
  `notes`, a list, gets a line for each kind of variable carried, or not held."""
  notes = [] if notes is None else notes
  sides = checkpoints.Sides(port, example)
  try:
    towers, tf2 = sides.towers, sides.tf2
    paired = {a for a, _ in sides.pairs}
    alone = [a for a, _ in towers.variables() if a not in paired]
    if alone and tf1_checkpoint is None:
      raise PortError(f"the TF1 graph holds {', '.join(alone)}, which the port has no "
                      "counterpart of (variable_map to None), so no TF2 checkpoint holds "
                      "them: give the run's own TF1 checkpoint (tf1_checkpoint=, "
                      "--tf1_checkpoint) to carry them over; their initial values are not "
                      "the run's")
    carried = checkpoints.read_tf1(tf1_checkpoint, alone) if alone else {}
    values = _converted(sides, tf2_checkpoint)
    values.update(carried)
    held1 = checkpoints.held_tf1(tf1_checkpoint) if tf1_checkpoint else set()
    own = checkpoints.read_tf1(tf1_checkpoint, [n for n in checkpoint_extras.others(towers)
                                                if n in held1]) if held1 else {}
    values.update(checkpoint_extras.to_tf1(towers, tf2.optimizer, own, notes))
    steps = int(tf2.optimizer.iterations.numpy())
    values[towers.global_step.op.name] = steps
    kept = checkpoints.non_slots(tf2.optimizer)
    for name, beta in towers.beta_powers.items():  # as TF1's Adam holds them after `steps`
      values[name] = kept[name].numpy() if name in kept else power(beta, steps)
    towers.assign(values)
    lr = np.float32(towers.rate())
    for slot_name, slot, factor in sides.slots:
      value = np.asarray(slot.numpy(), np.float32)
      values[slot_name] = value / factor(lr) if factor else value
    towers.assign(values)
    graph = {v.op.name for v in towers.all_variables}
    beyond = sorted(held1 - graph)  # the program's variables the kit's graph does not make
    extra = checkpoints.read_tf1(tf1_checkpoint, beyond) if beyond else {}
    notes += _said(beyond, port, tf1_checkpoint, len(graph))

    def write(prefix):
      towers.save(prefix)
      if extra:
        _add(prefix, extra)

    def check(written):
      reader = tf.compat.v1.train.NewCheckpointReader(written)
      conversion_checks.tf1_read_back(reader, {**towers.values(), **extra})
      lacking = sorted(held1 - set(reader.get_variable_to_shape_map()))
      if lacking:  # the team's Saver would not restore it
        raise PortError(f"the TF1 checkpoint written lacks {', '.join(lacking)} of "
                        f"{tf1_checkpoint}")
    return outputs.written(tf1_prefix, write, overwrite, check=check)
  finally:
    sides.close()


def _converted(sides, tf2_checkpoint):
  """{TF1 name: value} of the model's variables and their moving averages, from the TF2
  checkpoint (every one read from it, none from an initializer)."""
  towers, tf2 = sides.towers, sides.tf2
  held = checkpoints.held_tf2(tf2_checkpoint)
  checkpoint = checkpoints.tf2_checkpoint(tf2, with_averages="averages" in held)
  try:
    checkpoint.read(tf2_checkpoint).assert_existing_objects_matched()
  except (tf.errors.OpError, ValueError, AssertionError) as e:
    raise PortError(f"cannot restore the TF2 model from {tf2_checkpoint}: "
                    f"{str(e).splitlines()[0][:300]}") from None
  conversion_checks.read_into(checkpoint, tf2_checkpoint, checkpoints.targets(sides))
  values2 = tf2.values()
  values = {a: values2[b] for a, b in sides.pairs}
  # The moving averages: the checkpoint's, or (a TF2 checkpoint without them) the weights,
  # where an EMA starts; never the TF1 graph's initial values.
  averages = tf2.average_values() if "averages" in held else {}
  for a, b in sides.pairs:
    if a in towers.averages:
      values[towers.averages[a].op.name] = averages.get(b, values2[b])
  return values


def _said(beyond, port, tf1_checkpoint, count):
  """The notes on the program's variables beyond the kit's graph: carried, or not held."""
  if tf1_checkpoint is None:
    return [not_held(count)]
  if not beyond:
    return [f"every variable of {tf1_checkpoint} written"]
  shadows = [n for n in beyond if n.endswith(EMA_SUFFIX)]
  rest = [n for n in beyond if n not in shadows]
  notes = []
  if rest:
    notes.append(f"carried from {tf1_checkpoint} as they are there (the port's TF1 towers do "
                 f"not make them): {', '.join(rest)}")
  if shadows:
    notes.append(f"carried from {tf1_checkpoint} as they are there: {len(shadows)} moving "
                 f"average(s) ({', '.join(shadows[:3])}{', ...' if len(shadows) > 3 else ''}) "
                 "that the Port does not declare (Port(ema=...)): the TF1 run's averages, "
                 "not the TF2 run's")
  return notes


def not_held(count):
  """The note of a conversion without the run's own TF1 checkpoint, whose graph holds
  `count` variables."""
  return (f"holds the {count} variables of the port's TF1 towers (model, optimizer slots, "
          "global step, the moving averages the Port declares); not held: what your program "
          "makes outside its towers (loss averages for summaries, an EMA the Port does not "
          "declare), without which its Saver will not restore this checkpoint: give "
          "--tf1_checkpoint=<the run's own TF1 checkpoint> to carry them, every one checked "
          "written")


def _add(prefix, extra):
  """Rewrites the checkpoint at `prefix` with `extra` ({name: value}, each in its own dtype)
  beside what it holds."""
  reader = tf.compat.v1.train.NewCheckpointReader(prefix)
  held = {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}
  held.update(extra)
  names = sorted(held)
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                    tensors=[tf.constant(held[n]) for n in names])
