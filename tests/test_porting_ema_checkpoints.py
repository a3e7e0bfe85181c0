"""Checkpoints the team's own Saver restores: a TF1 script in Inception's way (a float32
global step made with get_variable, an EMA of the weights applied after the update, the
debiased batch norm of tests/assign_moving_average_port.py, `Saver(tf.global_variables())`)
converted to TF2 and back: every variable it saved, moving averages and step included,
restored by its own Saver, and its next step the same bits as from its own checkpoint."""

import numpy as np
import pytest
import tensorflow as tf

import porting
from tests import assign_moving_average_port as m

v1 = tf.compat.v1
EMA_DECAY = 0.9


def float_step():
  return v1.get_variable("global_step", [], initializer=v1.constant_initializer(0),
                         trainable=False)


def ema_port():
  return m.port(tf1_global_step=float_step,
                tf1_ema=lambda step: v1.train.ExponentialMovingAverage(EMA_DECAY, step),
                tf2_ema=lambda optimizer: tf.train.ExponentialMovingAverage(
                    EMA_DECAY, num_updates=optimizer.iterations))


def _team_graph(tower, ema):
  """The team's own training graph, its tower in tower_0's name scope as its multi-GPU script
  builds it: (graph, feeds, the loss, the train op; the EMA after the update where `ema`)."""
  graph = tf.Graph()
  with graph.as_default():
    images = v1.placeholder(tf.float32, [m.PER_REPLICA, m.SIZE, m.SIZE, 3])
    labels = v1.placeholder(tf.int32, [m.PER_REPLICA])
    step = float_step()
    with tf.name_scope("tower_0"):
      loss, _ = tower(images, labels)
    with tf.control_dependencies(v1.get_collection(v1.GraphKeys.UPDATE_OPS)):
      train_op = v1.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
    if ema:
      with tf.control_dependencies([train_op]):
        train_op = v1.train.ExponentialMovingAverage(EMA_DECAY, step).apply(
            v1.trainable_variables())
  return graph, (images, labels), loss, train_op


def _run(prefix, batches, restore=None, tower=m.tower_loss, ema=True):
  """The team's run: from `restore` (or its initializers), a step per batch, saved at
  `prefix` with Saver(tf.global_variables()); returns every variable's value. The loss is
  fetched with each step, as Inception's loop logs it (its averages move only then)."""
  graph, (images, labels), loss, train_op = _team_graph(tower, ema)
  with graph.as_default(), v1.Session(graph=graph) as sess:
    saver = v1.train.Saver(v1.global_variables())
    if restore:
      saver.restore(sess, restore)
    else:
      sess.run(v1.global_variables_initializer())
    for x, y in batches:
      sess.run([train_op, loss], {images: x, labels: y})
    if prefix:
      saver.save(sess, prefix, write_meta_graph=False)
    return sess.run({v.op.name: v for v in v1.global_variables()})


def test_a_converted_checkpoint_restores_into_the_teams_saver_and_steps_alike(tmp_path):
  data = m.batches(1, steps=3)
  saved = _run(str(tmp_path / "tf1" / "model.ckpt-2"), data[:2])
  assert saved["global_step"].dtype == np.float32 and saved["global_step"] == 2
  shadows = [n for n in saved if n.endswith("ExponentialMovingAverage")]
  assert len(shadows) == 3  # conv/weights, beta, logits/weights
  tf2 = porting.tf1_to_tf2(ema_port(), str(tmp_path / "tf1" / "model.ckpt-2"),
                           str(tmp_path / "tf2" / "ckpt"), data[0])
  back = porting.tf2_to_tf1(ema_port(), tf2, str(tmp_path / "back" / "model.ckpt-2"),
                            data[0])
  reader = tf.train.load_checkpoint(back)
  assert reader.get_variable_to_dtype_map()["global_step"] == tf.float32
  # Every variable the team saved, the averages and debias state included, to the bit.
  for name, value in saved.items():
    np.testing.assert_array_equal(reader.get_tensor(name), value, err_msg=name)
  # The team's own Saver restores it, and the next step is the original's, averages included.
  after_original = _run(None, data[2:], restore=str(tmp_path / "tf1" / "model.ckpt-2"))
  after_converted = _run(None, data[2:], restore=back)
  for name, value in after_original.items():
    np.testing.assert_array_equal(after_converted[name], value, err_msg=name)


def test_the_tf2_checkpoint_holds_the_averages_in_trainable_order(tmp_path):
  data = m.batches(1, steps=2)
  saved = _run(str(tmp_path / "tf1" / "model.ckpt-2"), data)
  path = porting.tf1_to_tf2(ema_port(), str(tmp_path / "tf1" / "model.ckpt-2"),
                            str(tmp_path / "tf2" / "ckpt"), data[0])
  net = m.Net()
  averages = [tf.Variable(tf.zeros_like(v)) for v in net.trainable_variables]
  tf.train.Checkpoint(averages=averages).read(path).expect_partial()
  expected = ["conv/weights", "conv/BatchNorm/beta", "logits/weights"]
  for variable, name in zip(averages, expected):
    np.testing.assert_array_equal(variable.numpy(),
                                  saved[f"{name}/ExponentialMovingAverage"], err_msg=name)


@pytest.mark.parametrize("global_step", [None, float_step])
def test_the_comparison_runs_on_either_global_step(global_step):
  report = porting.compare(m.port(tf1_global_step=global_step), m.batches(1), replicas=1,
                           steps=2)
  assert report.equal, report.text()


def _moving_statistics(trainable):
  """What Inception's EMA averages beside the trainable variables: the moving statistics
  (there through tf.moving_average_variables())."""
  return trainable + [v for v in v1.global_variables()
                      if v.op.name.endswith(("moving_mean", "moving_variance"))]


def _tf2_moving_statistics(model):
  return model.trainable_variables + [model.bn.moving_mean, model.bn.moving_variance]


def test_an_ema_of_the_moving_statistics_too_is_compared_average_by_average():
  port = ema_port()
  port.tf1_ema_variables, port.tf2_ema_variables = _moving_statistics, _tf2_moving_statistics
  report = porting.compare(port, m.batches(2), replicas=2, steps=2)
  averaged = {r.tf1 for r in report.rows if r.kind == "average"}
  assert {"conv/BatchNorm/moving_mean", "conv/BatchNorm/moving_variance"} < averaged
  assert report.equal, report.text()


def test_an_ema_of_the_moving_statistics_on_one_side_only_is_refused_in_one_line():
  port = ema_port()
  port.tf1_ema_variables = _moving_statistics
  with pytest.raises(porting.PortError) as refused:
    porting.compare(port, m.batches(1), replicas=1, steps=1)
  assert str(refused.value) == (
      "the moving averages differ in what they average: the TF1 EMA averages 2 variable(s) "
      "the other does not (conv/BatchNorm/moving_mean, conv/BatchNorm/moving_variance); give "
      "tf1_ema_variables and tf2_ema_variables the same variables (Inception's EMA averages "
      "tf.compat.v1.moving_average_variables() too)")


def _with_loss_average(images, labels):
  """Inception's _tower_loss keeps a moving average of its loss (for its summaries) in the
  tower: a TF1 variable the port has no counterpart of."""
  loss, logits = m.tower_loss(images, labels)
  with tf.control_dependencies([v1.train.ExponentialMovingAverage(0.9, name="avg").apply(
      [loss])]):
    return tf.identity(loss), logits


def _loss_average_run(prefix, batches, restore=None):
  return _run(prefix, batches, restore, tower=_with_loss_average, ema=False)


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_a_tf1_only_variable_is_carried_from_the_runs_checkpoint_never_reset(tmp_path):
  data = m.batches(1, steps=3)
  saved = _loss_average_run(str(tmp_path / "tf1" / "model.ckpt-2"), data[:2])
  (average,) = [n for n in saved if n.endswith("/avg")]
  assert saved[average] != 0  # the run moved it
  port = m.port(tower_loss=_with_loss_average, tf1_global_step=float_step,
                variable_map={average: None})
  tf2 = porting.tf1_to_tf2(port, str(tmp_path / "tf1" / "model.ckpt-2"),
                           str(tmp_path / "tf2" / "ckpt"), data[0])
  with pytest.raises(porting.PortError, match=f"the TF1 graph holds {average}, which the port "
                     "has no counterpart of .* their initial values are not the run's"):
    porting.tf2_to_tf1(port, tf2, str(tmp_path / "back" / "model.ckpt-2"), data[0])
  back = porting.tf2_to_tf1(port, tf2, str(tmp_path / "back" / "model.ckpt-2"), data[0],
                            tf1_checkpoint=str(tmp_path / "tf1" / "model.ckpt-2"))
  reader = tf.train.load_checkpoint(back)
  for name, value in saved.items():
    np.testing.assert_array_equal(reader.get_tensor(name), value, err_msg=name)
  after = _loss_average_run(None, data[2:], restore=back)
  original = _loss_average_run(None, data[2:], restore=str(tmp_path / "tf1" / "model.ckpt-2"))
  for name, value in original.items():
    np.testing.assert_array_equal(after[name], value, err_msg=name)
