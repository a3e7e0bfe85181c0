"""The TF2 side: the team's model and per-replica loss under MirroredStrategy.

Each replica takes its contiguous slice of the global batch (replica i: rows i*B .. (i+1)*B,
as tower i) and computes its loss and gradients on a tape. With the port's
gradient_reduction "sum" it hands them to the Keras optimizer, which sums them over the
replicas and updates the mirrored variables (the summed gradients are also all-reduced here,
in the same order, to be reported); with "mean" they are averaged as `average_gradients`
averages (`replica_mean`) and the optimizer's own sum is handed the average once
(`tf2_step.first_replica_only`); the step itself is porting.tf2_step's.
"""

import contextlib
import functools
import random

import tensorflow as tf

from porting import graph_walks
from porting import layer_settings
from porting import loss_scales
from porting import precision
from porting import random_ops
from porting import tf2_step
from porting.errors import PortError
from porting.trace import Lazy
from porting.trace import Step
from porting.trace import Trace
from porting.keras_variables import handles_of
from porting.keras_variables import numpy_of as _numpy
from porting.keras_variables import regularizer_gradients
from porting.keras_variables import slot_variables
from porting.keras_variables import tf_variable as _tf_variable
from porting.keras_variables import variable_name
from porting.keras_variables import variables_of as _variables


MODEL_SEED = 0  # Python's random state while build_model runs


def _arguments(batch, step):
  return tf.constant(batch[0]), tf.constant(batch[1]), tf.constant(step, tf.int64)


@contextlib.contextmanager
def _seeded_python_random():
  """Python's `random` seeded while the model and optimizer are made, its state given back
  after: Keras 3 draws an unseeded initializer's (and dropout's) seed from it, so without
  this the same port started from other weights in each run and in each call of one process
  (the same small port's loss 1 ULP apart at tower 0 in one run, at tower 1 in the next,
  nowhere in a third). A seed the port's code gives still wins."""
  state = random.getstate()
  random.seed(MODEL_SEED)
  try:
    yield
  finally:
    random.setstate(state)


class Replicas:
  """`port`'s TF2 side on `strategy` (its replicas' devices)."""

  def __init__(self, port, strategy):
    self.port, self.strategy = port, strategy
    with strategy.scope(), _seeded_python_random():
      self.model = port.build_model()
      self.optimizer = port.tf2_optimizer()
      if not all(hasattr(self.optimizer, a) for a in ("build", "apply_gradients", "variables")):
        raise PortError(f"tf2_optimizer() returned {type(self.optimizer).__name__}, not a "
                        "Keras optimizer (keras.optimizers.SGD, Adam, ...)")
      self.all = _variables(self.model)
      self.trainable = [v for v in self.all if v.trainable]
      self.optimizer.build(self.trainable)
      # The port's EMA, its shadows made now (eagerly, under the scope: a tf.function cannot).
      self.ema = port.tf2_ema(self.optimizer) if port.tf2_ema else None
      # What the EMA averages: the trainable variables, or what tf2_ema_variables says.
      self.averaged = (list(port.tf2_ema_variables(self.model)) if port.tf2_ema_variables
                       else self.trainable)
      if self.ema is not None:
        self.ema.apply(self._tf_averaged())
    self.scaled = loss_scales.tf2(self.optimizer) is not None
    self.slots = slot_variables(loss_scales.tf2_inner(self.optimizer), self.trainable)
    self.names = [variable_name(v) for v in self.trainable]
    self._step = tf.function(functools.partial(tf2_step.distributed_step, self))
    self.steps_run = 0
    # The aligned draws of the traced step (random_ops), and the random ops it holds that
    # the kit did not draw.
    self.source = random_ops.Source(None) if port.random_ops == "aligned" else None
    self.escaped = None
    self.precision = None  # the narrowest float dtype the traced step computes in
    self.error = None  # the kit's own line for a fault found while tracing
    self.sparse = set()  # the variables whose tape gradient is IndexedSlices (an embedding's)
    self.output_parts = []  # what replica 0 returns as its outputs (spec.loss_and_outputs)

  def variables(self):
    return [(variable_name(v), tuple(v.shape)) for v in self.all]

  def _tf_averaged(self):
    """The variables the EMA averages, as TensorFlow variables."""
    return [_tf_variable(v) for v in self.averaged]

  def _tf_trainable(self):
    """The trainable variables as TensorFlow variables (a Keras variable's `value`), which
    tf.train.ExponentialMovingAverage takes."""
    return [_tf_variable(v) for v in self.trainable]

  def trace(self):
    return Trace(self.variables(), self.names)

  def facts(self):
    """What the traced step shows (after a step), for the diagnosis."""
    return {"random_ops": self.port.random_ops,
            # A copy: a later trace (porting.parting's probe) draws into the same record.
            "random_draws": ({i: list(d) for i, d in self.source.drawn.items()}
                             if self.source else {}),
            "random_escaped": self.escaped or [],
            "precision": self.precision or precision.FLOAT32,
            "sparse_gradients": sorted(self.sparse), "outputs_parts": self.output_parts}

  def apart(self):
    """{variable: max |difference| of another replica's copy from replica 0's} of the
    variables whose copies the replicas hold apart (moving statistics each replica updates
    from its own batch); the report compares replica 0's, which the checkpoint saves."""
    out = {}
    for v in self.all:
      copies = [_numpy(c) for c in getattr(_tf_variable(v), "values", ())]
      spread = max((float(abs(c - copies[0]).max()) for c in copies[1:] if c.size), default=0)
      if spread:
        out[variable_name(v)] = spread
    return out

  def values(self):
    return {variable_name(v): _numpy(v) for v in self.all}

  def handles(self):
    """{id(a variable handle): the variable's name}, a mirrored variable's components too."""
    return handles_of(self.all)

  def _traced(self, args):
    """The step's graph for `args` (traced once, under the aligned draws)."""
    with random_ops.aligned(self.source), self._unwrapped():
      graph = self._step.get_concrete_function(*args).graph
    if self.escaped is None:
      self.escaped = random_ops.escaped(graph.get_operations())
      self.precision = precision.narrowest(graph.get_operations())
    return graph

  @contextlib.contextmanager
  def _unwrapped(self):
    """The kit's one line for a fault it found while tracing, not AutoGraph's wrapping."""
    try:
      yield
    except PortError:
      if self.error is None:
        raise
      raise PortError(self.error) from None

  def forward_reads(self, example):
    """(replica 0's forward ops in the step traced for the global batch `example`, in graph
    order; tensor -> the name of the variable it is the handle of, or None)."""
    graph = self._traced(_arguments(example, self.steps_run))
    handles = self.handles()
    captured = {id(internal): handles.get(id(external)) for external, internal in
                graph.captures}
    return ([op for op in graph.get_operations()
             if graph_walks.forward(op, lambda name: name.startswith("replica_"))],
            lambda t: captured.get(id(t)))

  def settings(self, example):
    """Replica 0's layer settings (layer_settings) in the step traced for the global batch
    `example`, before it runs; the regularizers' gradients at the current weights."""
    statistics = {variable_name(v) for v in self.all if not v.trainable}
    found = layer_settings.read(*self.forward_reads(example), statistics)
    found.regularization = regularizer_gradients(self.trainable) or None
    return found

  def step(self, images, labels):
    args = _arguments((images, labels), self.steps_run)
    self.steps_run += 1
    # Traced first (under the patch: a retrace for another batch shape draws aligned too);
    # the call under it as well. Not nested: the patch's lock is not re-entrant.
    self._traced(args)
    with random_ops.aligned(self.source):
      loss, outputs, summed, lr = self._step(*args)
    local = self.strategy.experimental_local_results
    losses = [_numpy(l) for l in local(loss)]
    outputs = ([_numpy(o) for o in local(outputs)] if outputs is not None
               else [None] * len(losses))
    run = self.steps_run
    stale = lambda: self.steps_run != run
    by_name = dict(zip(self.names, summed))
    gradients = Lazy(by_name, lambda n: _numpy(local(by_name[n])[0]))  # tensors: they stay
    averages = self.average_values()
    by_variable = {variable_name(v): v for v in self.all}
    weights = Lazy(by_variable, lambda n: _numpy(by_variable[n]), stale)
    slots = Lazy(self.slots, lambda key: _numpy(self.slots[key]), stale)
    return Step(losses, outputs, gradients, float(_numpy(local(lr)[0])), weights, slots,
                averages=averages)

  def assign_averages(self, values):
    """Sets the EMA shadow of each averaged variable named in `values` ({TF2 name: array})."""
    if self.ema is None:
      return
    for v, shadow in zip(self.averaged, self.average_variables()):
      if variable_name(v) in values:
        shadow.assign(values[variable_name(v)])

  def average_variables(self):
    """The EMA shadows, in the order of the averaged variables (what a checkpoint keeps)."""
    return [self.ema.average(v) for v in self._tf_averaged()]

  def average_values(self):
    """{TF2 name: its moving average's value}; {} without an EMA."""
    if self.ema is None:
      return {}
    return {variable_name(v): _numpy(a)
            for v, a in zip(self.averaged, self.average_variables())}

  def assign(self, values):
    for v in self.all:
      v.assign(values[variable_name(v)])
