"""An Adam run's checkpoints through the kit, as TF1 teams' scripts wrote them: a Saver and no
global step (AdamOptimizer keeps its step in beta1_power and beta2_power). TF1 -> TF2 reads the
step from them; TF2 -> TF1 writes them as the run held them, so the next TF1 step after a
round trip is the original run's next step, to the bit (before: refused for the missing
global step, and the powers written back at their initial values restarted Adam's bias
correction)."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import porting
from tests import bn_momentum_port as m

v1 = tf.compat.v1
pytestmark = pytest.mark.filterwarnings(
    "ignore:`tf.layers.batch_normalization` is deprecated")


def _adam():
  return v1.train.AdamOptimizer(0.01, epsilon=1e-7)


def adam_port():
  return m.port(tf1_optimizer=lambda step: _adam(),
                tf2_optimizer=lambda: keras.optimizers.Adam(0.01, epsilon=1e-7))


def _tf1_run(batches, restore=None, save=None):
  """The team's script: Adam, no global step, a Saver; from `restore` (or the initial values)
  through `batches`, saved at `save` after all but the last; returns every variable after the
  last batch."""
  with tf.Graph().as_default() as graph:
    images = v1.placeholder(tf.float32, [None, m.SIZE, m.SIZE, 3])
    labels = v1.placeholder(tf.int32, [None])
    loss, _ = m.tower_loss(images, labels)
    with tf.control_dependencies(v1.get_collection(v1.GraphKeys.UPDATE_OPS)):
      train_op = _adam().minimize(loss)
    saver = v1.train.Saver()
    with v1.Session(graph=graph) as sess:
      sess.run(v1.global_variables_initializer())
      if restore:
        saver.restore(sess, restore)
      for i, (x, y) in enumerate(batches):
        if save and i == len(batches) - 1:
          tf.io.gfile.makedirs(os.path.dirname(save))
          saver.save(sess, save, write_meta_graph=False)
        sess.run(train_op, {images: x, labels: y})
      return sess.run({v.op.name: v for v in v1.global_variables()})


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_an_adam_run_without_a_global_step_round_trips_to_its_next_step(tmp_path):
  data = m.batches(1, steps=4)
  # The original: 3 steps, saved (no global step), then its 4th step.
  original_next = _tf1_run(data, save=str(tmp_path / "tf1" / "model.ckpt"))
  assert "global_step" not in original_next
  tf2 = porting.tf1_to_tf2(adam_port(), str(tmp_path / "tf1" / "model.ckpt"),
                           str(tmp_path / "tf2" / "ckpt"), data[0])
  net, optimizer = m.Net(), keras.optimizers.Adam(0.01, epsilon=1e-7)
  optimizer.build(net.trainable_variables)
  tf.train.Checkpoint(model=net, optimizer=optimizer).read(tf2).assert_existing_objects_matched()
  assert int(optimizer.iterations.numpy()) == 3  # read from beta2_power = 0.999 ** 4
  back = porting.tf2_to_tf1(adam_port(), tf2, str(tmp_path / "back" / "model.ckpt"), data[0])
  reader = tf.train.load_checkpoint(back)
  for name in ("beta1_power", "beta2_power"):  # as the run held them, not reset
    saved = tf.train.load_checkpoint(str(tmp_path / "tf1" / "model.ckpt")).get_tensor(name)
    assert reader.get_tensor(name) == saved, name
  # The team's script restores the round trip and takes the 4th step: the original's.
  again_next = _tf1_run(data[3:], restore=back)
  assert again_next.keys() == original_next.keys()
  for name, value in original_next.items():
    np.testing.assert_array_equal(again_next[name], value, err_msg=name)


def test_the_step_is_read_from_beta2_power_exactly_or_refused_in_one_line():
  from porting import adam_steps  # pylint: disable=g-import-not-at-top
  for steps in (0, 1, 7, 3000):  # float32 products, not beta ** t: exact at every step
    assert adam_steps.steps_of(adam_steps.power(0.999, steps), 0.999, "x") == steps
  with pytest.raises(porting.PortError, match=r"the TF1 checkpoint x has no global step, and "
                     r"its beta2_power 0\.5 is no power that AdamOptimizer\(beta2=0\.999\)"):
    adam_steps.steps_of(np.float32(0.5), 0.999, "x")

