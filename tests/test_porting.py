"""The porting kit on a second model (conv + batch norm + momentum + L2, written as TF1 teams
wrote it, tests/bn_momentum_port.py): its faithful TF2 port is held to the bit where it can
be and to the measured rounding, with the cause, where it cannot; each deliberately wrong port
is named by the report. Its command line and checkpoints: tests/test_porting_commands.py;
how it pairs variables and counts differences: tests/test_porting_matching.py."""

import ast
import dataclasses
import functools
import glob
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import porting
from porting import diagnosis
from tests import bn_momentum_port as m
from tests import helpers

# pytest resets warning filters per test; the model's own filter does not outlive it.
pytestmark = pytest.mark.filterwarnings(
    "ignore:`tf.layers.batch_normalization` is deprecated")


@pytest.mark.parametrize("replicas", [1, 2, 4])
@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_the_faithful_port_is_bit_identical_where_it_can_be(replicas):
  report = porting.compare(m.port(), m.batches(replicas), replicas=replicas, steps=3)
  first = [r for r in report.rows if r.step == 0 and not r.diff.within(0)]
  # Step 1: losses, logits, gradients, weights and momentum slots the same bits; only the
  # moving variance is 1 ULP apart (TF1 updates v - (v - x)(1 - m), Keras v m + x (1 - m)).
  assert [(r.kind, r.tf1, r.diff.ulps) for r in first] == [
      ("weight", "bn1/moving_variance", 1)]
  kinds = {r.kind for r in report.rows}
  assert kinds == {"loss", "outputs", "gradient", "weight", "slot"}
  # Later steps: MomentumOptimizer's accumulator and Keras SGD's velocity round differently.
  worst = max(r.diff.max_rel for r in report.rows)
  assert 0 < worst < 1e-6, worst
  assert not report.equal
  assert dataclasses.replace(report, tolerance=1e-6).equal
  assert [h.split(":")[0] for h in report.hints] == ["moving statistics differ by rounding",
                                                    "momentum"]
  assert report.learning_rates == ([float(np.float32(0.1))] * 3,) * 2


def _classic_tower_loss(scope, images, labels):
  """The original's form: the tower adds its loss to the 'losses' collection and sums the
  collection of its own scope."""
  loss, logits = m.tower_loss(images, labels)
  tf.compat.v1.add_to_collection("losses", loss)
  return tf.add_n(tf.compat.v1.get_collection("losses", scope)), logits


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_a_tower_function_of_the_originals_form_gets_its_scope():
  plain = porting.compare(m.port(), m.batches(2), replicas=2, steps=2)
  classic = porting.compare(m.port(tower_loss=_classic_tower_loss), m.batches(2), replicas=2,
                            steps=2)
  # Each tower's collection holds its own loss only: the same numbers as the plain form.
  assert [(r.kind, r.tf1, r.diff) for r in classic.rows] == [
      (r.kind, r.tf1, r.diff) for r in plain.rows]
  assert any(r.diff.max_abs > 0 for r in plain.rows)


def _per_replica_batch(model, images, labels, global_batch_size):
  del global_batch_size  # the mistake
  logits = model(images, training=True)
  loss = tf.reduce_mean(
      tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
  return loss + tf.nn.scale_regularization_loss(tf.add_n(model.losses)), logits


def _mean_on_sum(model, images, labels, global_batch_size):
  loss, logits = m.replica_loss(model, images, labels, global_batch_size)
  return loss / tf.distribute.get_strategy().num_replicas_in_sync, logits


def _regularization_per_replica(model, images, labels, global_batch_size):
  logits = model(images, training=True)
  per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
  return (tf.nn.compute_average_loss(per_example, global_batch_size=global_batch_size)
          + tf.add_n(model.losses)), logits


def _no_regularization(model, images, labels, global_batch_size):
  logits = model(images, training=True)
  per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
  return tf.nn.compute_average_loss(per_example, global_batch_size=global_batch_size), logits


def _towers_loss_without_regularization(model, images, labels, global_batch_size):
  del global_batch_size
  logits = model(images, training=True)
  per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
  return tf.reduce_mean(per_example), logits


def _towers_loss_regularization_scaled(model, images, labels, global_batch_size):
  """TF2's idiom of the regularization (1/N on each replica) where the gradients are averaged:
  what a port gets following advice meant for summed gradients."""
  loss, logits = _towers_loss_without_regularization(model, images, labels, global_batch_size)
  return loss + tf.nn.scale_regularization_loss(tf.add_n(model.losses)), logits


def _towers_loss(model, images, labels, global_batch_size):
  """The port written as the towers' loss: the mean over the replica's own examples plus the
  whole regularization (for gradient_reduction="mean")."""
  del global_batch_size
  logits = model(images, training=True)
  per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
  return tf.reduce_mean(per_example) + tf.add_n(model.losses), logits


@pytest.mark.slow  # the fast tier's N = 3: tests/test_equivalence.py's gradients
def test_averaging_as_the_towers_do_gives_their_gradients_at_three_replicas():
  # TF2's idiom (sum over the global batch, the optimizer's SUM): the step-0 gradients round
  # differently at N = 3. The towers' loss with gradient_reduction="mean": the same bits.
  batches = m.batches(3, per_replica=4, steps=1)
  idiom = porting.compare(m.port(), batches, replicas=3, steps=1)
  towers = porting.compare(m.port(replica_loss=_towers_loss, gradient_reduction="mean"),
                           batches, replicas=3, steps=1)
  grads = lambda report: [r for r in report.rows if r.step == 0 and r.kind == "gradient"]
  assert any(r.diff.ulps for r in grads(idiom))
  assert all(r.diff.ulps == 0 for r in grads(towers)) and len(grads(towers)) == 5
  assert all(r.diff.ulps == 0 for r in towers.rows if r.step == 0 and r.kind == "loss")
  with pytest.raises(porting.PortError, match="gradient_reduction must be one of sum, mean"):
    m.port(gradient_reduction="average")


class _GatedConv(keras.layers.Conv2D):
  """Keras's Conv2D with its bias added by porting.gated_bias_add (the fix the kit names)."""

  def call(self, inputs):
    return porting.gated_bias_add(self.convolution_op(inputs, self.kernel), self.bias)


def test_the_gated_bias_gives_the_towers_bias_gradients(monkeypatch):
  # The fix the bias_add port's cause names: step 0's gradients all the same bits (with oneDNN
  # on, the plain Conv2D's conv1/bias gradient is a rounding apart; WRONG["bias_add"]).
  monkeypatch.setattr(keras.layers, "Conv2D", _GatedConv)  # the port's conv layer, gated
  report = porting.compare(m.port(tower_loss=functools.partial(m.tower_loss, conv_bias=True),
                                  build_model=functools.partial(m.Net, conv_bias=True)),
                           m.batches(2), replicas=2, steps=1)
  gradients = [r for r in report.rows if r.kind == "gradient"]
  assert [r.tf1 for r in gradients][:2] == ["conv1/kernel", "conv1/bias"]
  assert all(r.diff.ulps == 0 for r in gradients), report.text()
  assert not [h for h in report.hints if "bias" in h]


def _decay_per_step(global_step):
  rate = tf.compat.v1.train.exponential_decay(m.LEARNING_RATE, global_step, 1, 0.5,
                                              staircase=True)
  return tf.compat.v1.train.MomentumOptimizer(rate, m.MOMENTUM)


def _decay_every_two_steps():
  rate = keras.optimizers.schedules.ExponentialDecay(m.LEARNING_RATE, 2, 0.5, staircase=True)
  return keras.optimizers.SGD(rate, momentum=m.MOMENTUM)


def _tf1_adam(global_step):
  del global_step
  return tf.compat.v1.train.AdamOptimizer(0.01, epsilon=1e-7)


# name: (Port fields changed, images per replica, what the report must say)
WRONG = {
    "per_replica_batch": (dict(replica_loss=_per_replica_batch), 4,
                          "x the towers' average (N = 2): the TF2 loss is divided by the "
                          "replica's batch"),
    "mean_on_sum": (dict(replica_loss=_mean_on_sum), 4, "averaged twice"),
    "global_batch_loss_averaged": (dict(gradient_reduction="mean"), 4,
                                   "averaged (gradient_reduction='mean'), so each replica's "
                                   "loss must be the tower's own"),
    "regularization_n_times": (dict(replica_loss=_regularization_per_replica), 4,
                               "regularization is counted 2 times"),
    "regularization_missing": (dict(replica_loss=_no_regularization), 4,
                               "regularization is missing from the TF2 loss (its gradient is "
                               "all that differs): add the model's losses (model.losses), "
                               "scaled by tf.nn.scale_regularization_loss"),
    # Where the replicas' gradients are averaged, the advice is the towers' whole penalty
    # (it was the scaled one, and following it the kit named a penalty "in the TF1 loss only").
    "regularization_missing_averaged": (
        dict(replica_loss=_towers_loss_without_regularization, gradient_reduction="mean"), 4,
        "regularization is missing from the TF2 loss (its gradient is all that differs): add "
        "the model's losses as they are"),
    "regularization_scaled_averaged": (
        dict(replica_loss=_towers_loss_regularization_scaled, gradient_reduction="mean"), 4,
        "the regularization is 1/2 of the towers' in the TF2 loss"),
    "decay_steps": (dict(tf1_optimizer=_decay_per_step, tf2_optimizer=_decay_every_two_steps),
                    4, "the learning rate differs from step 1 (TF1 0.05, TF2 0.1)"),
    "fused_batch_norm": (dict(tower_loss=functools.partial(m.tower_loss, fused=True)), 4,
                         "TF1's batch norm is fused"),
    "moving_statistics_of_every_tower": (dict(update_ops="all_towers"), 4,
                                         "runs the UPDATE_OPS of every tower"),
    "adam": (dict(tf1_optimizer=_tf1_adam,
                  tf2_optimizer=lambda: keras.optimizers.Adam(0.01, epsilon=1e-7)), 4,
             "Adam's 1 - beta: TF1's ApplyAdam kernel computes 1 - beta_1 and 1 - beta_2 in "
             "float32"),
    "bias_add": (dict(tower_loss=functools.partial(m.tower_loss, conv_bias=True),
                      build_model=functools.partial(m.Net, conv_bias=True)), 4,
                 "under a GradientTape oneDNN fuses a convolution's filter gradient with "
                 "its bias gradient"),
}


@pytest.mark.parametrize("kind", list(WRONG))
@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_the_report_names_the_cause_of_each_wrong_port(kind):
  changes, per_replica, cause = WRONG[kind]
  report = porting.compare(m.port(**changes), m.batches(2, per_replica=per_replica),
                           replicas=2, steps=3)
  assert not report.equal
  if kind == "bias_add" and not [r for r in report.rows if r.step == 0 and
                                 r.kind == "gradient" and r.diff.ulps]:
    # The bias gradients differ only where oneDNN fuses a convolution's filter and bias
    # gradients (under a tape, not under TF1's gated gradients); TensorFlow's own kernels
    # (oneDNN off) give the same bits: then no such cause may be named.
    assert not [h for h in report.hints if "bias gradients" in h], report.hints
    return
  named = [h for h in report.hints if cause in h]
  assert named, report.hints
  # Only the cause that fits: a correct port's causes aside, nothing else is named.
  faithful = ("moving statistics differ by rounding", "momentum:")
  others = [h for h in report.hints if h not in named and not h.startswith(faithful)]
  assert not others, others


def test_a_cause_is_named_only_where_the_numbers_fit_it():
  """A fused TF1 batch norm beside a loss scaled by the replica's batch: the gradients are 1.0
  apart, which no fused kernel's rounding makes; only the scale is named (before: the fused
  batch norm too, a false cause)."""
  fused = functools.partial(m.tower_loss, fused=True)
  report = porting.compare(m.port(tower_loss=fused, replica_loss=_per_replica_batch),
                           m.batches(2), replicas=2, steps=2)
  assert [h.split(":")[0] for h in report.hints] == [
      "every gradient is 2 x the towers' average (N = 2)"], report.hints


def test_the_kit_knows_nothing_of_this_project():
  # A team's CI installs it for its own model: no CIFAR-10, no trainer, no run plumbing.
  ours = ("cifar10", "strategies", "compat_v1", "harness", "equivalence", "examples",
          "benchmarks", "tests")
  library = [p for p in glob.glob(os.path.join(helpers.REPO, "porting", "*.py"))
             if not p.endswith("__main__.py")]  # the command line uses harness.command_line.cli
  assert len(library) >= 10
  for path in library:
    with open(path, encoding="utf-8") as f:
      tree = ast.parse(f.read())
    for node in ast.walk(tree):
      names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
               [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
      for name in names:
        assert name.split(".")[0] not in ours, f"{path} imports {name}"


def test_on_gpus_the_kit_runs_under_determinism_and_sums_in_tower_order(monkeypatch):
  # GPUs faked at TensorFlow's device listing: the kit's own settings for a comparison to the
  # bit there (before: none, so cuDNN's and BiasAddGrad's kernel order and TensorFloat-32 would
  # have shown as differences), and the replica-order sum of the towers' average.
  from porting import devices  # pylint: disable=g-import-not-at-top
  fake = [tf.config.PhysicalDevice(f"/physical_device:GPU:{i}", "GPU") for i in range(3)]
  calls = []
  monkeypatch.setattr(tf.config, "list_physical_devices",
                      lambda kind=None: fake if kind == "GPU" else [])
  monkeypatch.setattr(tf.config.experimental, "enable_op_determinism",
                      lambda: calls.append("op determinism"))
  monkeypatch.setattr(tf.config.experimental, "enable_tensor_float_32_execution",
                      lambda on: calls.append(f"tf32 {on}"))
  assert devices.replica_devices(2) == ["/gpu:0", "/gpu:1"]
  assert calls == ["op determinism", "tf32 False"]
  with pytest.raises(porting.PortError, match="4 replicas but only 3 GPU"):
    devices.replica_devices(4)
  made = []
  monkeypatch.setattr(tf.distribute, "MirroredStrategy",
                      lambda names, cross_device_ops: made.append((names, cross_device_ops)))
  devices.strategy(["/gpu:0", "/gpu:1", "/gpu:2"])
  names, ops = made[0]
  assert names == ["/gpu:0", "/gpu:1", "/gpu:2"]
  assert isinstance(ops, tf.distribute.ReductionToOneDevice)
  assert devices.session_config(names).allow_soft_placement


def _loss_a_little_larger(model, images, labels, global_batch_size):
  # A fault no rule knows, of rounding's size (a loss times a constant is one it knows: every
  # gradient that factor; one far past rounding gets no kernel setting advised).
  loss, logits = m.replica_loss(model, images, labels, global_batch_size)
  return loss + 1e-6 * tf.reduce_mean(tf.square(logits)), logits


def _loss_larger(model, images, labels, global_batch_size):
  # The same fault past rounding (more than a fused batch norm's rounding explains).
  loss, logits = m.replica_loss(model, images, labels, global_batch_size)
  return loss + 1e-3 * tf.reduce_mean(tf.square(logits)), logits


def test_a_fused_tf1_batch_norm_beside_a_fault_no_rule_knows_is_said_not_blamed():
  """Where TF1's batch norm is fused and step 0 is more than rounding apart (a fused
  kernel's sums can be, where they cancel: a MobileNet port at N = 2 had gamma gradients
  1.5e-5 apart), the fused-kernel cause is not named; the line that says where the bits part
  says that TF1's batch norm is fused, and how to look past it."""
  report = porting.compare(m.port(tower_loss=functools.partial(m.tower_loss, fused=True),
                                  replica_loss=_loss_larger),
                           m.batches(2), replicas=2, steps=1)
  assert not [h for h in report.hints if h.startswith("TF1's batch norm is fused")], \
      report.hints
  unexplained = [h for h in report.hints if h.startswith("not explained")]
  assert len(unexplained) == 1, report.hints
  assert "TF1's batch norm is fused (FusedBatchNorm, its own rounding; step 0 is up to " in \
      unexplained[0]
  assert unexplained[0].endswith("compare with fused=False on the TF1 side first, to see "
                                 "whether anything else differs")


def test_a_fused_batch_norm_after_a_bias_is_named_past_the_bias_gradients_noise():
  """A convolution's bias before the batch norm: its gradient is 0 but for rounding noise on
  both sides, any relative difference apart (0.89 here at one tower), which kept the fused
  kernel from being named ("not explained"; and a TF 1.15 record's kernels likewise)."""
  port = m.port(tower_loss=functools.partial(m.tower_loss, fused=True, conv_bias=True),
                build_model=functools.partial(m.Net, conv_bias=True))
  report = porting.compare(port, m.batches(1), replicas=1, steps=2)
  bias = [r for r in report.rows if r.step == 0 and r.kind == "gradient" and
          r.tf1 == "conv1/bias"]
  assert bias and bias[0].diff.max_rel > 0.1, bias  # the noise: no rounding-size figure
  assert [h.split(" (")[0] for h in report.hints] == ["TF1's batch norm is fused"], \
      report.hints
  assert report.hints[0].endswith("; left out: conv1/bias, whose gradient is within "
                                  "rounding of 0 on both sides (as a bias before a batch "
                                  "norm's is): its relative figures say nothing, and no "
                                  "tolerance covers them)")
  # The kernel's own figure: step 0's, from the same weights (tf_cnn_benchmarks' port with
  # Keras's SGD read 0.014 over its steps where the kernel gave 3.5e-4, the optimizer the rest).
  moving = max(r.diff.max_rel for r in report.rows if r.step == 0 and "moving_" in r.tf1)
  assert f"its moving statistics up to {moving:.2g}" in report.hints[0], report.hints[0]


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_the_unexplained_line_advises_onednn_off_only_where_it_is_on(monkeypatch):
  """With oneDNN off on this side already, the line still said to set
  TF_ENABLE_ONEDNN_OPTS=0 (a TF 1.15 record compared with oneDNN off)."""
  import dataclasses  # pylint: disable=g-import-not-at-top
  from tfbits import machine  # pylint: disable=g-import-not-at-top
  lines = {}
  describe = machine.describe
  for onednn in (True, False):
    monkeypatch.setattr(machine, "describe",
                        lambda on=onednn: dataclasses.replace(describe(), onednn=on))
    report = porting.compare(m.port(replica_loss=_loss_a_little_larger), m.batches(2),
                             replicas=2, steps=1)
    (lines[onednn],) = [h for h in report.hints if h.startswith("not explained")]
  assert "one tower, or TF_ENABLE_ONEDNN_OPTS=0 on both sides to narrow it" in lines[True]
  assert "compare fewer steps or one tower to narrow it" in lines[False], lines[False]
  assert "ONEDNN" not in lines[False]


def test_the_fused_bias_cause_is_named_for_a_convolutions_bias_only():
  """A rank-1 gradient apart by rounding with oneDNN on was called a convolution's fused
  bias gradient whatever the bias: a tiny BERT's attention key bias (its gradient 0 up to
  rounding: softmax ignores a shift of the scores; no convolution in the model) got the advice
  to add it with gated_bias_add. The TF1 graph now says which biases a convolution's output
  is added to; the same numbers with none are no such cause."""
  changes, per_replica, cause = WRONG["bias_add"]
  report = porting.compare(m.port(**changes), m.batches(2, per_replica=per_replica),
                           replicas=2, steps=3)
  assert report.tf1.facts["structure"]["conv_biases"] == ["conv1/bias"]
  named = lambda hints: [h for h in hints if cause in h]
  if not named(report.hints):  # oneDNN off, or its kernels round alike here: nothing to hold
    return
  report.tf1.facts["structure"]["conv_biases"] = []
  hints = diagnosis.causes(report.pairs, report.tf1, report.tf2, report.rows, 0.0, 2,
                           ("MomentumOptimizer", "SGD"), "sum", onednn=True)
  assert not named(hints), hints
