"""What the TF1 towers' graph shows, for the diagnosis (Trace.facts): how the towers were
combined and whose updates the train op runs, where the regularization went, the layers from
the loss down, the random draws, the EMA's settings, a fused batch norm."""

from porting import ema_settings
from porting import graph_walks
from porting import layer_structure
from porting import random_ops
from porting import tf1_graph


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
          "fused_batch_norm": any(op.type.startswith("FusedBatchNorm") for op in ops)}
