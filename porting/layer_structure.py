"""The TF1 towers' structure, read once from tower 0's forward ops, for porting.parting.

  structure(graph, variables)  the trainable variables from the loss down (by where tower 0
      first reads each), and for each the tensors used more than once between its layer and
      the next layer up (a tensor with k consumers gets its gradient as a sum of k terms),
      the convolutions' biases, and the variables read more than once
"""

from porting import graph_walks

MAX_SHARED = 3  # tensors named per variable: the nearest to its layer first


def structure(graph, variables, tower="tower_0/"):
  """{"order": [trainable variable names from the loss down], "shared": {name: [(tensor, k,
  [consumer op types])]}} of the TF1 graph's tower `tower` forward ops."""
  forward = [op for op in graph.get_operations() if op.name.startswith(tower) and
             graph_walks.forward(op, lambda name: False)]
  index = {op.name: i for i, op in enumerate(forward)}
  consumers = {}
  for op in forward:
    for t in op.inputs:
      consumers.setdefault(t.name, []).append(op)
  layer_of = {}  # variable -> the first forward op of the tower reading it (its layer)
  for op in forward:
    if op.type == "ReadVariableOp" or op.type == "Identity":
      source = op.inputs[0].op if op.inputs else None
      if source is not None and source.name in variables and source.name not in layer_of:
        layer_of[source.name] = op
  readers = {name: [c for t in op.outputs for c in consumers.get(t.name, [])]
             for name, op in layer_of.items()}
  firsts = {name: min((index[c.name] for c in ops), default=index[layer_of[name].name])
            for name, ops in readers.items()}
  order = sorted(firsts, key=lambda name: -firsts[name])
  layer_ops = set()
  for ops in readers.values():
    layer_ops.update(c.name for c in ops)
  shared = {name: _shared(readers[name], consumers, layer_ops) for name in order}
  return {"order": order, "shared": shared, "conv_biases": _conv_biases(forward, variables),
          "reads": _reads(forward, variables, consumers)}


def _reads(forward, variables, consumers):
  """{variable: k} of those read k > 1 times by ops of one type (a recurrent layer's kernel
  by each step's MatMul): the layer probes compare a variable's first read only."""
  counts = {}
  for op in forward:
    if op.type in ("ReadVariableOp", "Identity") and op.inputs and (
        op.inputs[0].op.name in variables):
      users = [u.type for t in op.outputs for u in consumers.get(t.name, [])
               if u.type not in ("ReadVariableOp", "Identity")]
      for kind in users:
        key = (op.inputs[0].op.name, kind)
        counts[key] = counts.get(key, 0) + 1
  found = {}
  for (name, _), k in counts.items():
    if k > 1:
      found[name] = max(found.get(name, 0), k)
  return found


CONVOLUTIONS = ("Conv2D", "Conv3D", "DepthwiseConv2dNative", "Conv2DBackpropInput")


def _conv_biases(forward, variables):
  """The variables added as a bias to a convolution's output (BiasAdd or Add of the
  convolution and the variable, in any order): the biases whose gradient oneDNN can fuse."""
  def behind(tensor):
    while tensor.op.type in ("Identity", "ReadVariableOp", "Cast") and tensor.op.inputs:
      tensor = tensor.op.inputs[0]
    return tensor.op
  found = []
  for op in forward:
    if op.type in ("BiasAdd", "Add", "AddV2") and len(op.inputs) == 2:
      ops = [behind(t) for t in op.inputs]
      names = [o.name for o in ops if o.name in variables]
      if names and any(o.type in CONVOLUTIONS for o in ops) and names[0] not in found:
        found.append(names[0])
  return found


def _shared(start, consumers, layer_ops):
  """The tensors used more than once reached forward from ops `start`, up to the ops that
  read another layer's variables."""
  found, seen, frontier = [], set(), list(start)
  own = {op.name for op in start}
  while frontier and len(found) < MAX_SHARED:
    op = frontier.pop(0)
    if op.name in seen or (op.name in layer_ops and op.name not in own):
      continue
    seen.add(op.name)
    for t in op.outputs:
      users = consumers.get(t.name, [])
      if len(users) > 1:
        types = [u.type for u in users]
        found.append((t.name, len(users), [f"{k} x{types.count(k)}" if types.count(k) > 1
                                           else k for k in sorted(set(types))]))
      frontier += users
  return found[:MAX_SHARED]
