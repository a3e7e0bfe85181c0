"""The TF1 side recorded on the TensorFlow teams' TF1 code runs on: TensorFlow 1.15 under
Python 3.7, compared here. The record runs where TF115_PYTHON names such a Python (e.g. a
Python 3.7 venv with `tensorflow==1.15.5 "protobuf<3.21"`); elsewhere that test is skipped
with the reason. The cause it names is held here on machine lines alone."""

import os
import re
import shlex
import shutil
import subprocess

import pytest

import porting
from porting import diagnosis
from porting import report as report_lib
from porting.causes import machines
from porting.diffs import Diff
from porting.trace import Step
from porting.trace import Trace
from tests import helpers

TF115 = os.environ.get("TF115_PYTHON")
THERE = ("AMD EPYC, 2 CPUs (avx2 fma), oneDNN off, TensorFlow 1.15.5, Keras 2.2.4-tf "
         "(tf.keras), no GPU")
HERE = "AMD EPYC, 2 CPUs (avx2 fma), oneDNN on, TensorFlow 2.21.0, Keras 3.15.1, no GPU"


class _Obs:
  """The observations other_runtime reads."""

  def __init__(self, recorded, here, rel):
    step = Step([], [], {}, 0.1, {}, {})
    self.tf1 = Trace([], [], [step], {"recorded": recorded})
    self.tf2 = Trace([], [], [step], {"machine": here})
    self.bad = self.early = [report_lib.Row(0, "gradient", "w", "w", Diff(rel, rel, 9))]
    self.start = 0

  largest = 1.0  # step 0's largest gradient
  vanishing = frozenset()
  bound = 1e-5  # float32's rounding (porting.precision)
  rounding = diagnosis.Observations.rounding
  _noise = diagnosis.Observations._noise  # pylint: disable=protected-access
  noise_note = diagnosis.Observations.noise_note
  worst = diagnosis.Observations.worst


def test_a_record_from_tensorflow_1_15_is_named_with_the_advice_that_applies():
  (line,) = machines.other_runtime(_Obs(THERE, HERE, 4.1e-7))
  assert line == (
      "the TF1 side was recorded elsewhere: TensorFlow 1.15.5 there, 2.21.0 here; "
      "TensorFlow's own (Eigen) kernels there, oneDNN's kernels here: other kernels round "
      "otherwise, and every difference of steps 0-1 is of rounding size (up to 4.1e-07 "
      "relative); TF_ENABLE_ONEDNN_OPTS=0 on this side runs TensorFlow's own kernels here "
      "too, which the record's side ran; compare with a tolerance of that size")


def test_a_difference_beyond_rounding_is_the_ports_not_the_runtimes():
  assert machines.other_runtime(_Obs(THERE, HERE, 0.3)) == []
  assert machines.other_runtime(_Obs(HERE, HERE, 4e-7)) == []


def test_a_fault_in_the_kits_own_code_is_the_kits_not_the_ports(monkeypatch):
  from porting import errors  # pylint: disable=g-import-not-at-top
  from porting import devices  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(devices, "physical_devices", None)  # as an API 1.15 lacks
  try:
    devices.replica_devices(1)
  except TypeError as error:
    line = errors.one_line(error)
  assert line.startswith("the kit failed: TypeError at porting/devices.py:"), line
  assert "not of the port" in line


NO_TF115 = "TF115_PYTHON names no Python with TensorFlow 1.15"


def _env(**more):
  """The environment of a shell where 1.15 runs: importing TensorFlow 2 here set
  TF2_BEHAVIOR=1 in this process's, which would turn 1.15 to its TF 2 behavior (shapes of ints,
  eager) under the tower code that was written for TF 1."""
  env = dict(helpers.env(), **more)
  env.pop("TF2_BEHAVIOR", None)
  return env


def _commands():
  """MIGRATION.md's two commands for 1.15, as written there: the install, the record."""
  with open(os.path.join(helpers.REPO, "MIGRATION.md"), encoding="utf-8") as f:
    section = f.read().split("**TensorFlow 1.15**")[1].split("\n## ")[0]
  (block,) = re.findall(r"```sh\n(.*?)\n```", section, re.DOTALL)
  install, record = block.split("\n")
  return install, record


@pytest.fixture(scope="module")
def recorder(tmp_path_factory):
  """The recorder installed by MIGRATION.md's command into a folder of its own (--target:
  the named Python's environment is left as it is)."""
  install, _ = _commands()
  where, command = install.split(" && ")
  assert where == "cd /path/to/checkout", install
  target = str(tmp_path_factory.mktemp("recorder"))
  words = shlex.split(command)
  assert words[:5] == ["python", "-m", "pip", "install", "./recorder"], words
  with helpers.recorder_build_lock():
    done = subprocess.run([TF115, *words[1:], "--target", target], cwd=helpers.REPO,
                          env=_env(), capture_output=True, text=True, timeout=300)
  assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
  assert os.path.isfile(os.path.join(target, "porting", "record.py"))
  return target


def _record(recorder, tmp_path, modules, port, **env):
  """MIGRATION.md's record command, run by the 1.15 Python from a folder of the team's code
  (copies of `modules` from tests/) with the installed recorder: nothing of this checkout on
  its path."""
  code = tmp_path / "code"
  (code / "tests").mkdir(parents=True)
  (code / "tests" / "__init__.py").write_text("")
  for name in modules:
    shutil.copy(os.path.join(helpers.REPO, "tests", name + ".py"), code / "tests")
  folder = str(tmp_path / "record")
  _, command = _commands()
  where, command = command.split(" && ")
  assert where == "cd /path/to/your/code", command
  words = shlex.split(command.replace("/tmp/port_record_115", folder)
                      .replace("your_port", "tests." + port))
  assert words[:4] == ["python", "-m", "porting", "record"], words
  recorded = subprocess.run([TF115, *words[1:]], cwd=str(code),
                            env=_env(PYTHONPATH=recorder, **env),
                            capture_output=True, text=True, timeout=300)
  assert recorded.returncode == 0, recorded.stderr[-2000:]
  return folder


@pytest.mark.skipif(not TF115, reason=NO_TF115)
def test_the_installed_recorder_answers_help_on_1_15(recorder, tmp_path):
  done = subprocess.run([TF115, "-m", "porting", "record", "--help"], cwd=str(tmp_path),
                        env=_env(PYTHONPATH=recorder), capture_output=True,
                        text=True, timeout=120)
  assert done.returncode == 0, done.stderr[-2000:]
  assert "--port" in done.stdout and "--batches" in done.stdout


@pytest.mark.skipif(not TF115, reason=NO_TF115)
def test_a_side_recorded_on_tensorflow_1_15_compares_here_with_the_version_named(
    recorder, tmp_path):
  folder = _record(recorder, tmp_path, ["tf115_model"], "tf115_model")
  from tests import tf115_model  # pylint: disable=g-import-not-at-top
  report = porting.compare(tf115_model.port(), record=folder, steps=2)
  assert "TensorFlow 1.15.5" in report.tf1.facts["recorded"]
  assert ", oneDNN off," in report.tf1.facts["recorded"]  # 1.15's wheel: Eigen kernels
  # The cause holds only where every difference is of rounding size (its own signature);
  # the digits are the CPU's kernels' (measured on a 2-core AMD EPYC: losses the same bits,
  # the rest within 2.9e-07, 2.2e-07 with TF_ENABLE_ONEDNN_OPTS=0 here: MIGRATION.md).
  if report.equal:  # kernels that round alike across the versions: nothing to name
    assert report.hints == []
    return
  (cause,) = report.hints
  assert cause.startswith("the TF1 side was recorded elsewhere: TensorFlow 1.15.5 there")


def test_the_raised_fused_epsilon_of_tensorflow_1_says_why_and_what_to_set():
  from porting import layer_mismatches  # pylint: disable=g-import-not-at-top
  from porting import layer_settings  # pylint: disable=g-import-not-at-top
  tf1 = layer_settings.Settings([], [layer_settings.BatchNorm("tower_0/bn", 1.001e-5, True)], {})
  tf2 = layer_settings.Settings([], [layer_settings.BatchNorm("bn", 1e-5, True)], {})
  (line,) = layer_mismatches.mismatches(tf1, tf2, [])
  assert line == (
      "batch norm bn: epsilon TF1 1.001e-05, TF2 1e-05 (TensorFlow 1.x's fused batch norm "
      "raises an epsilon below 1.001e-05 to 1.001e-05, so the TF1 side ran with 1.001e-05 "
      "whatever its code says: set the port's epsilon to 1.001e-05)")


@pytest.mark.skipif(not TF115, reason=NO_TF115)
def test_a_tf_contrib_fused_batch_norm_model_recorded_on_1_15_names_the_fused_kernel(
    recorder, tmp_path):
  folder = _record(recorder, tmp_path, ["tf115_model", "tf115_contrib_model"],
                   "tf115_contrib_model")
  from tests import tf115_contrib_model as contrib  # pylint: disable=g-import-not-at-top
  report = porting.compare(contrib.port(), record=folder, steps=2)
  # 1.15 ran the script's epsilon 1e-5 as 1.001e-5 (the port sets that: no refusal); the
  # fused kernel's unbiased variance is the one cause named (its signature: step 0's forward
  # pass and gradients apart by rounding only, the dropout drawn alike); the measured sizes
  # (moving variance 7.0e-4, the rest under 1e-6 here) are in MIGRATION.md.
  (cause,) = report.hints
  assert cause.startswith("TF1's batch norm is fused"), cause
  moving = [r for r in report.rows if "moving_variance" in r.tf1]
  assert moving and not all(r.diff.within(0) for r in moving)  # n/(n-1): not rounding


def test_on_tensorflow_1_gpus_get_deterministic_kernels_by_its_environment(monkeypatch):
  # 1.x has no enable_op_determinism (nor TensorFloat-32): TF_DETERMINISTIC_OPS, read when
  # its kernels are built. The GPU listing is faked at the boundary.
  from porting import devices  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(devices, "TF1", True)
  monkeypatch.setattr(devices, "physical_devices",
                      lambda kind: ["GPU:0", "GPU:1"] if kind == "GPU" else ["CPU:0"])
  # Set, then removed: pytest's delenv of an absent variable records nothing to restore, and
  # the value replica_devices sets below outlived the test (tests/conftest.py).
  monkeypatch.setenv("TF_DETERMINISTIC_OPS", "")
  monkeypatch.delenv("TF_DETERMINISTIC_OPS")
  assert devices.replica_devices(2) == ["/gpu:0", "/gpu:1"]
  assert os.environ["TF_DETERMINISTIC_OPS"] == "1"
  monkeypatch.setattr(devices, "physical_devices", lambda kind: [] if kind == "GPU" else ["C"])
  assert devices.replica_devices(3) == ["/cpu:0", "/cpu:1", "/cpu:2"]  # a Session's CPUs


TUTORIAL = os.environ.get("TF1_TUTORIAL_DIR")


@pytest.mark.skipif(not TF115 or not TUTORIAL,
                    reason="TF115_PYTHON and TF1_TUTORIAL_DIR (the TF1 tutorial's "
                           "tutorials/image/cifar10 folder, not carried here) name none")
def test_the_original_tutorials_own_tower_recorded_on_1_15_against_this_projects_pair(
    recorder, tmp_path, monkeypatch):
  folder = _record(recorder, tmp_path, ["tutorial_port"], "tutorial_port",
                   TF1_TUTORIAL_DIR=TUTORIAL)
  from tests import tutorial_port  # pylint: disable=g-import-not-at-top
  report = porting.compare(tutorial_port.port(), record=folder, steps=2)
  assert "TensorFlow 1.15.5" in report.tf1.facts["recorded"]
  losses = [r for r in report.rows if r.kind == "loss"]
  assert len(losses) == 4 and all(r.diff.ulps <= 1 for r in losses)
  kinds = {r.kind for r in report.rows}
  assert {"gradient", "weight", "average"} <= kinds
  # Every row within rounding of the kernels (measured: 1.7e-6 with oneDNN here, 1.0e-6
  # without; MIGRATION.md); the kit names the runtimes and the averages that follow their
  # weights, nothing of the port.
  if report.equal:  # kernels that round alike across the versions
    return
  assert all(r.diff.max_rel <= 1e-5 for r in report.rows), report.text()
  assert [h.split(":")[0] for h in report.hints] == [
      "the moving averages follow the weights", "the TF1 side was recorded elsewhere"]
  assert porting.compare(tutorial_port.port(), record=folder, steps=2,
                         tolerance=1e-5).equal


def test_a_bias_whose_gradient_is_rounding_noise_does_not_hide_the_runtime():
  """A 1.15 record of towers with a convolution's bias before a batch norm: that bias's
  gradient is 0 but for noise, 1.2 relative apart (6.6e-7 absolute, the largest gradient
  about 1), which kept the record's other TensorFlow from being named."""
  obs = _Obs(THERE, HERE, 4.1e-7)
  noise = report_lib.Row(0, "gradient", "tower_0/Variable_1", "net/conv1/bias",
                         Diff(6.6e-7, 1.2, 9))
  obs.bad = obs.early = obs.table = obs.bad + [noise]
  assert machines.other_runtime(obs) == []  # no variable excused: 1.2 is no rounding
  obs.vanishing = diagnosis.Observations.vanishing.func(obs)
  assert obs.vanishing == {"tower_0/Variable_1"}
  (line,) = machines.other_runtime(obs)
  assert "(up to 4.1e-07 relative; left out: tower_0/Variable_1, whose gradient is " \
      "within rounding of 0 on both sides" in line, line
  # Under a tolerance only the noise may be past it: said so, not "up to 0 relative".
  obs.bad = obs.early = obs.table = [noise]
  (line,) = machines.other_runtime(obs)
  assert "(none past the tolerance but noise; left out: tower_0/Variable_1" in line, line
  assert "up to 0 relative" not in line


def test_a_value_a_test_leaves_in_the_environment_is_taken_back():
  """What the GPU test above left (TF_DETERMINISTIC_OPS=1) reached every child process of
  its worker: tests/conftest.py takes each test's changes back."""
  from tests import conftest  # pylint: disable=g-import-not-at-top
  os.environ["PROBE_KEPT"] = "1"  # this test's own change: taken back by the same fixture
  with conftest.environment_kept():
    os.environ["PROBE_LEFT"] = "1"
    del os.environ["PROBE_KEPT"]
  assert "PROBE_LEFT" not in os.environ and os.environ["PROBE_KEPT"] == "1"
