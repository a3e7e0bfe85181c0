"""The Keras path: `fit` under MirroredStrategy is the custom loop, and keeps output names.

One `fit` step from the shared seed and stream must give the weights of one strategies.train
step with the same number of replicas; the two-output model's losses and metrics keep the
names of its outputs under the strategy; the binary resumes from its checkpoints.
"""

import h5py
import numpy as np
import pytest
import tensorflow as tf

from cifar10 import input_pipeline as ip
from cifar10 import schedule
from equivalence import runs
from strategies import devices as tf2_devices
from examples import keras_model
from tests import helpers


@pytest.mark.parametrize("replicas", [1, 2])
def test_fit_steps_equal_custom_loop_steps(replicas):
  # 3 steps across two learning-rate decays (decay_steps=1): the schedule is the same too.
  kwargs = dict(n=replicas, seed=5, steps=3, per_replica_batch=8, decay_steps=1)
  fit, loop = runs.keras_train(**kwargs), runs.tf2_train(**kwargs)
  assert fit.global_step == loop.global_step == 3
  np.testing.assert_allclose(fit.learning_rates, loop.learning_rates, rtol=0)
  assert fit.losses[0] == pytest.approx(loop.losses[0], rel=1e-6)
  # Measured: bit-identical. The forward pass is the same function; Keras's per-replica
  # mean(CE) / N and weight_decay / N differ from the trainer's sum(CE) / (B * N) only by
  # power-of-two scalings here (B = 8, N = 1, 2: exact in float32; other sizes may differ in
  # the last bit); both sum the replicas' gradients with the same
  # cross-device op; and Keras's SGD w + (-g * lr) rounds like ResourceApplyGradientDescent.
  for name, value in fit.variables.items():
    assert not np.array_equal(value, runs.model.initial_values(5)[name]), name
    np.testing.assert_array_equal(value, loop.variables[name], err_msg=name)


def test_two_outputs_keep_their_names_losses_and_weights():
  strategy = tf2_devices.get_strategy("mirrored", ["/cpu:0", "/cpu:1"])
  net = keras_model.build_two_outputs(strategy, seed=1, vehicle_weight=0.5)
  stream = ip.train_dataset(ip.synthetic_source(1), seed=1, global_batch_size=16)
  history = net.fit(stream.map(keras_model.two_output_targets), steps_per_epoch=2, epochs=1,
                    verbose=0, shuffle=False)
  assert sorted(history.history) == ["label_accuracy", "label_loss", "loss",
                                     "vehicle_accuracy", "vehicle_loss"]
  images, labels = next(iter(stream.map(keras_model.two_output_targets)))
  results = net.evaluate(images, labels, verbose=0, return_dict=True)
  # The total is the weighted sum of the named losses plus the shared weight decay.
  decay = float(runs.losses.weight_decay(net.body.params))
  assert results["loss"] == pytest.approx(
      results["label_loss"] + 0.5 * results["vehicle_loss"] + decay, rel=1e-5)
  vehicles = np.isin(labels["label"].numpy(), keras_model.VEHICLES)
  np.testing.assert_array_equal(labels["vehicle"].numpy(), vehicles.astype(np.int32))


@pytest.mark.slow
def test_the_binary_resumes_and_matches_strategies_train(tmp_path):
  common = ("--num_gpus=2", "--dataset=synthetic", "--seed=4", "--batch_size=8",
            "--save_checkpoint_steps=10", "--max_checkpoints_to_keep=2",
            "--save_summaries_steps=5")
  first = helpers.call("examples.keras_fit", *common, "--max_steps=20",
                      f"--train_dir={tmp_path / 'keras'}")
  assert first.returncode == 0, first.stderr[-3000:]
  second = helpers.call("examples.keras_fit", *common, "--max_steps=30",
                       f"--train_dir={tmp_path / 'keras'}")
  assert second.returncode == 0, second.stderr[-3000:]
  assert f"Resumed from {tmp_path}/keras/keras-0002.weights.h5 at step 20" in second.stderr
  assert sorted(p.name for p in (tmp_path / "keras").glob("*.h5")) == [
      "keras-0002.weights.h5", "keras-0003.weights.h5"]
  # The TensorBoard callback: the loss every --save_summaries_steps steps, in both runs.
  steps = sorted(event.step for path in (tmp_path / "keras").glob("train/events.out.*")
                 for event in tf.compat.v1.train.summary_iterator(str(path))
                 for value in event.summary.value if value.tag == "batch_loss")
  assert steps == [5, 10, 15, 20, 25, 30]  # the resumed run goes on from step 20
  # The custom loop of strategies.train, in-process: the same 30 steps without a restart.
  loop = runs.tf2_train(n=2, seed=4, steps=30, per_replica_batch=8,
                        decay_steps=schedule.decay_steps(8, 2, False))
  with h5py.File(tmp_path / "keras" / "keras-0003.weights.h5", "r") as f:
    # Keras stores the model's variables in creation order: cifar10.model.VARIABLE_NAMES.
    for i, name in enumerate(runs.model.VARIABLE_NAMES):
      np.testing.assert_array_equal(f[f"vars/{i}"][()], loop.variables[name], err_msg=name)


def test_keras_fit_refuses_what_it_cannot_do(tmp_path):
  result = helpers.call("examples.keras_fit", "--dataset=synthetic", "--max_steps=25",
                       "--save_checkpoint_steps=10", f"--train_dir={tmp_path}")
  assert result.returncode == 2
  assert helpers.error_line(result) == (
      "error: --max_steps=25 must be a multiple of --save_checkpoint_steps=10 (an epoch of "
      "keras_fit is that many steps)")
