"""Conversions check themselves: a Keras model whose layers sit in a plain Python list (which
Keras 3 tracks for model.weights but tf.train.Checkpoint does not reach; trainable variables
still get there through the optimizer's list of them, a frozen layer's do not) is one error
naming the variables, both ways, exit status 2 from the command line. Before, tf1_to_tf2 wrote a
checkpoint without them and tf2_to_tf1 wrote their initial values back as the run's."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import porting
from tests import helpers

v1 = tf.compat.v1
SIZE, UNITS, CLASSES = 4, 3, 2


def tower_loss(images, labels):
  x = tf.reshape(images, [-1, SIZE])
  for i, units in enumerate((UNITS, CLASSES)):
    with v1.variable_scope(f"dense{i}"):
      kernel = v1.get_variable("kernel", [x.shape[-1], units], trainable=i > 0)
      x = tf.matmul(x, kernel)
  return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                       logits=x))


class ListNet(keras.Model):
  """Its layers in a list: Keras's weights have them, a tf.train.Checkpoint reaches the
  trainable ones only through the optimizer, and the frozen first layer not at all."""

  def __init__(self):
    super().__init__(name="net")
    self.blocks = [keras.layers.Dense(UNITS, use_bias=False, name="dense0", trainable=False),
                   keras.layers.Dense(CLASSES, use_bias=False, name="dense1")]
    self(tf.zeros((1, SIZE)))

  def call(self, x):
    for block in self.blocks:
      x = block(x)
    return x


def replica_loss(model, images, labels, global_batch):
  del global_batch
  return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=labels, logits=model(images)))


def port():
  return porting.Port(tower_loss=tower_loss, build_model=ListNet, replica_loss=replica_loss,
                      tf1_optimizer=lambda s: v1.train.GradientDescentOptimizer(0.1),
                      tf2_optimizer=lambda: keras.optimizers.SGD(0.1),
                      gradient_reduction="mean")


def batches(replicas):
  rng = np.random.default_rng(0)
  return [(rng.normal(size=(2 * replicas, SIZE)).astype(np.float32),
           rng.integers(0, CLASSES, 2 * replicas).astype(np.int32))]


def _tf1_checkpoint(prefix):
  with tf.Graph().as_default() as graph:
    loss = tower_loss(tf.zeros((2, SIZE)), tf.zeros((2,), tf.int32))
    step = v1.train.get_or_create_global_step()
    v1.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
    with v1.Session(graph=graph) as sess:
      sess.run(v1.global_variables_initializer())
      return v1.train.Saver().save(sess, prefix, write_meta_graph=False)


def test_tf1_to_tf2_refuses_a_model_whose_layers_it_cannot_write(tmp_path):
  tf1 = _tf1_checkpoint(str(tmp_path / "tf1" / "model.ckpt"))
  with pytest.raises(porting.PortError) as error:
    porting.tf1_to_tf2(port(), tf1, str(tmp_path / "tf2" / "ckpt"), batches(1)[0])
  assert str(error.value).startswith(f"the TF2 checkpoint {tmp_path}/tf2/ckpt")
  assert "was written without net/dense0/kernel: tf.train.Checkpoint " \
         "does not reach them from the model" in str(error.value)
  assert os.listdir(tmp_path / "tf2") == []  # read back before anything is put there
  result = helpers.call("porting.__main__", "tf1_to_tf2",
                        "--port=tests.test_porting_conversion_checks:port",
                        "--batches=tests.test_porting_conversion_checks:batches", tf1,
                        str(tmp_path / "again" / "ckpt"))
  assert result.returncode == 2
  assert "was written without net/dense0/kernel" in result.stderr
  assert "Traceback" not in result.stderr


def test_tf2_to_tf1_refuses_to_write_initial_values_as_the_runs(tmp_path):
  model, optimizer = ListNet(), keras.optimizers.SGD(0.1)
  optimizer.build(model.trainable_variables)
  path = tf.train.Checkpoint(model=model, optimizer=optimizer).write(str(tmp_path / "ckpt"))
  with pytest.raises(porting.PortError, match=r"has no value for net/dense0/kernel: "
                     r"tf.train.Checkpoint does not reach them"):
    porting.tf2_to_tf1(port(), path, str(tmp_path / "tf1" / "model.ckpt"), batches(1)[0])
  assert not tf.io.gfile.exists(str(tmp_path / "tf1"))  # nothing written
