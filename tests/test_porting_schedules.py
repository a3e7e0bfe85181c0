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


def test_a_warmup_on_one_side_only_is_read_from_the_rates():
  """BERT's schedule (a linear warmup from 0) against a port without it: the line listed
  decay_steps, step counts and boundaries, and not the warmup the rates show."""
  assert _line([0.0, 0.0005, 0.0008], [0.001, 0.00095, 0.0009]) == (
      "the learning rate differs from step 0 (TF1 0, TF2 0.001): TF1's rate rises over the "
      "steps compared (0, 0.0005, 0.0008) and TF2's never does: a warmup on TF1's side only "
      "(BERT's rises linearly from 0 over num_warmup_steps), or another schedule")
  assert "a warmup on TF2's side only" in _line([0.1] * 5, [0.02, 0.04, 0.06, 0.08, 0.1])
  assert "warmup" not in _line([0.0, 0.5, 0.8], [0.0, 0.4, 0.9])  # both rise: other warmups
