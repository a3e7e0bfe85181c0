"""The run driver's decisions, with a backend of plain numbers: which steps run in which
calls, which log, summarise and save, that a stop saves once, that a non-finite state is never
saved, that resume beats --init_from and that a run at --max_steps never starts. The real
loops' tests keep what needs TensorFlow's numbers; these take milliseconds each."""

import contextlib
import os
import re

import pytest
import tensorflow as tf

from cifar10 import checkpoints
from cifar10 import config
from cifar10 import model
from harness.control import driver
from harness.folders import recovery
from harness.control import run_errors
from harness.control import signals


class Numbers(driver.Backend):
  """The state is the global step; each step adds one. Its checkpoints are real, one int64
  each, so that the driver's recovery reads them as it reads a trainer's."""

  def __init__(self, train_dir, most=1, finite_until=None, stop_after=None, job_stop=False):
    self.train_dir, self.max_steps_per_call = str(train_dir), most
    self.finite_until, self.stop_after, self.job_stop = finite_until, stop_after, job_stop
    self.step, self.how, self.started = 0, None, None
    self.calls, self.summaries, self.saves, self.closed = [], [], [], False
    self.request = signals.StopRequest()

  def resume(self, path, keep):
    self.how = ("resume", os.path.basename(path), [os.path.basename(p) for p in keep])
    self.step = int(tf.train.load_variable(path, "step/.ATTRIBUTES/VARIABLE_VALUE"))
    return self.step

  def initialize(self, state):
    self.how = ("initialize", None if state is None else state.global_step)
    self.step = 0 if state is None else state.global_step
    return self.step

  def start(self, step):
    self.started = step

  def train(self, call):
    self.calls.append((call.step, call.k))
    self.step += call.k
    asked = self.stop_after is not None and self.step > self.stop_after
    if asked and not self.job_stop:
      self.request.signal = "SIGTERM"  # as the signal handler sets it, during the call
    return driver.Steps(float(call.step), 0.1, float(self.step - 1), 0.1,
                        record={"step": call.step} if call.record else None,
                        stop=asked if self.job_stop else None)

  def write_summaries(self, step, steps):
    assert steps.record == {"step": step}
    self.summaries.append(step)

  def all_finite(self):
    return self.finite_until is None or self.step <= self.finite_until

  def save(self, step):
    prefix = os.path.join(self.train_dir, f"ckpt-{step}")
    tf.train.Checkpoint(step=tf.Variable(step, dtype=tf.int64)).write(prefix)
    self.saves.append(step)
    recovery.write_index(self.train_dir,
                           [p for _, p in checkpoints.steps(self.train_dir)][::-1])
    return prefix

  def global_step(self):
    return self.step

  def close(self):
    self.closed = True


def _config(train_dir, max_steps=10, **kwargs):
  settings = dict(log_frequency=3, save_summaries_steps=4, save_checkpoint_steps=5)
  settings.update(kwargs)
  return config.TrainConfig(train_dir=str(train_dir), max_steps=max_steps, batch_size=2,
                            dataset="synthetic", **settings)


def _train(cfg, backend, monkeypatch, caplog):
  """driver.train with the backend's own StopRequest as the signals' (no real signal)."""
  monkeypatch.setattr(signals, "stop_on_signals",
                      lambda on_request=None: contextlib.nullcontext(backend.request))
  caplog.clear()
  caplog.set_level("INFO")
  try:
    return driver.train(cfg, backend, replicas=1, global_batch=2)
  finally:
    backend.logged = [int(s) for s in re.findall(r"\bstep (\d+), loss = ", caplog.text)]


def _model_checkpoint(path, step):
  """A checkpoint of the CNN's shapes (zeros) at global step `step`, as --init_from reads."""
  names, tensors = ["global_step"], [tf.constant(step, tf.int64)]
  for spec in model.SPECS:
    for kind in ("weights", "ema"):
      names.append(checkpoints.candidate_keys(kind, spec.name)[0])
      tensors.append(tf.zeros(spec.shape))
  tf.raw_ops.SaveV2(prefix=path, tensor_names=names, shape_and_slices=[""] * len(names),
                    tensors=tensors)
  return path


# The calls of a 10-step run with log_frequency 3, summaries every 4, a checkpoint every 5.
CALLS = {1: [(s, 1) for s in range(10)],
         4: [(0, 1), (1, 2), (3, 1), (4, 1), (5, 1), (6, 2), (8, 1), (9, 1)]}


@pytest.mark.parametrize("most", [1, 4])
def test_the_same_lines_summaries_and_saves_at_any_call_length(most, tmp_path, monkeypatch,
                                                                caplog):
  backend = Numbers(tmp_path, most=most)
  assert _train(_config(tmp_path), backend, monkeypatch, caplog) == 10
  assert backend.calls == CALLS[most]
  assert backend.logged == [0, 3, 6, 9]  # multiples of 3, and the last step
  assert backend.summaries == [0, 4, 8]  # every 4 steps (not the last: a resume's charts)
  assert backend.saves == [5, 10]
  assert backend.how == ("initialize", None) and backend.started == 0 and backend.closed


@pytest.mark.parametrize("job_stop", [False, True], ids=["own_request", "job_wide_answer"])
@pytest.mark.parametrize("stop_after, saved", [(2, [3]), (4, [5])])
def test_a_stop_saves_once_at_the_step_reached(stop_after, saved, job_stop, tmp_path,
                                               monkeypatch, caplog):
  backend = Numbers(tmp_path, stop_after=stop_after, job_stop=job_stop)
  with pytest.raises(run_errors.Stopped) as stopped:
    _train(_config(tmp_path), backend, monkeypatch, caplog)
  assert backend.saves == saved and backend.step == saved[0] and backend.closed
  assert stopped.value.status == run_errors.PREEMPTED_EXIT_STATUS
  assert f"ckpt-{saved[0]}" in str(stopped.value)


def test_a_stop_at_the_last_step_is_a_normal_end(tmp_path, monkeypatch, caplog):
  backend = Numbers(tmp_path, stop_after=9)
  assert _train(_config(tmp_path), backend, monkeypatch, caplog) == 10
  assert backend.saves == [5, 10]


def test_a_state_that_is_not_finite_is_never_saved(tmp_path, monkeypatch, caplog):
  backend = Numbers(tmp_path, finite_until=3)
  with pytest.raises(run_errors.NonFiniteState, match="after step 4; not saved"):
    _train(_config(tmp_path), backend, monkeypatch, caplog)
  assert backend.saves == [] and backend.calls[-1] == (4, 1)
  assert checkpoints.steps(str(tmp_path)) == []


def test_resume_beats_init_from_and_init_from_starts_a_new_run(tmp_path, monkeypatch, caplog):
  init = _model_checkpoint(str(tmp_path / "other" / "model.ckpt-7"), 7)
  fresh = Numbers(tmp_path / "run")
  with pytest.raises(run_errors.Stopped):  # a run from --init_from's step 7, stopped at 8
    fresh.stop_after = 7
    _train(_config(tmp_path / "run", init_from=init), fresh, monkeypatch, caplog)
  assert fresh.how == ("initialize", 7) and fresh.calls == [(7, 1)] and fresh.saves == [8]
  again = Numbers(tmp_path / "run")  # its own checkpoint wins, even over an --init_from
  missing = str(tmp_path / "nothing")  # that names nothing (it is not even read)
  assert _train(_config(tmp_path / "run", init_from=missing), again, monkeypatch, caplog) == 10
  assert again.how == ("resume", "ckpt-8", ["ckpt-8"]) and again.started == 8
  assert again.calls == [(8, 1), (9, 1)] and again.saves == [10]


def test_a_run_at_max_steps_never_starts(tmp_path, monkeypatch, caplog):
  assert _train(_config(tmp_path), Numbers(tmp_path), monkeypatch, caplog) == 10
  done = Numbers(tmp_path)
  assert _train(_config(tmp_path), done, monkeypatch, caplog) == 10
  assert done.how[:2] == ("resume", "ckpt-10")
  assert done.started is None and done.calls == [] and done.saves == [] and done.closed
  assert "Step 10 already reached --max_steps=10; nothing to do" in caplog.text


def test_the_rotation_keeps_max_checkpoints_to_keep(tmp_path, monkeypatch, caplog):
  backend = Numbers(tmp_path)
  _train(_config(tmp_path, max_steps=10, save_checkpoint_steps=2, max_checkpoints_to_keep=2),
         backend, monkeypatch, caplog)
  assert backend.saves == [2, 4, 6, 8, 10]
  kept = Numbers(tmp_path)  # the next start counts them against the flag
  _train(_config(tmp_path, max_steps=10, max_checkpoints_to_keep=2), kept, monkeypatch, caplog)
  assert [s for s, _ in checkpoints.steps(str(tmp_path))] == [10, 8]
  assert kept.how == ("resume", "ckpt-10", ["ckpt-8", "ckpt-10"])


def test_a_backend_must_have_every_abstract_method():
  class Partial(driver.Backend):
    def resume(self, path, keep):
      return 0

  with pytest.raises(TypeError, match="abstract method"):
    Partial()  # pylint: disable=abstract-class-instantiated


def test_each_save_says_so(tmp_path, monkeypatch, caplog):
  _train(_config(tmp_path), Numbers(tmp_path), monkeypatch, caplog)
  assert re.findall(r"Saved (\S+)", caplog.text) == [str(tmp_path / "ckpt-5"),
                                                     str(tmp_path / "ckpt-10")]


def test_a_worker_without_a_checkpoint_ends_in_words(tmp_path, caplog):
  # Before: "[worker:1] Done: step 100, checkpoint None", a Python None in a user's line.
  backend = Numbers(tmp_path / "worker")
  backend.step = 100
  control = driver.Control(_config(tmp_path / "worker"), backend, 2, False, None)
  caplog.set_level("INFO")
  assert control.finish() == 100
  assert "Done: step 100 (the chief saves the checkpoints)" in caplog.text
  assert "None" not in caplog.text
