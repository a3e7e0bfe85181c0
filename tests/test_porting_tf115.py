"""The TF1 side recorded on the TensorFlow teams' TF1 code runs on: TensorFlow 1.15 under
Python 3.7, compared here. The record runs where TF115_PYTHON names such a Python (e.g. a
Python 3.7 venv with `tensorflow==1.15.5 "protobuf<3.21"`); elsewhere that test is skipped
with the reason. The cause it names is held here on machine lines alone."""

import os
import re
import shlex
import subprocess

import pytest

import porting
from porting import report as report_lib
from porting.causes import machines
from porting.diffs import Diff
from porting.trace import Step
from porting.trace import Trace
from tests import helpers

TF115 = os.environ.get("TF115_PYTHON")
THERE = ("AMD EPYC, 2 CPUs (avx2 fma), oneDNN off, TensorFlow 1.15.5, Keras not installed, "
         "no GPU")
HERE = "AMD EPYC, 2 CPUs (avx2 fma), oneDNN on, TensorFlow 2.21.0, Keras 3.15.1, no GPU"


class _Obs:
  """The observations other_runtime reads."""

  def __init__(self, recorded, here, rel):
    step = Step([], [], {}, 0.1, {}, {})
    self.tf1 = Trace([], [], [step], {"recorded": recorded})
    self.tf2 = Trace([], [], [step], {"machine": here})
    self.bad = self.early = [report_lib.Row(0, "gradient", "w", "w", Diff(rel, rel, 9))]
    self.start = 0

  def worst(self, rows):
    return max(r.diff.max_rel for r in rows)


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
  from porting import __main__ as cli  # pylint: disable=g-import-not-at-top
  from porting import devices  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(devices, "physical_devices", None)  # as an API 1.15 lacks
  try:
    devices.replica_devices(1)
  except TypeError as error:
    line = cli._where(error)  # pylint: disable=protected-access
  assert line.startswith("the kit failed: TypeError at porting/devices.py:"), line
  assert "not of the port" in line


@pytest.mark.skipif(not TF115, reason="TF115_PYTHON names no Python with TensorFlow 1.15")
def test_a_side_recorded_on_tensorflow_1_15_compares_here_with_the_version_named(tmp_path):
  folder = str(tmp_path / "record")
  # MIGRATION.md's command, as written there, with this checkout and a Python 3.7 of 1.15.
  with open(os.path.join(helpers.REPO, "MIGRATION.md"), encoding="utf-8") as f:
    section = f.read().split("**TensorFlow 1.15**")[1].split("\n## ")[0]
  (command,) = re.findall(r"```sh\n(.*?)\n```", section, re.DOTALL)
  words = shlex.split(command.replace("/tmp/port_record_115", folder))
  assert words[:3] == ["PYTHONPATH=/path/to/checkout", "python", "-m"], words
  env = dict(helpers.env(), PYTHONPATH=helpers.REPO)
  recorded = subprocess.run([TF115, *words[2:]], cwd=helpers.REPO, env=env,
                            capture_output=True, text=True, timeout=300)
  assert recorded.returncode == 0, recorded.stderr[-2000:]
  from tests import tf115_model  # pylint: disable=g-import-not-at-top
  report = porting.compare(tf115_model.port(), record=folder, steps=2)
  assert "TensorFlow 1.15.5" in report.tf1.facts["recorded"]
  assert ", oneDNN off," in report.tf1.facts["recorded"]  # 1.15's wheel: Eigen kernels
  # The cause holds only where every difference is of rounding size (its own signature);
  # the digits are the CPU's kernels' (measured on a 2-core AMD EPYC: losses the same bits,
  # the rest within 4.1e-07, 2.1e-07 with TF_ENABLE_ONEDNN_OPTS=0 here: MIGRATION.md).
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


@pytest.mark.skipif(not TF115, reason="TF115_PYTHON names no Python with TensorFlow 1.15")
def test_a_tf_contrib_fused_batch_norm_model_recorded_on_1_15_names_the_fused_kernel(tmp_path):
  folder = str(tmp_path / "record")
  env = dict(helpers.env(), PYTHONPATH=helpers.REPO)
  recorded = subprocess.run(
      [TF115, "-m", "porting", "record", "--port=tests.tf115_contrib_model:port",
       "--batches=tests.tf115_contrib_model:batches", "--replicas=2", "--steps=2", folder],
      cwd=helpers.REPO, env=env, capture_output=True, text=True, timeout=300)
  assert recorded.returncode == 0, recorded.stderr[-2000:]
  from tests import tf115_contrib_model as contrib  # pylint: disable=g-import-not-at-top
  report = porting.compare(contrib.port(), record=folder, steps=2)
  # 1.15 ran the script's epsilon 1e-5 as 1.001e-5 (the port sets that: no refusal); the
  # fused kernel's unbiased variance is the one cause named (its signature: step 0's forward
  # pass and gradients apart by rounding only, the dropout drawn alike); the measured sizes
  # (moving variance 7.8e-4, the rest under 1e-6 here) are in MIGRATION.md.
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
  monkeypatch.delenv("TF_DETERMINISTIC_OPS", raising=False)
  assert devices.replica_devices(2) == ["/gpu:0", "/gpu:1"]
  assert os.environ["TF_DETERMINISTIC_OPS"] == "1"
  monkeypatch.setattr(devices, "physical_devices", lambda kind: [] if kind == "GPU" else ["C"])
  assert devices.replica_devices(3) == ["/cpu:0", "/cpu:1", "/cpu:2"]  # a Session's CPUs
