"""--profile_steps=A,B writes a TensorBoard profile of those steps, in both trainers."""

import glob

import pytest

from benchmarks import profile_ops
from cifar10 import config
from cifar10.errors import UsageError
from harness.control import profiling
from harness.control import cadence
from tests import helpers

FLAGS = ("--dataset=synthetic", "--batch_size=4", "--max_steps=4")


@pytest.mark.parametrize("trainer", ["strategies.train", "compat_v1.train"])
@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_a_profile_of_the_steps_asked_for_is_written(trainer, tmp_path):
  result = helpers.call(trainer, *FLAGS, "--profile_steps=1,2", f"--train_dir={tmp_path}")
  assert result.returncode == 0, result.stderr[-2000:]
  assert "Profiling steps 1..2" in result.stderr
  profiles = glob.glob(f"{tmp_path}/plugins/profile/*/*.xplane.pb")
  assert len(profiles) == 1, profiles
  # Exactly steps 1 and 2 are in it, with the model's kernels and nothing between the
  # steps that takes longer than a step.
  profile = profile_ops.read(str(tmp_path))
  assert profile.steps == 2
  assert any("Conv2D" in kind for kind in profile.op_ms), sorted(profile.op_ms)
  assert profile.op_ms["LRN"] > 0 and profile.op_ms["LRNGrad"] > 0
  assert len(profile.gap_ms) == 1 and 0 <= profile.gap_ms[0] < profile.step_ms[1]
  table = profile_ops.table({"run": profile})
  assert table[1].split() == ["steps", "profiled", "2"]


def test_reading_a_train_dir_without_a_profile_is_one_line(tmp_path):
  result = helpers.call("benchmarks.profile_ops", str(tmp_path))
  helpers.check_one_line(result, f"error: no profile under {tmp_path}/plugins/profile; run the "
                         "trainer with --profile_steps=A,B first")
  # And its --help is its own, exit 0 (it printed its usage with exit 2).
  result = helpers.run("benchmarks.profile_ops", "--help")
  assert result.returncode == 0 and "python -m benchmarks.profile_ops" in result.stdout


def test_with_steps_per_loop_the_profile_starts_and_ends_between_calls():
  run = config.TrainConfig(train_dir="x", max_steps=100, log_frequency=50,
                           save_summaries_steps=50, profile_steps=(7, 12))
  assert cadence.call_length(1, run, 10) == 6    # 1..6, then the profile starts at 7
  assert cadence.call_length(7, run, 10) == 6    # 7..12, and it stops after 12
  assert cadence.call_length(13, run, 10) == 10


@pytest.mark.parametrize("value,message", [
    ("5", "--profile_steps must be two step numbers A,B, got '5'"),
    ("a,b", "--profile_steps must be two step numbers A,B"),
])
def test_a_malformed_window_is_one_line(value, message):
  with pytest.raises(UsageError, match=message):
    profiling.parse(value)


def test_a_window_backwards_or_past_the_end_is_refused():
  with pytest.raises(UsageError, match="--profile_steps must be A,B with 0 <= A <= B"):
    config.TrainConfig(train_dir="x", profile_steps=(3, 2))
  # Before: accepted, and nothing profiled, silently.
  with pytest.raises(UsageError, match=r"--profile_steps=10,12 starts after the last step "
                                       r"\(0-based 9 of --max_steps=10\)"):
    config.TrainConfig(train_dir="x", max_steps=10, profile_steps=(10, 12))
  assert config.TrainConfig(train_dir="x", max_steps=10, profile_steps=(9, 12)).profile_steps
