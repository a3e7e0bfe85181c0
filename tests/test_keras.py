"""The Keras path: `fit` under MirroredStrategy is the custom loop, and keeps output names.

One `fit` step from the shared seed and stream must give the weights of one strategies.train
step with the same number of replicas; the two-output model's losses and metrics keep the
names of its outputs under the strategy; the binary resumes from its checkpoints.
"""

import dataclasses
import re

import numpy as np
import pytest
import tensorflow as tf

from cifar10 import data_sources as sources
from cifar10 import input_pipeline as ip
from harness.control import run_errors
from equivalence import runs
from strategies import devices as tf2_devices
from examples import keras_model
from tests import helpers


def _keras_train(n, seed, steps, per_replica_batch, decay_steps):
  """`steps` steps of Keras `fit` (examples.keras_model) under MirroredStrategy, as
  equivalence.runs.RunResult (beside runs.tf2_train).

  No EMA (Keras keeps none); the losses are fit's per-step loss, the running mean of the
  epoch, so only the first equals the trainers' loss of that step.
  """
  strategy = tf2_devices.get_strategy("mirrored", [f"/cpu:{i}" for i in range(n)])
  net = keras_model.build(strategy, seed=seed, decay_steps=decay_steps)
  stream = ip.train_dataset(sources.synthetic_source(seed), seed=seed,
                            global_batch_size=per_replica_batch * n)
  lrs = []  # the rate of each step, read before the step (at the optimizer's step count)
  record = keras_model.keras.callbacks.LambdaCallback(
      on_train_batch_begin=lambda *_, **__: lrs.append(float(net.optimizer.learning_rate)))
  history = net.fit(stream, steps_per_epoch=1, epochs=steps, verbose=0, callbacks=[record],
                    shuffle=False)
  return runs.RunResult({name: v.numpy() for name, v in net.params.items()}, lrs,
                        history.history["loss"], int(net.optimizer.iterations.numpy()))


@pytest.mark.parametrize("replicas", [1, 2])
@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_fit_steps_equal_custom_loop_steps(replicas):
  # 3 steps across two learning-rate decays (decay_steps=1): the schedule is the same too.
  kwargs = dict(n=replicas, seed=5, steps=3, per_replica_batch=8, decay_steps=1)
  fit, loop = _keras_train(**kwargs), runs.tf2_train(**kwargs)
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


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_the_two_output_example_writes_one_plain_line_per_epoch_where_no_terminal_is():
  # Before: Keras's progress bar, redrawn at every step with colour codes and backspaces,
  # made `... > log` one long line of escapes.
  result = helpers.call("examples.keras_two_outputs", "--num_gpus=2", "--dataset=synthetic",
                        "--steps=3", "--batch_size=4")
  assert result.returncode == 0, result.stderr[-2000:]
  assert "\x1b" not in result.stdout and "\b" not in result.stdout, result.stdout[:300]
  assert re.fullmatch(r"3/3 - \d+s - \d+(?:us|ms|s)/step - label_accuracy: .*\n", result.stdout), \
      result.stdout[:300]


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_two_outputs_keep_their_names_losses_and_weights():
  strategy = tf2_devices.get_strategy("mirrored", ["/cpu:0", "/cpu:1"])
  net = keras_model.build_two_outputs(strategy, seed=1, vehicle_weight=0.5)
  stream = ip.train_dataset(sources.synthetic_source(1), seed=1, global_batch_size=16)
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


def _tensors(train_dir):
  """Every value of the newest checkpoint; not tf.train.Checkpoint's count of the saves this
  process made (bookkeeping: an interrupted run made more saves than an uninterrupted one)."""
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(train_dir)))
  return {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map()
          if k not in ("_CHECKPOINTABLE_OBJECT_GRAPH", "save_counter/.ATTRIBUTES/VARIABLE_VALUE")}


@pytest.mark.slow
def test_the_binary_resumes_and_writes_the_checkpoints_of_strategies_train(tmp_path):
  # Any --max_steps (13, then 23: the last epochs are shorter), the moving averages, the
  # global step: the checkpoint is strategies.train's, tensor for tensor, to the bit.
  common = ("--num_gpus=2", "--dataset=synthetic", "--seed=4", "--batch_size=8",
            "--save_checkpoint_steps=10", "--max_checkpoints_to_keep=2",
            "--save_summaries_steps=5")
  first = helpers.call("examples.keras_fit", *common, "--max_steps=13",
                       f"--train_dir={tmp_path / 'keras'}")
  assert first.returncode == 0, first.stderr[-3000:]
  second = helpers.call("examples.keras_fit", *common, "--max_steps=23",
                        f"--train_dir={tmp_path / 'keras'}")
  assert second.returncode == 0, second.stderr[-3000:]
  assert f"Resumed from {tmp_path}/keras/ckpt-13 at step 13" in second.stderr
  assert sorted(p.name for p in (tmp_path / "keras").glob("*.index")) == [
      "ckpt-20.index", "ckpt-23.index"]
  # The TensorBoard callback: the loss every --save_summaries_steps steps, in both runs.
  assert sorted(helpers.summary_steps(tmp_path / "keras" / "train")["batch_loss"]) == [
      5, 10, 15, 20]  # the resumed run goes on from step 13
  tf2 = helpers.call("strategies.train", *common, "--max_steps=23",
                     f"--train_dir={tmp_path / 'tf2'}")
  assert tf2.returncode == 0, tf2.stderr[-3000:]
  keras_ckpt, tf2_ckpt = _tensors(tmp_path / "keras"), _tensors(tmp_path / "tf2")
  # All but the trainer's loss averages: fit charts no summaries of the original's.
  loss_averages = {k for k in tf2_ckpt if k.startswith("loss_averages/")}
  assert len(loss_averages) == 4 and keras_ckpt.keys() == tf2_ckpt.keys() - loss_averages
  assert any(k.startswith("ema/") for k in keras_ckpt) and int(keras_ckpt[
      "global_step/.ATTRIBUTES/VARIABLE_VALUE"]) == 23
  for key, value in keras_ckpt.items():
    np.testing.assert_array_equal(value, tf2_ckpt[key], err_msg=key)
  # Both evaluators score it (the moving averages), and the v1 trainer starts from it.
  for evaluator in ("strategies.eval", "compat_v1.eval"):
    scored = helpers.call(evaluator, "--dataset=synthetic", "--seed=4", "--run_once",
                          "--num_examples=16", f"--checkpoint_dir={tmp_path / 'keras'}",
                          f"--eval_dir={tmp_path / evaluator}")
    assert scored.returncode == 0, scored.stderr[-2000:]
    assert scored.stdout.startswith("step 23: precision @ 1 = ")
    assert scored.stdout.endswith(f"(16 examples, {tmp_path}/keras/ckpt-23)\n")
  v1 = helpers.call("compat_v1.train", "--dataset=synthetic", "--seed=4", "--batch_size=8",
                    "--max_steps=24", f"--init_from={tmp_path / 'keras'}",
                    f"--train_dir={tmp_path / 'v1'}")
  assert v1.returncode == 0, v1.stderr[-2000:]
  assert re.search(rf"Initialized from {tmp_path}/keras\S* at step 23", v1.stderr), v1.stderr


@pytest.mark.slow
def test_sigterm_saves_and_the_restart_ends_with_the_uninterrupted_bits(tmp_path):
  import os  # pylint: disable=g-import-not-at-top
  import signal  # pylint: disable=g-import-not-at-top
  import keras  # pylint: disable=g-import-not-at-top
  from cifar10 import config  # pylint: disable=g-import-not-at-top
  from examples import keras_loop  # pylint: disable=g-import-not-at-top

  class Preempt(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
      if int(self.model.optimizer.iterations.numpy()) == 3:
        os.kill(os.getpid(), signal.SIGTERM)

  strategy = tf2_devices.get_strategy("one_device", ["/cpu:0"])
  run = config.TrainConfig(train_dir=str(tmp_path / "k"), dataset="synthetic", batch_size=4,
                           max_steps=7, save_checkpoint_steps=100)
  previous = signal.getsignal(signal.SIGTERM)
  try:
    with pytest.raises(run_errors.Stopped) as stopped:
      keras_loop.fit(run, strategy, callbacks=[Preempt()])
  finally:
    signal.signal(signal.SIGTERM, previous)
  # The signal lands after step 3's callbacks ran: step 4 is the one that stops and saves.
  assert stopped.value.status == 143
  assert str(stopped.value) == (f"SIGTERM after step 4; saved {tmp_path}/k/ckpt-4; run the "
                                "same command again to continue")
  assert keras_loop.fit(run, strategy) == 7
  uninterrupted = tmp_path / "u"
  keras_loop.fit(dataclasses.replace(run, train_dir=str(uninterrupted)), strategy)
  resumed, reference = _tensors(tmp_path / "k"), _tensors(uninterrupted)
  for key, value in reference.items():
    np.testing.assert_array_equal(resumed[key], value, err_msg=key)


def test_keras_fit_refuses_what_it_cannot_do(tmp_path):
  result = helpers.call("examples.keras_fit", "--dataset=synthetic", "--max_steps=25",
                        "--precision=fp16", "--loss_scale=dynamic", f"--train_dir={tmp_path}")
  assert result.returncode == 2
  assert helpers.error_line(result) == (
      "error: --loss_scale is not supported by keras_fit (its float16 runs without loss "
      "scaling, as the original's --use_fp16 did); use strategies.train")
