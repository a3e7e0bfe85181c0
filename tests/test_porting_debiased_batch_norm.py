"""Batch norm as Inception's slim ops wrote it (tests/assign_moving_average_port.py): the kit
reads zero-debiased moving averages and the tower whose updates the train op runs, and
porting.TF1BatchNorm reproduces them to the bit. A form the kit cannot read is compared by
its numbers, never refused or said to be absent."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import porting
from tests import assign_moving_average_port as m

DEBIAS = {f"conv/BatchNorm/conv/BatchNorm/{s}/{v}": None
          for s in ("moving_mean", "moving_variance") for v in ("biased", "local_step")}


@pytest.mark.parametrize("replicas,update_ops", [(1, "first_tower"), (2, "first_tower"),
                                                 (2, "last_tower")])
@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_tf1_batch_norm_steps_as_the_debiased_towers_to_the_bit(replicas, update_ops):
  report = porting.compare(m.port(update_from=update_ops, update_ops=update_ops),
                           m.batches(replicas), replicas=replicas, steps=3)
  assert report.equal, report.text()
  assert not report.unread and not report.hints
  # The debias state is there and compared: local_step counts the steps.
  names = [a for a, _ in report.pairs]
  assert "conv/BatchNorm/conv/BatchNorm/moving_mean/local_step" in names
  assert report.tf1.facts["update_towers"] == [replicas - 1 if update_ops == "last_tower"
                                               else 0]


def test_the_last_towers_updates_against_replica_0s_are_named_with_their_size():
  report = porting.compare(m.port(update_ops="last_tower"), m.batches(2), replicas=2, steps=2)
  assert not report.equal
  moving = [r for r in report.rows if r.kind == "weight" and "moving" in r.tf1]
  worst = max(r.diff.max_rel for r in moving)
  assert worst > 1e-2
  (hint,) = report.hints
  assert hint.startswith("batch-norm moving statistics: the TF1 train op runs the UPDATE_OPS "
                         "of tower 1's (the last) (read from the ops it runs)")
  assert "update_from='last_tower'" in hint and f"up to {worst:.2g} relative" in hint
  # Everything else the same bits: the cause is the only one.
  assert all(r.diff.within(0) for r in report.rows if r not in moving)


def test_a_keras_batch_norm_of_a_debiased_one_is_refused_with_the_true_difference():
  debias = {f"conv/BatchNorm/conv/BatchNorm/{s}/{v}": None
            for s in ("moving_mean", "moving_variance") for v in ("biased", "local_step")}
  with pytest.raises(porting.PortError) as refused:
    porting.compare(m.port(bn="keras", variable_map=debias), m.batches(1), replicas=1, steps=1)
  line = str(refused.value)
  assert "batch norm conv/BatchNorm: TF1 updates its moving statistics zero-debiased" in line
  assert "TF2 as a plain moving average" in line and "does not" not in line
  assert "porting.TF1BatchNorm(zero_debias=True)" in line


def test_keras_3s_assign_sub_form_is_read_as_a_moving_average():
  with pytest.raises(porting.PortError) as refused:
    porting.compare(m.port(bn="assign_sub", variable_map=DEBIAS), m.batches(1), replicas=1,
                    steps=1)
  # Read: the momentum agrees, the debiasing does not (before: "TF2 does not" update).
  line = str(refused.value)
  assert line.startswith("the layers' settings differ: batch norm conv/BatchNorm: TF1 updates "
                         "its moving statistics zero-debiased"), line
  assert "momentum TF1" not in line and "does not" not in line


def test_the_debias_state_left_unmatched_is_named_for_what_it_is():
  with pytest.raises(porting.PortError) as refused:
    porting.compare(m.port(bn="keras"), m.batches(1), replicas=1, steps=1)
  assert ("are the state of zero-debiased moving averages, assign_moving_average's default: "
          "porting.TF1BatchNorm(zero_debias=True) keeps them, or map them to None)"
          ) in str(refused.value)


def test_an_update_the_kit_cannot_read_is_compared_by_its_numbers():
  debias = {f"conv/BatchNorm/conv/BatchNorm/{s}/{v}": None
            for s in ("moving_mean", "moving_variance") for v in ("biased", "local_step")}
  report = porting.compare(m.port(bn="direct", variable_map=debias), m.batches(1),
                           replicas=1, steps=2)
  assert report.unread == [
      "batch norm conv/BatchNorm: the TF2 side assigns net/bn/moving_mean, net/bn/moving_variance in a "
      "form the kit does not recognise as a moving average; the momentum is not compared, "
      "the steps' numbers are"]
  assert "  not compared: batch norm conv/BatchNorm: the TF2 side assigns" in report.text()
  # The forward pass and gradients are the same bits; the statistics are the batch's.
  assert all(r.diff.within(0) for r in report.rows if r.kind in ("loss", "gradient"))
  assert not report.equal
  assert not any("does not" in h for h in report.hints)


class OwnSGD(keras.optimizers.Optimizer):
  """A team's own Keras optimizer: plain gradient descent, written before the kit had one."""

  def update_step(self, gradient, variable, learning_rate):
    variable.assign_sub(tf.cast(learning_rate, variable.dtype) * gradient)


def test_a_teams_own_optimizer_class_is_compared_not_refused():
  report = porting.compare(m.port(tf2_optimizer=lambda: OwnSGD(0.1)), m.batches(2),
                           replicas=2, steps=2)
  assert report.equal, report.text()
  assert report.unread == [
      "the optimizers' settings: TF2 OwnSGD is a class of the port's own, which the kit does "
      "not read (it reads Keras's and porting.optimizers'); TF1 GradientDescentOptimizer's "
      "are not held against it, the steps' numbers compare them"]


def test_keras_other_optimizer_is_still_refused_before_a_step():
  with pytest.raises(porting.PortError, match=r"optimizer TF1 GradientDescentOptimizer, TF2 "
                     r"Adam \(its Keras twin is SGD\)"):
    porting.compare(m.port(tf2_optimizer=lambda: keras.optimizers.Adam(0.1)), m.batches(1),
                    replicas=1, steps=1)


def test_a_missing_gradient_is_one_line_naming_the_variables():
  def logits_only(model, images, labels, global_batch_size):
    del images, labels, global_batch_size
    return tf.reduce_sum(model.logits.kernel), None
  with pytest.raises(porting.PortError) as refused:
    porting.compare(m.port(replica_loss=logits_only), m.batches(1), replicas=1, steps=1)
  line = str(refused.value)
  assert "\n" not in line and "in user code" not in line
  assert line.startswith("replica_loss has no gradient for net/conv/kernel, net/bn/beta:")


def test_tf1_batch_norm_inference_uses_the_moving_statistics():
  layer = porting.TF1BatchNorm(0.9, 1e-3, scale=False)
  x = np.random.default_rng(1).normal(size=(2, 2, 2, 3)).astype(np.float32)
  out = layer(x, training=False)
  np.testing.assert_array_equal(out, tf.nn.batch_normalization(x, 0.0, 1.0, 0.0, None, 1e-3))
  layer(x, training=True)
  mean = tf.nn.moments(tf.constant(x), [0, 1, 2])[0]
  # The first debiased update is the batch's statistic itself (biased / (1 - m)).
  np.testing.assert_allclose(layer.moving_mean.numpy(), mean, rtol=1e-6)
  with pytest.raises(porting.PortError, match="update_from must be one of"):
    porting.TF1BatchNorm(update_from="all_towers")


def test_replica_copies_held_apart_are_said_even_where_replica_0s_match():
  # TF1 runs tower 0's updates; the port updates each replica from its own batch: replica 0's
  # copy (compared, saved) is tower 0's, replica 1's is another.
  report = porting.compare(m.port(update_from="own_replica"), m.batches(2), replicas=2,
                           steps=1)
  assert report.equal
  apart = report.tf2.facts["replicas_apart"]
  assert {"net/bn/moving_mean", "net/bn/moving_variance"} <= set(apart)
  assert "  replicas apart: " in report.text()
  lockstep = porting.compare(m.port(update_from="first_tower"), m.batches(2), replicas=2,
                             steps=1)
  assert lockstep.equal and lockstep.tf2.facts["replicas_apart"] == {}
