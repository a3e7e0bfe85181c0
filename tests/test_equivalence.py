"""The product's promise: the TF2 trainer and the tf.compat.v1 towers compute the same thing.

Trainer against trainer the results are bit-identical (same kernels, same reduction order:
measured max |diff| exactly 0 for N = 1 to 7); against one device computing the whole batch
they agree to float32 summation order (see SINGLE_DEVICE_TOLERANCE).
"""

import numpy as np
import pytest

from cifar10 import model
from equivalence import cifar10_port
from equivalence import compare
from equivalence import report
from equivalence import runs
import porting
from tests import helpers

SEED = 4
PER_REPLICA = 8
# One device sums the whole batch in one blocked loop; towers sum their slices and the means
# are then averaged: float32 summation order (the bound and its measurements:
# equivalence.report).
SINGLE_DEVICE_TOLERANCE = report.SINGLE_DEVICE_TOLERANCE


@pytest.fixture(name="batches", scope="module")
def fixture_batches():
  return {n: runs.global_batch(SEED, PER_REPLICA * n) for n in (1, 2, 3, 4)}


def _assert_ok(rows):
  bad = [r for r in rows if not r.ok]
  assert not bad, compare.table("mismatch", bad, 0.0)


# 3: not a power of two, where dividing by N rounds (the step averages as the towers do).
@pytest.mark.parametrize("n", [1, 2, 3, 4])
@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_tower_gradients_are_bit_identical_to_mirrored_gradients(n, batches):
  images, labels = batches[n]
  v1_grads = runs.v1_gradients(n, SEED, images, labels)
  tf2_grads = runs.tf2_gradients(n, SEED, images, labels)
  assert list(v1_grads) == list(model.VARIABLE_NAMES)
  _assert_ok(compare.compare(v1_grads, tf2_grads))
  assert all(np.abs(g).max() > 0 for g in v1_grads.values())


# 3 and 4 in the slow tier: the fast tier holds them by the gradients above and the loops'
# ten steps at 4.
@pytest.mark.parametrize("n", [1, 2, pytest.param(3, marks=pytest.mark.slow),
                               pytest.param(4, marks=pytest.mark.slow)])
def test_the_porting_kit_finds_towers_and_replicas_bit_identical_step_by_step(n, batches):
  # This project's pair through the kit's public API, as a team's model would go.
  steps = [batches[n]] + cifar10_port.batches(SEED, PER_REPLICA * n, 3)[1:]
  kit = porting.compare(cifar10_port.port(SEED, decay_steps=2), steps, replicas=n, steps=3)
  assert kit.equal and not kit.hints, kit.text()
  assert {r.kind for r in kit.rows} == {"loss", "outputs", "gradient", "weight", "average"}
  assert all(r.diff.ulps == 0 for r in kit.rows)
  assert [name for name, _ in kit.pairs] == list(model.VARIABLE_NAMES)
  # The staircase decay crossed: 0.1, 0.1, then 0.01 on both sides.
  assert kit.learning_rates[0] == kit.learning_rates[1] and kit.learning_rates[0][2] < 0.02
  # The kit's TF1 side is compat_v1's real tower graph to the bit.
  images, labels = batches[n]
  v1_grads = runs.v1_gradients(n, SEED, images, labels)
  _assert_ok(compare.compare(v1_grads, kit.tf1.steps[0].gradients))
  assert all(np.abs(g).max() > 0 for g in v1_grads.values())


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_the_kit_names_the_ema_read_order_of_the_originals_graph():
  # The original's train op grouped the update and the EMA: in most runs the EMA read the
  # weights before the update. Ported with the EMA after the update, only the averages differ.
  kit = porting.compare(cifar10_port.port(SEED, decay_steps=2, ema_order="before_update"),
                        cifar10_port.batches(SEED, PER_REPLICA * 2, 2), replicas=2, steps=2)
  assert not kit.equal
  assert {r.kind for r in kit.rows if not r.diff.within(0)} == {"average"}
  assert [h.split(":")[0] for h in kit.hints] == [
      "the moving averages differ while the weights they average do not"]


@pytest.mark.slow  # the fast tier's N = 3: the gradients above and tests/test_losses.py
def test_at_three_replicas_the_tf2_idiom_rounds_and_the_kit_names_why():
  # sum(CE) / (N x B) + wd / N, summed over replicas (what strategies' step did before): N x B
  # and N are exact divisors only for powers of two. The same pair averaging as the towers do
  # is bit-identical (the test above, n = 3).
  kit = porting.compare(cifar10_port.port(SEED, decay_steps=2, gradient_reduction="sum"),
                        cifar10_port.batches(SEED, PER_REPLICA * 3, 2), replicas=3, steps=2)
  assert not kit.equal
  assert {r.kind for r in kit.rows if not r.diff.within(0)} >= {"gradient", "weight"}
  assert max(r.diff.max_rel for r in kit.rows) < 1e-5
  # And that the moving averages are apart only as their weights are (the EMA is the same).
  assert [h.split(":")[0] for h in kit.hints] == ["N = 3 is not a power of two",
                                                 "the moving averages follow the weights"]
  assert "gradient_reduction='mean'" in kit.hints[0]


@pytest.mark.parametrize("n", [2, 4])
def test_towers_match_one_device_to_summation_order(n, batches):
  images, labels = batches[n]
  rows = compare.compare(runs.single_device_gradients(SEED, images, labels),
                         runs.v1_gradients(n, SEED, images, labels), SINGLE_DEVICE_TOLERANCE)
  _assert_ok(rows)
  # Not trivially equal either: the orders really differ somewhere.
  assert any(r.max_abs > 0 for r in rows)


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_ten_steps_across_two_decays_give_identical_weights_ema_and_lr():
  a = runs.v1_train(4, SEED, steps=10, per_replica_batch=PER_REPLICA, decay_steps=4)
  b = runs.tf2_train(4, SEED, steps=10, per_replica_batch=PER_REPLICA, decay_steps=4)
  assert a.learning_rates == b.learning_rates
  # Decays after steps 3 and 7: 0.1 * 0.1 ** k, rounded as exponential_decay rounds it.
  np.testing.assert_allclose(a.learning_rates, [0.1] * 4 + [0.01] * 4 + [0.001] * 2, rtol=1e-6)
  assert a.global_step == b.global_step == 10
  assert len(a.variables) == 2 * len(model.VARIABLE_NAMES)
  _assert_ok(compare.compare(a.variables, b.variables))
  assert a.losses == b.losses  # the towers' loss, reported alike
  initial = model.initial_values(SEED)
  assert not np.array_equal(a.variables["conv1/weights"], initial["conv1/weights"])


@pytest.mark.slow
def test_the_command_at_five_replicas_prints_equivalent():
  # Five logical devices: more than this process has, so the command as a user runs it; not
  # a power of two, where the replicas' averaging is the towers' or rounds otherwise.
  result = helpers.run("equivalence", "--num_gpus=5", "--steps=2", "--decay_steps=1",
                       "--batch_size=2", fork=True)
  assert result.returncode == 0, result.stdout + result.stderr
  assert result.stdout.rstrip().endswith("\nEQUIVALENT")
  assert "TF1 5 tower(s) vs TF2 5 replica(s), 2 step(s)" in result.stdout
  from tfbits import machine  # pylint: disable=g-import-not-at-top
  # The kit's part in at most 100 columns, as its own command prints it (it was 163 wide).
  assert max(len(line) for line in result.stdout.splitlines()) <= 100, result.stdout
  assert f"  machine: {machine.describe().line()}" in result.stdout.replace("\n    ", " ")


@pytest.mark.slow
def test_the_report_of_the_command_passes_and_flags_a_difference():
  """`python -m equivalence --multi_worker` in-process: worker processes included."""
  text, ok = report.run(2, SEED, 3, PER_REPLICA, 2, SINGLE_DEVICE_TOLERANCE, multi_worker=True)
  assert ok, text
  assert "Weights and EMA after 3 steps" in text and "FAIL" not in text
  assert "MultiWorkerMirroredStrategy 2 workers x 1 replica" in text
  rows = compare.compare({"w": np.ones(3, np.float32)},
                         {"w": np.array([1, 1, 1 + 2 ** -23], np.float32)})
  assert not rows[0].ok and rows[0].max_abs == 2 ** -23


def test_the_comparison_is_the_kits_difference_and_nan_is_never_equal():
  """equivalence and porting had two differences that disagreed on NaN (equivalence called a
  NaN against the same NaN equal); there is one now, porting.diffs."""
  nan = np.array([1.0, np.nan], np.float32)
  rows = compare.compare({"w": nan, "v": np.ones(2, np.float32)},
                         {"w": nan.copy(), "v": np.ones(2, np.float32)})
  assert [r.ok for r in rows] == [False, True]
  rows = compare.compare({"w": np.array([np.inf], np.float32)},
                         {"w": np.array([np.inf], np.float32)}, rel_tolerance=1.0)
  assert not rows[0].ok
  rows = compare.compare({"w": np.array([2.0, 4.0], np.float32)},
                         {"w": np.array([2.0, 4.5], np.float32)}, rel_tolerance=0.125)
  assert rows[0].ok and rows[0].max_abs == 0.5 and rows[0].max_rel == 0.125
