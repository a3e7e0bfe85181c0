"""The shared schedule against tf.compat.v1.train.exponential_decay, bit for bit."""

import pytest
import tensorflow as tf

from cifar10 import schedule
from cifar10.hparams import DEFAULT


@pytest.mark.parametrize("batch,replicas,per_global,expected", [
    (128, 1, False, 136718),  # int(50000 / 128 * 350), the original
    (128, 2, False, 136718),  # the original's quirk: N GPUs do not change decay_steps
    (128, 2, True, 68359),
    (64, 4, True, 68359),
])
def test_decay_steps(batch, replicas, per_global, expected):
  assert schedule.decay_steps(batch, replicas, per_global) == expected


def _boundary_steps(decay, count=4):
  steps = {0, 1}
  for k in range(1, count + 1):
    steps |= {k * decay - 1, k * decay, k * decay + 1}
  return sorted(steps)


@pytest.mark.parametrize("decay", [3, 7, schedule.decay_steps(128)])
def test_equals_v1_exponential_decay_at_every_boundary(decay):
  for step in _boundary_steps(decay):
    ours = schedule.learning_rate(tf.constant(step, tf.int64), decay)
    v1 = tf.compat.v1.train.exponential_decay(
        DEFAULT.initial_learning_rate, tf.constant(step, tf.int64), decay,
        DEFAULT.learning_rate_decay_factor, staircase=True)
    v1 = v1() if callable(v1) else v1  # eagerly, v1 returns a callable
    assert ours.numpy() == v1.numpy(), step


def test_every_step_of_a_short_schedule_in_a_v1_graph():
  decay = 5
  with tf.Graph().as_default():
    step = tf.compat.v1.placeholder(tf.int64, [])
    ours = schedule.learning_rate(step, decay)
    v1 = tf.compat.v1.train.exponential_decay(0.1, step, decay, 0.1, staircase=True)
    with tf.compat.v1.Session() as sess:
      for s in range(26):
        a, b = sess.run([ours, v1], {step: s})
        assert a == b, s
        assert abs(a - 0.1 * 0.1 ** (s // decay)) <= 1e-6 * 0.1 ** (s // decay)


def test_inside_tf_function():
  lr = tf.function(lambda s: schedule.learning_rate(s, 10))(tf.constant(25, tf.int64))
  assert abs(float(lr) - 0.001) < 1e-9
