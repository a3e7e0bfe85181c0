"""A two-headed model whose loss adds three terms, for the porting kit's reading of the head
(porting.loss_terms): a dense trunk, a main and an auxiliary classifier, and an L2 penalty.

TF1 (`tower_loss`) adds the terms as Inception's and the slim scripts' `tf.losses.
get_total_loss` does, `tf.add_n([cross_entropy, 0.4 x auxiliary, penalty])`. TF2
(`replica_loss_of(order)`) adds the same three floats: `as_tf1` in TF1's order, `grouped`
as a port writes it, `cross_entropy + (0.4 x auxiliary + penalty)`: the same terms, the sum
rounded in another order. `aux_weight` moves the TF2 auxiliary weight (a term that parts).
"""

import numpy as np
import tensorflow as tf
import keras

from porting import Port

v1 = tf.compat.v1
SIZE, HIDDEN, CLASSES = 2, 8, 5
DEPTH = SIZE * SIZE * 3
AUX_WEIGHT, WEIGHT_DECAY, LEARNING_RATE = 0.4, 0.3, 0.1


def _dense(x, name, units, seed):
  w = v1.get_variable(f"{name}/kernel", [x.shape[-1], units],
                      initializer=v1.glorot_uniform_initializer(seed=seed))
  b = v1.get_variable(f"{name}/bias", [units], initializer=v1.zeros_initializer())
  return tf.matmul(x, w) + b, w


def _xent(labels, logits):
  return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                       logits=logits))


def tower_loss(images, labels):
  x, trunk = _dense(tf.reshape(images, [images.shape[0], -1]), "trunk", HIDDEN, 1)
  x = tf.nn.relu(x)
  (logits, _), (aux, _) = _dense(x, "main", CLASSES, 2), _dense(x, "aux", CLASSES, 3)
  penalty = WEIGHT_DECAY * tf.nn.l2_loss(trunk)
  loss = tf.add_n([_xent(labels, logits), AUX_WEIGHT * _xent(labels, aux), penalty])
  return loss, logits


class Net(keras.Model):

  def __init__(self):
    super().__init__()
    self.flat = keras.layers.Flatten()
    self.trunk = keras.layers.Dense(HIDDEN, activation="relu", name="trunk")
    self.main = keras.layers.Dense(CLASSES, name="main")
    self.aux = keras.layers.Dense(CLASSES, name="aux")
    self(tf.zeros((1, SIZE, SIZE, 3)))

  def call(self, images, training=False):
    x = self.trunk(self.flat(images))
    return self.main(x), self.aux(x)


def replica_loss_of(order="grouped", aux_weight=AUX_WEIGHT):
  def replica_loss(model, images, labels, global_batch_size):
    del global_batch_size  # gradient_reduction="mean": the tower's own loss
    logits, aux = model(images, training=True)
    xent, aux_term = _xent(labels, logits), aux_weight * _xent(labels, aux)
    penalty = WEIGHT_DECAY * tf.nn.l2_loss(model.trunk.kernel.value)
    loss = (tf.add_n([xent, aux_term, penalty]) if order == "as_tf1" else
            xent + (aux_term + penalty))
    return loss, logits
  return replica_loss


def port(order="grouped", aux_weight=AUX_WEIGHT):
  return Port(tower_loss=tower_loss,
              tf1_optimizer=lambda step: v1.train.GradientDescentOptimizer(LEARNING_RATE),
              build_model=Net, replica_loss=replica_loss_of(order, aux_weight),
              gradient_reduction="mean",
              tf2_optimizer=lambda: keras.optimizers.SGD(LEARNING_RATE))


def batches(replicas, per_replica=4, steps=2, seed=0):
  rng = np.random.default_rng(seed)
  n = replicas * per_replica
  return [(rng.normal(size=(n, SIZE, SIZE, 3)).astype(np.float32),
           rng.integers(0, CLASSES, size=n).astype(np.int32)) for _ in range(steps)]
