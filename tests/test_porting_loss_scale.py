"""Float16 ports with a loss scale: TF1's MixedPrecisionLossScaleOptimizer against Keras's
LossScaleOptimizer (issue 61), on tests/fp16_port.py.

Before, a TF1 loss-scale wrapper was refused ("keeps no learning rate"), and a Keras one
compared its scaled gradients: every gradient 32768 x TF1's, named as a loss the two sides
normalize otherwise.
"""

import pytest

import porting
from tests import fp16_port as m


def test_a_float16_port_scaled_alike_is_the_same_bits_and_says_its_scale():
  report = porting.compare(m.port(), m.batches(2), replicas=2, steps=3)
  assert report.equal, report.text(width=100)
  assert any(line.startswith("loss scale, the same on both sides: dynamic from 32768, x2 "
                             "after 2000 finite steps") for line in report.notes())
  assert not any("current_loss_scale" in line for line in report.unread)  # said, not listed
  # Equal to the bit, and the precision it computes in said beside the verdict.
  assert any(n.startswith("precision: both sides compute in float16") for n in report.notes())
  gradients = [r for r in report.rows if r.kind == "gradient"]
  assert gradients and all(r.diff.max_abs == 0 for r in gradients)


@pytest.mark.parametrize("tf1_scale, said", [
    (128.0, "the loss scales differ: TF1 fixed 128, TF2 dynamic from 32768, x2 after 2000 "
            "finite steps"),
    (None, "the loss scales differ: TF1 none, TF2 dynamic from 32768")])
def test_scales_that_differ_are_refused_naming_both(tf1_scale, said):
  with pytest.raises(porting.PortError, match=said.replace("(", r"\(")):
    porting.compare(m.port(tf1_optimizer=m.tf1_scaled(tf1_scale)), m.batches(1),
                    replicas=1, steps=1)


def test_a_fixed_tf1_scale_is_compared_with_keras_scale_from_it_that_does_not_grow_in_time():
  # TF1's official ResNet scaled by a fixed 128; Keras's is always dynamic, and from 128 it
  # keeps 128 for 2000 finite steps: over 3 the same arithmetic. It was refused.
  report = porting.compare(m.port(tf1_optimizer=m.tf1_scaled(128.0),
                                  tf2_optimizer=m.tf2_scaled(128.0)),
                           m.batches(2), replicas=2, steps=3)
  assert report.equal, report.text(width=100)
  assert any(n.startswith("loss scale: TF1 fixed 128, TF2 dynamic from 128, x2 after 2000 "
                          "finite steps: alike over these 3 step(s) while each is finite")
             for n in report.notes()), report.notes()
  # Past its growth period Keras's doubles: refused.
  growing = lambda: m.keras.optimizers.LossScaleOptimizer(
      m.keras.optimizers.SGD(m.LEARNING_RATE), initial_scale=128.0, dynamic_growth_steps=2)
  with pytest.raises(porting.PortError, match="the loss scales differ: TF1 fixed 128, TF2 "
                     "dynamic from 128, x2 after 2 finite steps"):
    porting.compare(m.port(tf1_optimizer=m.tf1_scaled(128.0), tf2_optimizer=growing),
                    m.batches(1), replicas=1, steps=3)


@pytest.fixture(name="process_rewrite")
def fixture_process_rewrite():
  """The process's grappler options and TensorFlow's rewrite flag, put back after the test
  whatever the kit did (the test checks that the kit put them back itself)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tensorflow.python.training.experimental import (  # pylint: disable=g-import-not-at-top
      mixed_precision_global_state as state)
  options = tf.config.optimizer.get_experimental_options()
  flag = state.is_mixed_precision_graph_rewrite_enabled()
  yield options, flag, state
  tf.config.optimizer.set_experimental_options(
      {**{k: None for k in tf.config.optimizer.get_experimental_options()}, **options})
  state.set_mixed_precision_graph_rewrite_enabled(flag)


def test_tf1s_mixed_precision_graph_rewrite_is_compared_and_leaves_the_process_as_it_was(
    process_rewrite):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  options, flag, state = process_rewrite
  v1 = tf.compat.v1

  def rewritten(global_step):
    del global_step
    return v1.mixed_precision.enable_mixed_precision_graph_rewrite(
        v1.train.GradientDescentOptimizer(m.LEARNING_RATE))
  report = porting.compare(m.port(tf1_optimizer=rewritten), m.batches(2), replicas=2, steps=2)
  # Its dynamic scale is the same as Keras's, and on CPUs the pass does nothing: the same bits.
  assert report.equal, report.text(width=100)
  assert any(n.startswith("loss scale, the same on both sides: dynamic from 32768")
             for n in report.notes())
  assert any(n.startswith("TF1's mixed-precision graph rewrite is on") and
             "rewrites on GPUs only, and these towers run on CPUs" in n
             for n in report.notes()), report.notes()
  # The team's call switched the rewrite on for the process; the kit's TF1 Session kept it,
  # and the process (the port's functions, any later comparison) has what it had before.
  assert tf.config.optimizer.get_experimental_options() == options
  assert state.is_mixed_precision_graph_rewrite_enabled() == flag


def test_under_the_rewrite_gpu_towers_compute_in_float16():
  from porting import mixed_precision_rewrite as rewrite  # pylint: disable=g-import-not-at-top
  precision, note = rewrite.said(True, ["/gpu:0", "/gpu:1"])
  assert precision == "float16" and "computes its GPU towers in float16" in note
  assert rewrite.said(True, ["/cpu:0"])[0] is None
  assert rewrite.said(False, ["/gpu:0"]) == (None, None)

  class Session:  # what a v1 Session made under the global flag holds (client/session.py)
    def __init__(self, amp):
      from tensorflow.core.protobuf import config_pb2  # pylint: disable=g-import-not-at-top
      self._config = config_pb2.ConfigProto()
      self._config.graph_options.rewrite_options.auto_mixed_precision = amp
  assert rewrite.applied(Session(1)) and not rewrite.applied(Session(0))
