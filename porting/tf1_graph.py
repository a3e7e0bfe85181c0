"""The TF1 side's towers in its graph, as the script builds them: one per device under
`name_scope('tower_i')`, the variables reused after tower 0, each tower's loss as its
TowerCombination makes it (porting.combination), its gradients from `compute_gradients`, and
the UPDATE_OPS of the towers the combination runs. porting.tf1_towers combines and applies
them in a Session."""

import dataclasses
import inspect

import tensorflow as tf

from porting import graph_walks
from porting import random_ops
from porting import spec
from porting import tf1_layers
from porting import tf1_update
from porting import tf1_variables

v1 = tf.compat.v1


@dataclasses.dataclass
class Built:
  """losses: each tower's loss as the script hands it to compute_gradients; outputs: each
  tower's; tower_grads: each tower's [(gradient, variable)]; updates: the UPDATE_OPS the train
  op runs; parts: what tower 0 returns as its outputs (spec.loss_and_outputs); regularization:
  the REGULARIZATION_LOSSES collection once every tower is built."""
  losses: list
  outputs: list
  tower_grads: list
  updates: list
  parts: list
  regularization: list


def build(port, combination, devices, images, labels, source, optimizer):
  """Built towers of `port` on `devices`, fed `images` and `labels` split in N; `source`: the
  aligned random draws (random_ops.Source) or None."""
  n = len(devices)
  losses, outputs, tower_grads, updates, parts, scopes = [], [], [], [], [], []
  # The original's tower_loss(scope, images, labels) read its 'losses' collection by scope.
  takes_scope = next(iter(inspect.signature(port.tower_loss).parameters), None) == "scope"
  # The tower's index and N, where tower_loss asks for them by name (tf_cnn_benchmarks adds
  # its weight decay on the last device, x N).
  told = {"tower", "towers"} & set(inspect.signature(port.tower_loss).parameters)
  shared = tf1_variables.Shared(source)
  # A collection the script reads once every tower is built (model_deploy's
  # REGULARIZATION_LOSSES): those towers' gradients are taken after the last is built.
  after_all = combination.regularization != "in_tower_loss"
  for i, (device, x, y) in enumerate(zip(devices, tf.split(images, n), tf.split(labels, n))):
    if source is not None:
      source.tower = i
    with tf.device(device), tf.name_scope(f"tower_{i}") as scope, \
        random_ops.aligned(source), tf1_layers.routed():
      scopes.append(scope)
      with shared.tower_scope(i):  # get_variable reused after tower 0, tf.Variable too
        where = {k: v for k, v in (("tower", i), ("towers", n)) if k in told}
        loss, out = spec.loss_and_outputs(_tower(port, takes_scope, scope, x, y, where),
                                          parts)
      outputs.append(out)
      if _runs_updates(combination.update_ops, i, n):
        updates += v1.get_collection(v1.GraphKeys.UPDATE_OPS, scope)
      if not after_all:
        losses.append(tf1_update.tower_loss(combination, loss, i, n, []))
        tower_grads.append(_gradients(optimizer, losses[i]))
      else:
        losses.append(loss)
  regularization = v1.get_collection(v1.GraphKeys.REGULARIZATION_LOSSES)
  for i, (device, scope) in enumerate(zip(devices, scopes) if after_all else ()):
    with tf.device(device), tf.name_scope(scope):
      losses[i] = tf1_update.tower_loss(combination, losses[i], i, n, regularization)
      tower_grads.append(_gradients(optimizer, losses[i]))
  return Built(losses, outputs, tower_grads, updates, parts, regularization)


def regularized_towers(losses, regularization):
  """The towers whose losses (as the script hands them to compute_gradients) hold the
  REGULARIZATION_LOSSES collection, read from the graph: what the regularization causes count
  against. A term is the collection's, or a regularizer's op of that name (get_variable's and
  tf.layers' `<variable>/Regularizer/`): the collection a tower read while it was built can
  hold other ops of the same regularizers than the one read after."""
  terms = {t.op.name for t in regularization}
  return [i for i, loss in enumerate(losses) if any(
      name in terms or "/Regularizer/" in name for name in graph_walks.reached([loss.op]))]


def _tower(port, takes_scope, scope, images, labels, where):
  """The team's tower_loss on one tower's slice (`where`: the tower and towers it asks for);
  TensorFlow's Keras 3 stub for tf.compat.v1.layers (tf_keras missing) answers in one line
  naming the package."""
  try:
    return port.tower_loss(scope, images, labels, **where) if takes_scope else (
        port.tower_loss(images, labels, **where))
  except AttributeError as e:
    error = tf1_layers.translated(e)
    if error is None:
      raise
    raise error from None


def _runs_updates(update_ops, i, n):
  """Whether tower i's UPDATE_OPS run with the train op under `update_ops`."""
  return update_ops == "all_towers" or (
      update_ops != "none" and i == (n - 1 if update_ops == "last_tower" else 0))


def _gradients(optimizer, loss):
  return [(g, v) for g, v in optimizer.compute_gradients(loss) if g is not None]
