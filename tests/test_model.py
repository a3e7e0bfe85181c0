"""The model of the tutorial: names, shapes, parameter count, initial values, where it runs."""

import numpy as np
import pytest
import tensorflow as tf

from cifar10 import model

EXPECTED_SHAPES = {
    "conv1/weights": (5, 5, 3, 64), "conv1/biases": (64,),
    "conv2/weights": (5, 5, 64, 64), "conv2/biases": (64,),
    "local3/weights": (2304, 384), "local3/biases": (384,),
    "local4/weights": (384, 192), "local4/biases": (192,),
    "softmax_linear/weights": (192, 10), "softmax_linear/biases": (10,),
}


def test_names_shapes_and_parameter_count():
  assert {s.name: s.shape for s in model.SPECS} == EXPECTED_SHAPES
  assert model.NUM_PARAMETERS == 1068298
  values = model.initial_values(0)
  assert sum(v.size for v in values.values()) == 1068298
  assert all(v.dtype == np.float32 for v in values.values())


def test_initial_values_follow_the_original_initializers():
  values = model.initial_values(7)
  for spec in model.SPECS:
    v = values[spec.name]
    if spec.init == "truncated_normal":
      assert np.abs(v).max() <= 2 * spec.stddev + 1e-7, spec.name
      # Truncation at 2 sigma leaves a standard deviation of 0.8796 sigma.
      assert abs(v.std() / spec.stddev - 0.8796) < 0.05, spec.name
    else:
      np.testing.assert_array_equal(v, np.full(spec.shape, spec.init, np.float32))
  assert values["conv2/biases"][0] == np.float32(0.1)
  assert values["local3/biases"][0] == np.float32(0.1)


def test_same_seed_same_bits_other_seed_other_values():
  a, b, c = model.initial_values(3), model.initial_values(3), model.initial_values(4)
  for name in model.VARIABLE_NAMES:
    np.testing.assert_array_equal(a[name], b[name])
  assert not np.array_equal(a["conv1/weights"], c["conv1/weights"])


@pytest.mark.parametrize("batch", [1, 5])
def test_logits_shape_comes_from_the_input(batch):
  params = model.initial_values(0)
  images = tf.random.stateless_normal([batch, 24, 24, 3], seed=[1, 2])
  assert model.inference(params, images).shape == (batch, 10)


def test_same_logits_eagerly_in_tf_function_and_in_a_v1_graph():
  params = model.initial_values(1)
  images = np.random.default_rng(0).normal(size=(4, 24, 24, 3)).astype(np.float32)
  eager = model.inference(params, images).numpy()
  traced = tf.function(model.inference)(params, images).numpy()
  with tf.Graph().as_default():
    variables = {n: tf.compat.v1.get_variable(n, initializer=v) for n, v in params.items()}
    logits = model.inference(variables, tf.constant(images))
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      graph = sess.run(logits)
  np.testing.assert_array_equal(eager, traced)
  np.testing.assert_array_equal(eager, graph)


@pytest.mark.float16
def test_fp16_compute_stays_close_to_fp32():
  params = model.initial_values(2)
  images = tf.random.stateless_normal([8, 24, 24, 3], seed=[3, 4])
  full = model.inference(params, images)
  half = model.inference(params, images, compute_dtype=tf.float16)
  assert half.dtype == tf.float32
  np.testing.assert_allclose(half.numpy(), full.numpy(), atol=2e-2)
