"""The TF1 side: the team's tower function as towers in a graph, run in a Session.

As the script built it: its towers (porting.tf1_graph: one per device, each tower's loss as
its TowerCombination makes it, its gradients), their gradients combined as the combination
says (`average_gradients`, or model_deploy's sum), the team's UPDATE_OPS with the train op,
`apply_gradients` with the global step. The global batch is fed through a placeholder and cut
into N contiguous slices.
"""

import numpy as np
import tensorflow as tf

from porting import adam_steps
from porting import checkpoint_extras
from porting import graph_walks
from porting import layer_probes
from porting import loss_terms
from porting import loss_scales
from porting import mixed_precision_rewrite
from porting import random_ops
from porting import tf1_facts
from porting import tf1_graph
from porting import tf1_state
from porting import tf1_update
from porting.errors import PortError
from porting.trace import Lazy
from porting.trace import chunked
from porting.trace import Step
from porting.trace import Trace

v1 = tf.compat.v1
GRAPH_SEED = 0


class Towers(tf1_state.State):
  """The graph and Session of `port`'s TF1 side on `devices`, fed global batches shaped like
  `example` ((images, labels) numpy arrays)."""

  def __init__(self, port, devices, example, session_config):
    # The team's code may switch grappler's mixed-precision rewrite on for the process: its
    # Session keeps it, the port and later runs do not (mixed_precision_rewrite).
    with mixed_precision_rewrite.kept():
      self._build(port, devices, example, session_config)
    precision, note = mixed_precision_rewrite.said(
        mixed_precision_rewrite.applied(self.sess), devices)
    self.facts["precision"] = precision or self.facts["precision"]
    if note:
      self.facts["mixed_precision_rewrite"] = note

  def _build(self, port, devices, example, session_config):
    self.graph = tf.Graph()
    with self.graph.as_default():
      # A graph-level seed: an initializer or draw the team left unseeded (the tutorial's
      # truncated_normal_initializer(stddev=...)) then draws the same numbers in every run, so
      # the same port compares or records the same bits each time (without it each run
      # started from other weights, and a near-tie in a max pool could part the sides in one
      # run and not the next). A seed the team's code sets in its towers still wins.
      v1.set_random_seed(GRAPH_SEED)
      images, labels = self._feeds(example)
      source = (random_ops.Source(self.step_number) if port.random_ops == "aligned"
                else None)
      optimizer = self._optimizer(port)
      before = set(v1.global_variables())
      combination = self.combination = port.combination
      built = tf1_graph.build(port, combination, devices, images, labels, source, optimizer)
      self.losses, self.outputs = built.losses, built.outputs
      # Not Keras 3's SeedGenerator state (tf.keras layers in the towers under TF 2.16+: a
      # Dropout's random stream, which the kit's aligned draws replace and a port's Keras
      # model does not count among its weights either).
      self.model_variables = [v for v in v1.global_variables() if v not in before and
                              not _name(v).endswith("seed_generator_state")]
      if not self.model_variables:
        raise PortError("tower_loss created no variable (build them with "
                        "tf.compat.v1.get_variable or tf.compat.v1.layers)")
      grads = tf1_update.combine(combination, built.tower_grads)
      self.gradients = {_name(v): g for g, v in grads}
      self.learning_rate = tf1_update.rate(self.optimizer)
      self.trainable = [_name(v) for _, v in grads]
      ema = self._train_op(port, grads, built.updates, optimizer)
      if source is not None:  # a draw the step never runs is not one of its draws
        source.keep_reached(graph_walks.reached(
            [self.train_op] + [t.op for t in tf.nest.flatten([self.losses, self.outputs])
                               if tf.is_tensor(t)]))
      self.draw_feed = source.feed if source is not None else {}
      inner = self.optimizer
      self.slots = {(_name(v), kind): inner.get_slot(v, kind)
                    for _, v in grads for kind in inner.get_slot_names()
                    if inner.get_slot(v, kind) is not None}
      self.beta_powers = adam_steps.beta_powers(inner)
      self._regularization(built.regularization, [v for _, v in grads])
      self.facts = tf1_facts.read(self.graph, self.train_op, port, built, grads,
                                  built.regularization, source, ema)
      # Each layer's input and output in tower 0, and its loss's terms, fetched only to say
      # where the forward passes part (probe).
      self.probes = layer_probes.probes(
          [op for op in self.graph.get_operations()
           if graph_walks.forward(op, lambda name: not name.startswith("tower_0/"))],
          lambda t: t.op.name if t.op.type in tf1_facts.VARIABLE_OPS else None, set(self.trainable))
      self.loss_terms = loss_terms.split(self.losses[0])
      init = self._assignments()
    self.graph.finalize()
    self.sess = v1.Session(graph=self.graph, config=session_config)
    self.sess.run(init)

  def _feeds(self, example):
    """The global batch's placeholders, shaped like `example`, and the kit's step number."""
    # Static shapes, the global batch's: TF1 code reads its batch size from them
    # (`images.get_shape()[0]`, a reshape to [batch, -1]) as it read its fixed-size queues'.
    images = v1.placeholder(example[0].dtype, example[0].shape, "images")
    labels = v1.placeholder(example[1].dtype, example[1].shape, "labels")
    self.feeds = (images, labels)
    # The kit's step number, which keys the aligned random draws (random_ops).
    self.step_number = v1.placeholder_with_default(tf.constant(0, tf.int64), [], "step")
    self.steps_run = 0
    return images, labels

  def _optimizer(self, port):
    """The team's optimizer on its global step (a loss scale's, which runs the step); the
    optimizer the kit reads is the one it wraps."""
    self.global_step = (port.tf1_global_step() if port.tf1_global_step
                        else v1.train.get_or_create_global_step())
    optimizer = port.tf1_optimizer(self.global_step)
    self.scaled_optimizer = optimizer
    self.optimizer = inner = loss_scales.tf1_inner(optimizer)
    self.optimizer_class = type(inner).__name__
    self.rate_variable = checkpoint_extras.rate_variable(inner)
    return optimizer

  def _train_op(self, port, grads, updates, optimizer):
    """The train op: the combined gradients as tf1_gradients makes them, applied after the
    towers' updates, with the EMA where ema_order puts it; returns the EMA (or None)."""
    trainable = [v for _, v in grads]
    ema = port.tf1_ema(self.global_step) if port.tf1_ema else None
    # What the EMA averages: the trainable variables, or what tf1_ema_variables says
    # (Inception: + tf.moving_average_variables()).
    averaged = (list(port.tf1_ema_variables(trainable)) if port.tf1_ema_variables
                else trainable)
    if ema is not None and port.ema_order == "before_update":
      updates = updates + [ema.apply(averaged)]
    applied = tf1_update.applied(port, grads)
    # What tf1_gradients made of the combined gradients, read at step 0 (check.py).
    self.transformed = ({_name(v): g for g, v in applied}
                        if port.tf1_gradients is not None else None)
    with tf.control_dependencies(updates):
      self.train_op = optimizer.apply_gradients(applied, global_step=self.global_step)
    if ema is not None and port.ema_order == "after_update":
      with tf.control_dependencies([self.train_op]):
        self.train_op = ema.apply(averaged)
    self.averages = {_name(v): ema.average(v) for v in averaged} if ema else {}
    return ema

  def _regularization(self, regularization, variables):
    """The regularization losses' sum and each variable's gradient of it alone."""
    self.regularization = {}
    self.regularization_loss = tf.add_n(regularization) if regularization else None
    if regularization:
      for v, g in zip(variables, tf.gradients(tf.add_n(regularization), variables)):
        if g is not None:
          self.regularization[_name(v)] = g

  def _assignments(self):
    """Every variable's setter, the Saver and the initializer, made before the graph is
    finalized; returns the initializer."""
    self.all_variables = v1.global_variables()  # model, slots, global step
    self.setters = {}
    for v in self.all_variables:
      value = v1.placeholder(v.dtype.base_dtype, v.shape)
      self.setters[_name(v)] = (value, v.assign(value))
    # A checkpoint a TF1 Saver restores: TF1 names, and the TF1 team's own Saver reads it.
    self.saver = v1.train.Saver(self.all_variables)
    # As a tf.train.Scaffold (Estimator, MonitoredSession) initializes: the feature columns'
    # vocabulary tables too (a vocabulary_list column's lookup, else "Table not
    # initialized"), and local variables.
    return tf.group(v1.global_variables_initializer(), v1.local_variables_initializer(),
                    v1.tables_initializer())

  def settings(self):
    """Tower 0's layer settings, the moving averages the train op runs, the regularization's
    gradients at the current weights (tf1_facts.settings)."""
    return tf1_facts.settings(self)

  def rate(self):
    """The learning rate at the current global step."""
    return float(self.sess.run(self.learning_rate))

  def global_step_now(self):
    return int(self.sess.run(self.global_step))

  def trace(self):
    return Trace(self.variables(), self.trainable, facts=dict(self.facts))

  def step(self, images, labels):
    if images.shape != tuple(self.feeds[0].shape) or labels.shape != tuple(self.feeds[1].shape):
      raise PortError(f"step {self.steps_run}'s batch is {list(images.shape)} and "
                      f"{list(labels.shape)}, step 0's {self.feeds[0].shape.as_list()} and "
                      f"{self.feeds[1].shape.as_list()}: the TF1 towers are built for one "
                      "global batch shape (static, as TF1 code reads it); give every step "
                      "the same")
    feed = {self.feeds[0]: images, self.feeds[1]: labels, self.step_number: self.steps_run,
            **self.draw_feed}
    self.steps_run += 1
    # Read first, from the weights before the step: beside the train op they could race
    # with its updates.
    lr, regularization = self.sess.run([self.learning_rate, self.regularization], feed)
    if self.steps_run == 1:  # step 0's: what the causes measure the towers' arithmetic by
      fetches = {"regularization_loss": self.regularization_loss,
                 "transformed": self.transformed}
      self.step0 = self.sess.run({k: f for k, f in fetches.items() if f is not None}, feed)
    fetches = {"train": self.train_op, "losses": self.losses, "gradients": self.gradients,
               "outputs": [o for o in self.outputs if o is not None]}
    out = self.sess.run(fetches, feed)
    weights = {_name(v): v for v in self.model_variables}
    # Read when the report compares them (one at a time), before the next step.
    run = self.steps_run
    stale = lambda: self.steps_run != run
    after = Lazy(weights, chunked(self.sess.run, weights), stale)
    slots = Lazy(self.slots, chunked(self.sess.run, self.slots), stale)
    averages = self.sess.run(self.averages)
    outputs = out["outputs"] if out["outputs"] else [None] * len(self.losses)
    return Step([np.asarray(x) for x in out["losses"]], outputs, out["gradients"],
                float(lr), after, slots, regularization, averages)

  def close(self):
    self.sess.close()


def _name(variable):
  return variable.op.name  # 'conv1/kernel', without ':0'
