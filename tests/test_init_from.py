"""--init_from in every mode, by construction: harness.control.driver decides resume or --init_from
for all five loops, so each starts from another run's checkpoint the same way.

The reference is a TF2 one-device run of 3 steps on the classic .bin files that saved after
every step. Each mode starts from its ckpt-2 and runs to step 3: its step-3 weights, moving
averages and step must be the reference's ckpt-3, bit for bit (N = 1 everywhere; at N = 1 the
towers, the Keras path and a ps/worker job with one worker are the one-device run). Before
the driver, the v1 ps/worker job ignored --init_from and trained from the seed. The
parameter-server job starts from another run's checkpoint in
tests/test_parameter_server.py, where its one worker follows the one-device run for 6 steps.
"""

import glob

import numpy as np
import pytest

from cifar10 import checkpoints
from cifar10 import config
from tests import helpers


@pytest.fixture(scope="module")
def data(tmp_path_factory):
  folder = str(tmp_path_factory.mktemp("init_from_data"))
  helpers.write_bin_dataset(folder, seed=2, train_per_file=40, num_test=8)
  return folder


@pytest.fixture(scope="module")
def reference(tmp_path_factory, data):
  root = tmp_path_factory.mktemp("init_from_reference")
  run = config.TrainConfig(train_dir=str(root / "run"), dataset="cifar10_bin", data_dir=data,
                           batch_size=8, seed=2, max_steps=3, save_checkpoint_steps=1)
  assert helpers.train_tf2(run) == 3
  return str(root / "run" / "ckpt-2"), checkpoints.read(str(root / "run" / "ckpt-3"))


def _assert_ran_only_step_2(folder, tag="loss", step=2):
  """A run that ignored --init_from would train steps 0-2 from the seed to the same bits as
  the reference; its summaries, written at every step, tell which steps ran."""
  assert helpers.summary_steps(folder)[tag] == [step]


def _assert_is_step_3_of(reference_state, train_dir):
  state = checkpoints.read(str(train_dir))
  assert state.global_step == 3
  for name, value in reference_state.weights.items():
    np.testing.assert_array_equal(state.weights[name], value, err_msg=name)
    np.testing.assert_array_equal(state.averages[name], reference_state.averages[name],
                                  err_msg=name)


def _config(tmp_path, init_from, data):
  return config.TrainConfig(train_dir=str(tmp_path), dataset="cifar10_bin", data_dir=data,
                            batch_size=8, seed=2, max_steps=3, save_summaries_steps=1,
                            init_from=init_from)


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_tf2_towers_and_keras_start_from_another_runs_checkpoint(reference, data, tmp_path):
  from examples import keras_loop  # pylint: disable=g-import-not-at-top
  from strategies import devices  # pylint: disable=g-import-not-at-top
  init_from, step3 = reference
  assert helpers.train_tf2(_config(tmp_path / "tf2", init_from, data)) == 3
  _assert_is_step_3_of(step3, tmp_path / "tf2")
  _assert_ran_only_step_2(tmp_path / "tf2")
  assert helpers.train_v1(_config(tmp_path / "v1", init_from, data)) == 3
  _assert_is_step_3_of(step3, tmp_path / "v1")
  _assert_ran_only_step_2(tmp_path / "v1")
  strategy = devices.get_strategy("one_device", ["/cpu:0"])
  assert keras_loop.fit(_config(tmp_path / "keras", init_from, data), strategy) == 3
  _assert_is_step_3_of(step3, tmp_path / "keras")
  # Keras's callback numbers a batch's summary by the step after it.
  _assert_ran_only_step_2(tmp_path / "keras" / "train", "batch_loss", 3)


@pytest.mark.slow
def test_the_v1_ps_worker_job_starts_from_another_runs_checkpoint(reference, data, tmp_path):
  init_from, step3 = reference
  result = helpers.run("compat_v1.launch", "--workers=1", "--ps=1", "--timeout_secs=200", "--",
                       "--dataset=cifar10_bin", f"--data_dir={data}", "--batch_size=8",
                       "--seed=2", "--max_steps=3", "--save_summaries_steps=1",
                       f"--init_from={init_from}",
                       f"--train_dir={tmp_path}")
  assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
  assert "[ps:0]" in result.stdout and "worker:0 done at global step 3" in result.stdout
  assert f"Initialized from {init_from} at step 2" in result.stdout + result.stderr
  _assert_is_step_3_of(step3, tmp_path)
  _assert_ran_only_step_2(tmp_path)
  # The 200 training images reach the worker through a feed, not as graph constants (which
  # went into every .meta and into the graph each worker sends to its master).
  metas = glob.glob(f"{tmp_path}/model.ckpt-*.meta")
  assert metas and not [s for s in helpers.constant_shapes(metas[0]) if s[:1] == (200,)]
