"""The order each side's forward pass first reads its variables in: the model's structure,
which variable pairing trusts over names Keras numbers and over creation order.

Keras names a layer it is not given a name for by a counter of the process (`conv2d_2` is
the third Conv2D built so far, in any model), and tf.layers numbers its own in the order the
tower calls them: the numbers agree only by chance. A port may create its layers in another
order than it calls them (a block's layers declared, or built, before the one that runs
first). The graph each side runs does not depend on either: tower 0's forward ops and replica
0's, in the order the code made them, read the model's variables layer by layer.
"""

from porting import graph_walks


def tf1(towers):
  """The TF1 model variables in the order tower 0's forward pass first reads them (those it
  does not read, a batch norm's moving statistics in training, are not listed)."""
  names = {v.op.name for v in towers.model_variables}
  ops = [op for op in towers.graph.get_operations()
         if graph_walks.forward(op, lambda name: not name.startswith("tower_0/"))]
  return graph_walks.first_reads(ops, lambda t: t.op.name if t.op.name in names else None)


def tf2(replicas, example):
  """The TF2 variables in the order replica 0's forward pass (traced for the global batch
  `example`) first reads them."""
  return graph_walks.first_reads(*replicas.forward_reads(example))


def of_sides(towers, replicas, example):
  """(TF1 order, TF2 order); a record's TF1 order is the one it recorded (None: a record
  written before records kept it)."""
  if not hasattr(towers, "graph"):
    recorded = towers.use_order()
    return None if recorded is None else (recorded, tf2(replicas, example))
  return tf1(towers), tf2(replicas, example)
