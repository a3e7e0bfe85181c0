"""What the TF1 towers' graph shows, for the diagnosis (Trace.facts): how the towers were
combined and whose updates the train op runs, where the regularization went, the layers from
the loss down, the random draws, the EMA's settings, a fused batch norm; and the layers'
settings, compared with the port's before a step (`settings`)."""

from porting import ema_settings
from porting import graph_walks
from porting import layer_settings
from porting import layer_structure
from porting import precision
from porting import random_ops
from porting import tf1_graph

VARIABLE_OPS = ("VarHandleOp", "VariableV2", "Variable")  # the ops a TF1 variable is


def read(graph, train_op, port, built, grads, regularization, source, ema):
  """The facts of `graph` (its train op `train_op`, built from `port` as tf1_graph.build
  returned `built`, `grads` the combined (gradient, variable) pairs, `regularization` the
  regularization losses, `source` the aligned draws or None, `ema` the EMA or None)."""
  towers, in_place = graph_walks.tower_updates(graph, train_op)
  combination = port.combination
  ops = graph.get_operations()
  return {"update_ops": combination.update_ops, "ema_order": port.ema_order,
          "combination": combination.record(),
          "regularized_towers": (tf1_graph.regularized_towers(built.losses, regularization)
                                 if regularization else None),
          "update_towers": towers, "in_place_updates": in_place,
          "structure": layer_structure.structure(graph, {v.op.name for _, v in grads}),
          "random_ops": port.random_ops,
          "random_draws": source.drawn if source is not None else {},
          "random_escaped": random_ops.escaped(ops),
          "ema": ema_settings.read(ema) if ema is not None else None,
          "outputs_parts": built.parts,
          "fused_batch_norm": any(op.type.startswith("FusedBatchNorm") for op in ops),
          "precision": precision.narrowest(ops)}


def settings(towers):
  """Tower 0's layer settings (layer_settings) of tf1_towers.Towers `towers`; the moving
  averages the train op runs; the regularization's gradients at the current weights (None:
  no REGULARIZATION_LOSSES)."""
  names = {v.op.name for v in towers.model_variables}
  trainable = set(towers.trainable)
  runs = graph_walks.reached([towers.train_op])
  ops = towers.graph.get_operations()
  # The layers as tower 0 builds them, those the step runs (not a copy it never reaches:
  # tf.keras 1.15's Sequential built with an input_shape makes one); the moving averages
  # from whichever towers' updates the train op runs (what it reaches decides).
  found = layer_settings.read(
      [op for op in ops if op.name in runs and
       graph_walks.forward(op, lambda name: not name.startswith("tower_0/"))],
      lambda t: t.op.name if t.op.type in VARIABLE_OPS and t.op.name in names else None,
      names - trainable, lambda op: op.name in runs,
      updates=[op for op in ops if graph_walks.forward(op, lambda name: False)])
  found.regularization = (towers.sess.run(towers.regularization) if towers.regularization
                          else None)
  return found
