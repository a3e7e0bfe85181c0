"""compat_v1.step_saver: a ps/worker chief's checkpoint holds the global step it is named by,
when another worker's update lands between the chief's runs (an in-process graph whose
session applies "another worker's" update after each run of the chief's)."""

import pytest
import tensorflow as tf
from tensorflow.python.client import session as session_lib  # pylint: disable=g-direct-tensorflow-import

from compat_v1 import step_saver

v1 = tf.compat.v1


class _Racing(session_lib.SessionInterface):
  """A session after each of whose runs another worker's update lands on the shared step."""

  def __init__(self, sess, update):
    self._sess, self._update = sess, update

  @property
  def graph(self):
    return self._sess.graph

  @property
  def sess_str(self):
    return self._sess.sess_str

  def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
    out = self._sess.run(fetches, feed_dict, options, run_metadata)
    self._sess.run(self._update)
    return out


def _saved(save, tmp_path):
  """(path, the checkpoint's global step, its weight) of `save(saver_graph_parts)` run from
  step 6 in the racing session."""
  graph = tf.Graph()
  with graph.as_default():
    step = v1.train.get_or_create_global_step()
    weight = v1.get_variable("w", initializer=1.0)
    update = tf.group(step.assign_add(1), weight.assign_add(1.0))
    saver = save(step, [step, weight])
    with v1.Session(graph=graph) as sess:
      sess.run(v1.global_variables_initializer())
      sess.run(step.assign(6))
      path = saver(_Racing(sess, update), str(tmp_path / "model.ckpt"))
  names = dict(tf.train.list_variables(path))
  assert sorted(names) == ["global_step", "w"]  # the copy is not a variable of the checkpoint
  return path, int(tf.train.load_variable(path, "global_step")), tf.train.load_variable(path, "w")


def test_the_checkpoint_holds_the_step_it_is_named_by(tmp_path):
  def save(step, var_list):
    return step_saver.StepSaver(step, var_list, max_to_keep=2).save
  path, held, weight = _saved(save, tmp_path)
  assert path.endswith("/model.ckpt-6") and held == 6
  # The weight holds the update that landed after step 6 (asynchronous training's weights).
  assert weight == 2.0


def test_tf1s_saver_names_the_checkpoint_by_a_step_read_a_run_earlier(tmp_path):
  # Why the copy: TF1's own Saver, given the step's tensor, reads it for the name in one run
  # and saves in the next, so an update landing between them is in the checkpoint, not its
  # name (a 2-worker job's SIGTERM stop said "after step 7" of a checkpoint holding 8).
  def save(step, var_list):
    saver = v1.train.Saver(var_list)
    return lambda sess, prefix: saver.save(sess, prefix, global_step=step)
  path, held, _ = _saved(save, tmp_path)
  assert path.endswith("/model.ckpt-6") and held == 7


def test_it_refuses_a_var_list_without_the_step():
  graph = tf.Graph()
  with graph.as_default():
    step = v1.train.get_or_create_global_step()
    weight = v1.get_variable("w", initializer=1.0)
    with pytest.raises(ValueError, match="must hold the global step"):
      step_saver.StepSaver(step, [weight])
