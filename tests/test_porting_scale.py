"""A comparison's cost on a large model: rows taken as the steps run, variables read one at a
time, differences in cache-sized blocks. Before, a 20M-parameter model kept every step of
both sides (5 GB, 20-48 s for 3 steps, two thirds of it the report's differences)."""

import numpy as np
import pytest

import porting
from benchmarks import porting_scale
from porting import diffs
from porting.trace import Lazy
from tests import dropout_adam_port as m

pytestmark = pytest.mark.filterwarnings("ignore:`tf.layers.")


def _slow_diff(a, b):
  """diff() by its general path (the one NaNs take), for reference."""
  a = np.concatenate([np.ravel(a), [np.nan]]).astype(a.dtype)
  b = np.concatenate([np.ravel(b), [np.nan]]).astype(b.dtype)
  return diffs.diff(a, b)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_the_fast_difference_is_the_general_ones_to_the_last_digit(dtype):
  rng = np.random.default_rng(1)
  a = rng.normal(size=300_000).astype(dtype)
  b = (a * dtype(1.001)).astype(dtype)
  # Signed zeros, subnormals either side of zero, an infinity, a sign flip.
  tiny = np.finfo(dtype).smallest_subnormal
  a[:6] = [0.0, -0.0, tiny, -tiny, np.inf, -3.0]
  b[:6] = [-0.0, tiny, -tiny, 0.0, np.inf, 3.0]
  fast = diffs.diff(a, b)
  assert fast == _slow_diff(a, b)
  assert diffs.diff(a[:4], b[:4]).ulps == 2  # -tiny to tiny: through both zeros, 2 steps
  assert diffs.diff(a[:1], b[:1]) == diffs.Diff(0.0, 0.0, 0)  # 0.0 and -0.0 are equal
  assert diffs.diff(a, a.copy()) == diffs.Diff(0.0, 0.0, 0, nonfinite=True)  # the infinity


def test_equal_infinities_are_no_difference():
  # Before, inf - inf = NaN was read as an infinite difference between equal values.
  inf = np.array([np.inf, -np.inf, 1.0], np.float32)
  # (Still never "equal": a value that is not finite proves nothing; test_porting_hostile.)
  assert diffs.diff(inf, inf.copy()) == diffs.Diff(0.0, 0.0, 0, nonfinite=True)
  assert diffs.diff(inf, np.array([np.inf, -np.inf, 2.0], np.float32)).max_abs == 1.0
  with_nan = np.array([np.inf, np.nan], np.float32)  # the general path, NaNs and all
  assert diffs.diff(with_nan, np.array([np.inf, np.nan], np.float32)).max_abs == 0.0


def test_a_steps_values_read_after_the_next_step_are_refused():
  moved = [False]
  values = Lazy(["w"], lambda key: 1.0, stale=lambda: moved[0])
  assert values["w"] == 1.0 and list(values) == ["w"] and "w" in values
  moved[0] = True
  with pytest.raises(RuntimeError, match="w read after the next step ran"):
    values["w"]  # pylint: disable=pointless-statement


def test_a_report_keeps_step_0s_gradients_and_no_weights():
  report = porting.compare(m.port(), m.batches(1, steps=2), replicas=1, steps=2)
  assert report.equal
  first, second = report.tf1.steps
  assert set(first.gradients) == set(report.tf1.trainable) and second.gradients == {}
  assert first.weights == second.weights == {} and second.slots == {}
  assert len([r for r in report.rows if r.kind == "weight"]) == 2 * 6  # compared all the same


@pytest.mark.slow
def test_the_scale_benchmark_measures_a_comparison():
  result = porting_scale.measure(hidden=16, steps=2, optimizer="tf1adam")
  assert result["parameters"] == porting_scale.parameters(16) == (
      3 * 3 * 3 * 64 + 64 + 3 * 3 * 64 * 128 + 128 + 3 * 3 * 128 * 256 + 256 +
      4 * 4 * 256 * 16 + 16 + 16 * 16 + 16 + 16 * 10 + 10)
  assert result["equal"] is True
  assert result["peak_mb"] >= 0 and result["steps_s"] > 0 and result["report_s"] > 0
