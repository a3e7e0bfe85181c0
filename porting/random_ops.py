"""Random ops drawn alike on both sides: tower i and replica i draw the same numbers, step by
step, so that a model with dropout (or noise layers) compares to the bit.

TF1 code draws from stateful ops (`tf.nn.dropout`, `tf.compat.v1.layers.dropout`,
`tf.random.uniform`), whose numbers come from a graph-level seed and a counter each Session run
moves; Keras 3 draws from stateless ops keyed by its SeedGenerator. Nothing makes the two
streams meet, so with dropout active a correct port is NOT EQUAL from step 0. TensorFlow's
`DeterministicRandomTestTool` aligns one device's stateful seeds; it knows neither towers nor
Keras 3's stateless draws.

While the kit builds each side (the TF1 towers' graph; the TF2 replica function's trace), every
uniform, normal and truncated-normal draw, stateful or stateless, through `tf.random`,
`tf.compat.v1` or `tf.nn.dropout`'s sampler, is replaced by a stateless draw keyed by
(seed, the draw's number c in its tower, step s, tower i):

  draw c of tower i at step s  ==  draw c of replica i at step s

so the port's Keras `Dropout` and the team's `tf.nn.dropout` keep the same units. A draw made
while a TF1 variable is initialized (a name scope `Initializer`) is left alone: the kit copies
the weights across before the first step. Each side records what it drew ({index: [(kind,
shape)]}); the report names the cause where the two lists differ or a random op escaped the
kit (a stateful op of another kind, a tf.random.Generator).
"""

import contextlib
import inspect
import sys
import threading

import numpy as np
import tensorflow as tf
from tensorflow.python.ops import random_ops as _random_ops
from tensorflow.python.ops import stateless_random_ops as _stateless_ops

MODES = ("aligned", "as_written")
SCOPE = "porting_draw"  # the name scope of every draw the kit makes
# The op types a random draw leaves in a graph (stateful and stateless).
RANDOM_TYPES = frozenset((
    "RandomUniform", "RandomUniformInt", "RandomStandardNormal", "TruncatedNormal",
    "RandomShuffle", "Multinomial", "RandomGammaGrad", "RandomGamma", "RandomPoisson",
    "RandomPoissonV2", "StatefulUniform", "StatefulUniformInt", "StatefulUniformFullInt",
    "StatefulStandardNormalV2", "StatefulTruncatedNormal", "StatelessRandomUniform",
    "StatelessRandomNormal", "StatelessTruncatedNormal", "StatelessRandomUniformInt",
    "StatelessRandomUniformV2", "StatelessRandomNormalV2", "StatelessTruncatedNormalV2",
    "StatelessRandomUniformIntV2", "StatelessRandomUniformFullIntV2"))

_DRAWS = {"uniform": _stateless_ops.stateless_random_uniform,
          "normal": _stateless_ops.stateless_random_normal,
          "truncated_normal": _stateless_ops.stateless_truncated_normal}
_ORIGINALS = {  # what the team's code may call -> the kind of draw it makes
    _random_ops.random_uniform: "uniform", _random_ops.random_normal: "normal",
    _random_ops.truncated_normal: "truncated_normal",
    _stateless_ops.stateless_random_uniform: "uniform",
    _stateless_ops.stateless_random_normal: "normal",
    _stateless_ops.stateless_truncated_normal: "truncated_normal"}
# Where those functions are reached from: TensorFlow's own modules (tf.nn.dropout's sampler
# looks its function up in random_ops at each call) and the public API modules, of which
# TensorFlow keeps several copies (`tf.compat.v1` and `tensorflow.compat.v1` are two module
# wrappers once tf_keras is imported): every module loaded under these names that holds one.
_PACKAGES = ("tensorflow", "tf_keras", "keras")
_places = [0, []]  # [len(sys.modules) when found, [(module, name)]]

_lock = threading.Lock()
_current = [None]  # the Source of the side being built (MirroredStrategy traces replicas in
# threads of its own, so this is process-wide, set and cleared under _lock's ownership)


def _static(shape):
  """A draw's shape as a tuple of ints, or None where it is known only when the step runs (a
  tensor, or a list holding one: [tf.shape(mu)[0], 2], a VAE's noise)."""
  if isinstance(shape, (list, tuple)) and all(isinstance(d, (int, np.integer)) for d in shape):
    return tuple(int(d) for d in shape)
  try:
    static = tf.get_static_value(tf.convert_to_tensor(shape))
  except (TypeError, ValueError):
    return None
  return None if static is None else tuple(int(d) for d in np.ravel(static))


class Source:
  """The draws of one side: `step` a scalar int64 tensor (the kit's step number), `index()`
  the tower or replica being built, `seed` an int."""

  def __init__(self, step, seed=0):
    self.step, self.seed = step, seed
    self.tower = None  # set by the TF1 builder; None: read the replica context
    self.drawn = {}  # {index: [(kind, shape)]}
    self.ops = {}  # {index: [the op of each draw in drawn]}
    # TF1's graph: each draw's number a placeholder_with_default, so that draws the step
    # never runs can be taken off the count after the graph is built (keep_reached).
    self.numbers = {}  # {index: [that placeholder, or None]}
    self.feed = {}  # {placeholder: the draw's number among those the step runs}

  def index(self):
    if self.tower is not None:
      return self.tower
    ctx = tf.distribute.get_replica_context()
    value = tf.get_static_value(ctx.replica_id_in_sync_group) if ctx is not None else None
    return 0 if value is None else int(value)

  def draw(self, kind, arguments):
    index = self.index()
    drawn = self.drawn.setdefault(index, [])
    shape = arguments["shape"]
    drawn.append((kind, _static(shape)))
    with tf.name_scope(SCOPE):
      number = len(drawn) - 1
      if self.tower is not None and not tf.executing_eagerly():
        number = tf.compat.v1.placeholder_with_default(tf.constant(number, tf.int64), [])
      self.numbers.setdefault(index, []).append(number if tf.is_tensor(number) else None)
      key = tf.stack([tf.constant(self.seed * 2 ** 20, tf.int64) + number,
                      tf.cast(self.step, tf.int64) * 4096 + index])
      extra = ({"minval": arguments["minval"], "maxval": arguments["maxval"]}
               if kind == "uniform" else
               {"mean": arguments["mean"], "stddev": arguments["stddev"]})
      out = _DRAWS[kind](shape, seed=key, dtype=arguments["dtype"], **extra)
    self.ops.setdefault(index, []).append(None if tf.executing_eagerly() else out.op)
    return out

  def forget(self, tensor):
    """Takes the draws `tensor` is computed from off the count of the tower being built (a
    tf.Variable's initial value: made while the towers build, not in the step), so the draws
    after it keep their numbers."""
    index = self.index()
    drawn, ops = self.drawn.get(index, []), self.ops.get(index, [])
    upstream, stack = set(), [tensor.op]
    while stack:
      op = stack.pop()
      if op.name not in upstream:
        upstream.add(op.name)
        stack += [t.op for t in op.inputs]
    self._keep(index, [i for i, op in enumerate(ops) if op is None or op.name not in upstream])

  def keep_reached(self, reached):
    """Takes the draws the step never runs (op names not in `reached`: a copy of the model
    beside the loss's, as tf.keras 1.15's Sequential built with an input_shape makes) off
    every tower's count; those it runs are fed their number among them."""
    for index, ops in self.ops.items():
      self._keep(index, [i for i, op in enumerate(ops) if op is None or op.name in reached])

  def _keep(self, index, keep):
    drawn, ops = self.drawn.get(index, []), self.ops.get(index, [])
    numbers = self.numbers.get(index, [None] * len(ops))
    for position, i in enumerate(keep):
      if numbers[i] is not None:
        self.feed[numbers[i]] = position
    drawn[:] = [drawn[i] for i in keep]
    ops[:] = [ops[i] for i in keep]
    numbers[:] = [numbers[i] for i in keep]


def _in_initializer():
  """A TF1 variable's initial value is being built (get_variable, tf.layers, tf.Variable)."""
  if tf.executing_eagerly():
    return False
  scope = tf.compat.v1.get_default_graph().get_name_scope()
  return "Initializer" in scope.split("/")


def _replacement(original, kind):
  signature = inspect.signature(original)

  def replaced(*args, **kwargs):
    source = _current[0]
    if source is None or _in_initializer():
      return original(*args, **kwargs)
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    return source.draw(kind, bound.arguments)
  replaced.__wrapped__ = original
  return replaced


# By id: a module may hold callables that cannot be hashed.
_REPLACEMENTS = {id(original): _replacement(original, kind)
                 for original, kind in _ORIGINALS.items()}


@contextlib.contextmanager
def aligned(source):
  """Every draw made inside is `source`'s (None: the code draws as written)."""
  if source is None:
    yield
    return
  with _lock:
    patched = []
    try:
      for module, name in _where():
        value = getattr(module, name)
        if id(value) in _REPLACEMENTS:
          setattr(module, name, _REPLACEMENTS[id(value)])
          patched.append((module, name, value))
      _current[0] = source
      yield source
    finally:
      _current[0] = None
      for module, name, value in reversed(patched):
        setattr(module, name, value)


def _where():
  """[(module, attribute)] holding a random function, found again when modules were loaded
  since (a scan of ~3,000 modules: ~20 ms)."""
  if _places[0] != len(sys.modules):
    found = []
    for key, module in list(sys.modules.items()):
      if not key.startswith(_PACKAGES):
        continue
      try:
        items = list(vars(module).items())
      except TypeError:
        continue
      found += [(module, name) for name, value in items if id(value) in _REPLACEMENTS]
    _places[:] = [len(sys.modules), found]
  return _places[1]


def escaped(graph_ops):
  """The names of random ops in `graph_ops` the kit did not draw (outside its name scope and
  outside variable initializers): randomness the two sides do not share."""
  return [op.name for op in graph_ops if op.type in RANDOM_TYPES and
          not any(_ours(part) for part in op.name.split("/")) and
          "Initializer" not in op.name.split("/")]


def _ours(scope):
  """Whether a name-scope part is the kit's draw scope: TensorFlow makes a second
  `porting_draw` in one scope unique as `porting_draw_1`, `porting_draw_2`, ..."""
  head, _, number = scope.rpartition("_")
  return scope == SCOPE or (head == SCOPE and number.isdigit())
