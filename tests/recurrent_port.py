"""A model for the porting kit in the style of the TF1 PTB language model (tensorflow/models'
ptb_word_lm.py), small: an embedding (its gradient is IndexedSlices), a BasicLSTMCell of
`tf.compat.v1.nn.rnn_cell` unrolled over the words (its output used by the next step and
the head: a gradient summed from two terms), softmax weights, and the script's update:
gradient descent on `clip_by_global_norm` of the gradients, at a rate held in a variable
(`lr`, which the script assigns each epoch).

`recurrent=False` is the embedding and head alone: no sum of gradient terms, so the two
sides' gradients are the same bits and only the update can part them.

The faithful port clips by the global norm (Keras's `global_clipnorm`); `fault="clipnorm"`
clips each variable by its own norm (Keras's `clipnorm`), a slip teams make, and
`fault="forget_bias"` leaves out BasicLSTMCell's forget bias of 1.
"""

import numpy as np
import tensorflow as tf
import keras

from porting import Port

v1 = tf.compat.v1
VOCAB, HIDDEN, WORDS = 16, 6, 4
RATE, CLIP = 1.0, 0.05


def tower_loss(words, targets, recurrent=True):
  """(the mean cross-entropy of the next word, logits [batch, WORDS, VOCAB])."""
  batch = words.get_shape().as_list()[0]
  init = v1.random_uniform_initializer(-0.5, 0.5, seed=1)
  with v1.variable_scope("Model", initializer=init):
    embedding = v1.get_variable("embedding", [VOCAB, HIDDEN])
    inputs = tf.nn.embedding_lookup(embedding, words)
    if recurrent:
      cell = v1.nn.rnn_cell.BasicLSTMCell(HIDDEN)
      state, outputs = cell.zero_state(batch, tf.float32), []
      with v1.variable_scope("RNN"):
        for t in range(WORDS):
          if t:
            v1.get_variable_scope().reuse_variables()
          output, state = cell(inputs[:, t, :], state)
          outputs.append(output)
      inputs = tf.stack(outputs, 1)
    softmax_w = v1.get_variable("softmax_w", [HIDDEN, VOCAB])
    softmax_b = v1.get_variable("softmax_b", [VOCAB], initializer=v1.zeros_initializer())
    logits = tf.reshape(v1.nn.xw_plus_b(tf.reshape(inputs, [-1, HIDDEN]), softmax_w,
                                        softmax_b), [batch, WORDS, VOCAB])
  loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=targets,
                                                                       logits=logits))
  return loss, logits


class ClippedGradientDescent(v1.train.GradientDescentOptimizer):
  """The script's `clip_by_global_norm` before `apply_gradients`, where a team whose
  training loop the kit builds puts it."""

  def apply_gradients(self, grads_and_vars, global_step=None, name=None):
    grads, variables = zip(*grads_and_vars)
    clipped, _ = tf.clip_by_global_norm(grads, CLIP)
    return super().apply_gradients(zip(clipped, variables), global_step, name)


def tf1_optimizer(global_step, clipped=True):
  del global_step
  rate = v1.Variable(RATE, trainable=False, name="lr")  # the script's assign_lr target
  return (ClippedGradientDescent if clipped else v1.train.GradientDescentOptimizer)(rate)


class Cell(keras.layers.Layer):
  """TF1's BasicLSTMCell: one kernel over [input, h], gates i, j, f, o, forget bias 1 (0:
  the slip of a port that leaves BasicLSTMCell's default out)."""

  def __init__(self, forget_bias=1.0, **kwargs):
    super().__init__(**kwargs)
    self.forget_bias = forget_bias

  def build(self, input_shape):
    self.kernel = self.add_weight(name="kernel", shape=(2 * HIDDEN, 4 * HIDDEN))
    self.bias = self.add_weight(name="bias", shape=(4 * HIDDEN,), initializer="zeros")

  def call(self, x, state):
    c, h = state
    i, j, f, o = tf.split(tf.nn.bias_add(tf.matmul(tf.concat([x, h], 1), self.kernel),
                                         self.bias), 4, axis=1)
    c = c * tf.sigmoid(f + self.forget_bias) + tf.sigmoid(i) * tf.tanh(j)
    return tf.tanh(c) * tf.sigmoid(o), (c, tf.tanh(c) * tf.sigmoid(o))


class LanguageModel(keras.Model):

  def __init__(self, recurrent=True, forget_bias=1.0):
    super().__init__()
    self.embedding = keras.layers.Embedding(VOCAB, HIDDEN, name="embedding")
    self.embedding.build((None, WORDS))
    self.cell = Cell(forget_bias, name="cell") if recurrent else None
    if recurrent:
      self.cell.build((None, HIDDEN))
    self.softmax_w = self.add_weight(name="softmax_w", shape=(HIDDEN, VOCAB))
    self.softmax_b = self.add_weight(name="softmax_b", shape=(VOCAB,), initializer="zeros")

  def call(self, words):
    x = self.embedding(words)
    if self.cell is not None:
      zeros = tf.zeros([tf.shape(words)[0], HIDDEN])
      state, outputs = (zeros, zeros), []
      for t in range(WORDS):
        output, state = self.cell(x[:, t, :], state)
        outputs.append(output)
      x = tf.stack(outputs, 1)
    logits = tf.nn.bias_add(tf.matmul(tf.reshape(x, [-1, HIDDEN]), self.softmax_w),
                            self.softmax_b)
    return tf.reshape(logits, [-1, WORDS, VOCAB])


def _mean_loss(model, words, targets, global_batch):
  del global_batch
  logits = model(words)
  return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=targets, logits=logits)), logits


def _summed_loss(model, words, targets, global_batch):
  """TF2's idiom: each replica's share of the global batch's mean (gradient_reduction "sum")."""
  logits = model(words)
  mean = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=targets,
                                                                       logits=logits))
  share = tf.cast(tf.shape(words)[0], tf.float32) / tf.cast(global_batch, tf.float32)
  return mean * share, logits


def clip_by_global_norm(grads_and_vars):
  """The script's own lines between tf.gradients and apply_gradients (Port.tf1_gradients)."""
  grads, variables = zip(*grads_and_vars)
  clipped, _ = tf.clip_by_global_norm(grads, CLIP)
  return list(zip(clipped, variables))


def port(fault=None, recurrent=True, clipped=True, reduction="mean"):
  clip = {} if not clipped else (
      {"clipnorm": CLIP} if fault == "clipnorm" else {"global_clipnorm": CLIP})
  return Port(tower_loss=lambda x, y: tower_loss(x, y, recurrent),
              tf1_optimizer=lambda step: tf1_optimizer(step, clipped),
              build_model=lambda: LanguageModel(recurrent,
                                                0.0 if fault == "forget_bias" else 1.0),
              replica_loss=_mean_loss if reduction == "mean" else _summed_loss,
              tf2_optimizer=lambda: keras.optimizers.SGD(RATE, **clip),
              gradient_reduction=reduction)


def batches(replicas, steps=2, repeated=True, per_replica=3):
  """Word ids and the next words; `repeated=False`: no id twice within a step's inputs."""
  rng = np.random.default_rng(0)
  n = replicas * per_replica
  out = []
  for _ in range(steps):
    stream = (rng.integers(0, VOCAB, (n, WORDS + 1)) if repeated else
              np.concatenate([rng.permutation(VOCAB)[:n * WORDS].reshape(n, WORDS),
                              rng.integers(0, VOCAB, (n, 1))], 1)).astype(np.int32)
    out.append((stream[:, :-1].copy(), stream[:, 1:].copy()))
  return out
