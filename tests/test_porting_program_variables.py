"""tf2_to_tf1 and the variables a team's program makes outside its towers (issue 61).

The kit's TF1 graph is the port's towers. A training program makes more beside them: the loss
averages its summaries chart, an EMA the Port does not declare. A TF1 checkpoint written
without them is one the program's Saver does not restore. Here the program's checkpoint is
tests/bn_momentum_port.py's, with such a loss average and such a shadow added.
"""

import numpy as np
import pytest
import tensorflow as tf

import porting
from tests import bn_momentum_port as m

pytestmark = pytest.mark.filterwarnings(
    "ignore:`tf.layers.batch_normalization` is deprecated")
v1 = tf.compat.v1
AVERAGE, SHADOW = "total_loss/avg", "conv1/kernel/ExponentialMovingAverage"


def _programs_checkpoint(tmp_path, data):
  """The towers' checkpoint, with what the program adds beside them: {name: value} too."""
  prefix = str(tmp_path / "tf1" / "model.ckpt-2")
  saved = m.train_tf1(prefix, data)
  extra = {AVERAGE: np.float32(2.25), SHADOW: saved["conv1/kernel"] * np.float32(0.5)}
  reader = tf.train.load_checkpoint(prefix)
  held = {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}
  held.update(extra)
  names = sorted(held)
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                    tensors=[tf.constant(held[n]) for n in names])
  return prefix, held


def _restored_by_the_program(path, program):
  """What the program's own Saver restores from `path`: every variable it holds."""
  with tf.Graph().as_default():
    variables = [v1.get_variable(n, initializer=tf.zeros_like(tf.constant(value)))
                 for n, value in sorted(program.items())]
    with v1.Session() as sess:
      v1.train.Saver(variables).restore(sess, path)
      return dict(zip(sorted(program), sess.run(variables)))


def test_the_programs_own_checkpoint_makes_the_conversion_one_it_restores(tmp_path):
  data = m.batches(1, steps=2)
  program_ckpt, program = _programs_checkpoint(tmp_path, data)
  tf2 = porting.tf1_to_tf2(m.port(), program_ckpt, str(tmp_path / "tf2" / "ckpt"), data[0])
  notes = []
  back = porting.tf2_to_tf1(m.port(), tf2, str(tmp_path / "back" / "model.ckpt"), data[0],
                            tf1_checkpoint=program_ckpt, notes=notes)
  restored = _restored_by_the_program(back, program)
  assert restored[AVERAGE] == np.float32(2.25)  # carried as it was
  np.testing.assert_array_equal(restored[SHADOW], program[SHADOW])
  np.testing.assert_array_equal(restored["conv1/kernel"], program["conv1/kernel"])
  said = "\n".join(notes)
  assert f"(the port's TF1 towers do not make them): {AVERAGE}" in said, said
  assert f"1 moving average(s) ({SHADOW}) that the Port does not declare" in said, said
  assert "the TF1 run's averages, not the TF2 run's" in said


def test_without_it_the_conversion_says_what_it_cannot_hold(tmp_path):
  data = m.batches(1, steps=2)
  program_ckpt, program = _programs_checkpoint(tmp_path, data)
  tf2 = porting.tf1_to_tf2(m.port(), program_ckpt, str(tmp_path / "tf2" / "ckpt"), data[0])
  notes = []
  back = porting.tf2_to_tf1(m.port(), tf2, str(tmp_path / "back" / "model.ckpt"), data[0],
                            notes=notes)
  held = tf.train.load_checkpoint(back).get_variable_to_shape_map()
  assert AVERAGE not in held and SHADOW not in held  # the kit cannot know them: it says so
  assert len(notes) == 1 and "not held: what your program makes outside its towers" in notes[0]
  assert "--tf1_checkpoint=<the run's own TF1 checkpoint>" in notes[0]
  with pytest.raises(tf.errors.NotFoundError):  # what the note warns of
    _restored_by_the_program(back, program)
