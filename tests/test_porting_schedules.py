"""The learning-rate cause says what the two schedules' numbers show: one running some
steps ahead of the other (a boundary off by one), or schedules that differ otherwise; never
a claim about step counting that the rates do not show."""

import types

from porting.causes import optimizers


def _line(tf1, tf2):
  (line,) = optimizers.learning_rate(types.SimpleNamespace(rates=(tf1, tf2)))
  return line


def test_a_boundary_one_step_early_is_a_schedule_one_step_ahead():
  # piecewise_constant(step, [1], [0.1, 0.01]) against PiecewiseConstantDecay([0], ...).
  assert _line([0.1, 0.1, 0.01], [0.1, 0.01, 0.01]) == (
      "the learning rate differs from step 1 (TF1 0.1, TF2 0.01): TF2's schedule runs 1 "
      "step(s) ahead of TF1's (its rate at step i is TF1's at step i + 1, at every step "
      "compared): a boundary or decay_steps off by that many steps, or a step count that "
      "starts elsewhere on one side")


def test_a_schedule_behind_and_one_of_another_shape_are_told_apart():
  assert "runs 1 step(s) behind TF1's" in _line([0.1, 0.05, 0.05, 0.025],
                                                [0.1, 0.1, 0.05, 0.05])
  other = _line([0.1, 0.05, 0.025], [0.1, 0.1, 0.1])
  assert "the two schedules differ" in other and "runs" not in other
