"""The porting kit and the optimizers: their settings compared before a step runs (one line
naming both values: Keras's default Adam epsilon 1e-7 against TF1's 1e-8 made the weights 0.97
relative apart at step 0), and Adam's 1 - beta cause read per variable (a conv bias gradient
that differs elsewhere no longer hides it). The model is tests/bn_momentum_port.py."""

import functools

import keras
import pytest
import tensorflow as tf

import porting
from tests import bn_momentum_port as m
from tests import helpers

pytestmark = pytest.mark.filterwarnings(
    "ignore:`tf.layers.batch_normalization` is deprecated")

ADAM = dict(tf1_optimizer=lambda step: tf.compat.v1.train.AdamOptimizer(0.01, epsilon=1e-7),
            tf2_optimizer=lambda: keras.optimizers.Adam(0.01, epsilon=1e-7))
# A conv bias in TF1's tf.nn.bias_add form, Keras's Conv2D bias on the port's side: with oneDNN
# on, the bias gradient differs at step 0 (tests/test_porting.py's bias_add port).
BIAS_ADD = dict(tower_loss=functools.partial(m.tower_loss, conv_bias=True),
                build_model=functools.partial(m.Net, conv_bias=True))


def test_adams_cause_is_read_per_variable_beside_another_cause():
  # Adam's moments differ at step 0 wherever the gradient does not; a conv bias gradient that
  # differs (oneDNN's fused conv gradients) must not hide it. Before, it did.
  report = porting.compare(m.port(**ADAM, **BIAS_ADD), m.batches(2), replicas=2, steps=2)
  named = [h.split(":")[0] for h in report.hints]
  assert "Adam's 1 - beta" in named, report.hints
  line = next(h for h in report.hints if h.startswith("Adam's 1 - beta"))
  same = {r.tf1 for r in report.rows if r.step == 0 and r.kind == "gradient" and
          r.diff.within(0)}
  measured = max(r.diff.max_rel for r in report.rows if r.step == 0 and r.kind == "slot"
                 and r.tf1.split(":")[0] in same and not r.diff.within(0))
  assert f"by up to {measured:.2g} relative here" in line


@pytest.mark.parametrize("tf1, tf2, expected", [
    # Keras's Adam defaults to epsilon=1e-7, TF1's AdamOptimizer to 1e-8.
    (lambda: tf.compat.v1.train.AdamOptimizer(0.01), lambda: keras.optimizers.Adam(0.01),
     "epsilon TF1 1e-08, TF2 1e-07"),
    (lambda: tf.compat.v1.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True),
     lambda: keras.optimizers.SGD(0.1, momentum=0.8), "momentum TF1 0.9, TF2 0.8; nesterov "
     "TF1 True, TF2 False"),
    (lambda: tf.compat.v1.train.GradientDescentOptimizer(0.1),
     lambda: keras.optimizers.SGD(0.1, momentum=0.9),
     "momentum TF1 0.0 (GradientDescentOptimizer has no such setting), TF2 0.9"),
    (lambda: tf.compat.v1.train.RMSPropOptimizer(0.1), lambda: keras.optimizers.RMSprop(0.1),
     "epsilon TF1 1e-10, TF2 1e-07"),
    (lambda: tf.compat.v1.train.AdagradOptimizer(0.1), lambda: keras.optimizers.Adagrad(0.1),
     "epsilon TF1 0.0 (AdagradOptimizer has no such setting), TF2 1e-07"),
    (lambda: tf.compat.v1.train.AdamOptimizer(0.01, epsilon=1e-7),
     lambda: keras.optimizers.Adam(0.01, clipnorm=1.0),
     "clipnorm TF1 none (AdamOptimizer has no such setting), TF2 1.0"),
    (lambda: tf.compat.v1.train.AdamOptimizer(0.01), lambda: keras.optimizers.SGD(0.01),
     "optimizer TF1 AdamOptimizer, TF2 SGD (its Keras twin is Adam)"),
])
def test_optimizer_settings_that_differ_are_named_with_both_values(tf1, tf2, expected):
  from porting import hyperparameters  # pylint: disable=g-import-not-at-top
  assert "; ".join(hyperparameters.mismatches(tf1(), tf2())) == expected


def test_a_port_whose_optimizer_settings_differ_is_one_line_before_a_step():
  result = helpers.call("porting.__main__", "--port=tests.test_porting_optimizers:default_adam_port",
                        "--batches=tests.bn_momentum_port:batches", "--replicas=1", "compare")
  helpers.check_one_line(result, "the optimizers' hyper-parameters differ: epsilon TF1 1e-08, "
                                 "TF2 1e-07; set them alike in tf2_optimizer")


def default_adam_port():
  """TF1's AdamOptimizer against Keras's Adam, each with its own default epsilon."""
  return m.port(tf1_optimizer=lambda step: tf.compat.v1.train.AdamOptimizer(0.01),
                tf2_optimizer=lambda: keras.optimizers.Adam(0.01))


def test_optimizers_that_agree_name_nothing():
  from porting import hyperparameters  # pylint: disable=g-import-not-at-top
  v1 = tf.compat.v1.train
  for tf1, tf2 in [(v1.AdamOptimizer(0.01, epsilon=1e-7), keras.optimizers.Adam(0.01)),
                   (v1.MomentumOptimizer(0.1, 0.9), keras.optimizers.SGD(0.1, momentum=0.9)),
                   (v1.GradientDescentOptimizer(0.1), keras.optimizers.SGD(0.1)),
                   (v1.RMSPropOptimizer(0.1, epsilon=1e-7), keras.optimizers.RMSprop(0.1)),
                   (v1.FtrlOptimizer(0.1), keras.optimizers.Ftrl(0.1))]:
    assert hyperparameters.mismatches(tf1, tf2) == [], type(tf1).__name__
