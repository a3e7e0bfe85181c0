"""The original tutorial's own tower against this project's pair, for the porting kit.

The TF1 side is `tower_loss(scope, images, labels)` of the TensorFlow Authors'
`cifar10_multi_gpu_train.py`, imported unmodified from the folder TF1_TUTORIAL_DIR names (the
tutorial's `tutorials/image/cifar10` of tensorflow/models, which this project does not carry):
its `cifar10.inference` (variables on /cpu:0, the 'losses' collection, a reshape to
FLAGS.batch_size) and its optimizer, learning rate, float32 global step and moving averages as
its train() builds them. The TF2 side is this project's model and loss (cifar10.model,
cifar10.losses), as strategies/ runs them.

The module imports only what TensorFlow 1.15 has: the tutorial where the TF1 side is built
(1.15 records it), this project's model where the TF2 side is (here).
"""

import importlib
import os
import sys

import numpy as np
import tensorflow as tf

import porting

v1 = tf.compat.v1
TUTORIAL = os.environ.get("TF1_TUTORIAL_DIR")
# The tutorial's FLAGS.batch_size (its default): its reshape is of that many rows a tower.
PER_TOWER = 128
IMAGE, CLASSES = 24, 10
# The tutorial's numbers (cifar10.py): an epoch of 50000, decay every 350 epochs by 0.1 from
# 0.1, weights averaged at 0.9999.
DECAY_STEPS = int(50000 / PER_TOWER * 350.0)


def _original():
  if not TUTORIAL or not os.path.isfile(os.path.join(TUTORIAL, "cifar10_multi_gpu_train.py")):
    raise porting.PortError("TF1_TUTORIAL_DIR must name the tutorial's folder (with "
                            "cifar10_multi_gpu_train.py, cifar10.py and cifar10_input.py)")
  if TUTORIAL not in sys.path:
    sys.path.insert(0, TUTORIAL)
  return importlib.import_module("cifar10_multi_gpu_train")


def tower_loss(scope, images, labels):
  return _original().tower_loss(scope, images, labels)


def _global_step():
  # train()'s own: a float32 variable, not get_or_create_global_step's int64.
  return v1.get_variable("global_step", [], initializer=v1.constant_initializer(0),
                         trainable=False)


def _tf1_optimizer(global_step):
  rate = v1.train.exponential_decay(0.1, global_step, DECAY_STEPS, 0.1, staircase=True)
  return v1.train.GradientDescentOptimizer(rate)


def _build_model():
  from cifar10 import model  # pylint: disable=g-import-not-at-top  # this side only: TF 2.21

  class Params(tf.Module):

    def __init__(self):
      super().__init__(name=None)
      self.variables_by_name = {name: tf.Variable(value, name=name) for name, value in
                                model.initial_values(0).items()}
  return Params()


def _replica_loss(params, images, labels, global_batch_size):
  del global_batch_size  # the tower's own loss: gradient_reduction="mean"
  from cifar10 import losses  # pylint: disable=g-import-not-at-top
  from cifar10 import model  # pylint: disable=g-import-not-at-top
  weights = params.variables_by_name
  return losses.tower_loss(model.inference(weights, images), labels, weights)


def _tf2_optimizer():
  import keras  # pylint: disable=g-import-not-at-top
  return keras.optimizers.SGD(keras.optimizers.schedules.ExponentialDecay(
      0.1, DECAY_STEPS, 0.1, staircase=True))


def port():
  return porting.Port(
      tower_loss=tower_loss, tf1_optimizer=_tf1_optimizer, build_model=_build_model,
      replica_loss=_replica_loss, tf2_optimizer=_tf2_optimizer, gradient_reduction="mean",
      tf1_global_step=_global_step,
      # train() groups the averages' update with the weights' (tf.group, no order between
      # them: most of its runs read the weights before their update). The kit's TF2 side
      # averages after the update, as strategies/ does with --ema_reads=updated; the TF1 side
      # is held to that one order, so the averages compare to the bit.
      tf1_ema=lambda step: v1.train.ExponentialMovingAverage(0.9999, step),
      tf2_ema=lambda optimizer: tf.train.ExponentialMovingAverage(
          0.9999, num_updates=optimizer.iterations),
      ema_order="after_update")


def batches(replicas, steps=2, seed=0):
  rng = np.random.RandomState(seed)  # numpy 1.18 (TensorFlow 1.15's) has no default_rng
  n = replicas * PER_TOWER
  return [(rng.normal(size=(n, IMAGE, IMAGE, 3)).astype(np.float32),
           rng.randint(0, CLASSES, size=n).astype(np.int32)) for _ in range(steps)]
