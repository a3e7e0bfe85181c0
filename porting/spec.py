"""What a team hands the kit: its TF1 tower code and its TF2 port, as functions.

  port = porting.Port(
      tower_loss=tower_loss,                 # TF1, as written: (images, labels) -> loss
      tf1_optimizer=lambda step: tf.compat.v1.train.MomentumOptimizer(0.1, 0.9),
      build_model=lambda: MyKerasModel(),    # TF2: built under the strategy's scope
      replica_loss=replica_loss,             # TF2: (model, images, labels, global_batch) -> loss
      tf2_optimizer=lambda: tf.keras.optimizers.SGD(0.1, momentum=0.9))
"""

import dataclasses
from typing import Callable, Optional

import tensorflow as tf

from porting import combination as combinations
from porting.errors import PortError

UPDATE_OPS = combinations.UPDATE_OPS
GRADIENT_REDUCTIONS = ("sum", "mean")
EMA_ORDERS = ("after_update", "before_update")
RANDOM_OPS = ("aligned", "as_written")


@dataclasses.dataclass
class Port:
  """A TF1 tower model and its TF2 port.

  tower_loss(images, labels) -> loss, or (loss, outputs): one tower's loss, built in a graph
    with `tf.compat.v1.get_variable` / `tf.compat.v1.layers` as the team wrote it; the kit
    calls it once per tower under `name_scope('tower_i')`, reusing the variables after tower 0,
    on that tower's device. Written as the original's `tower_loss(scope, images, labels)` (a
    first parameter named `scope`), it gets that name scope, for `get_collection(.., scope)`;
    with keyword parameters `tower` and `towers`, the tower's index and N (a script that adds
    a term on one device, as tf_cnn_benchmarks adds its weight decay, N x on the last).
  tf1_optimizer(global_step) -> a tf.compat.v1.train.Optimizer (its learning rate may decay
    with global_step; the kit passes global_step to its apply_gradients, which increments it
    once per step as tf.compat.v1.train's optimizers do: an optimizer of the team's own that
    ignores it, as BERT's AdamWeightDecayOptimizer does, leaves it where it is, and the
    report says so).
  build_model() -> the TF2 model (a Keras model or layer, or a tf.Module); called under the
    strategy's scope, so its variables are mirrored.
  replica_loss(model, images, labels, global_batch_size) -> loss, or (loss, outputs): one
    replica's loss, scaled as `gradient_reduction` says. On both sides `outputs` is a tensor,
    or a list, tuple or dict of tensors of any shapes (a segmentation's logits beside a
    classifier's scores), compared as one, flattened in tf.nest's order.
  tf2_optimizer() -> a Keras optimizer.
  gradient_reduction: how the replicas' gradients become one. "sum" (TF2's idiom): the loss
    is the sum over the replica's examples divided by the global batch
    (tf.nn.compute_average_loss) plus 1/N of the regularization, and the Keras optimizer sums
    the replicas' gradients itself; where N is not a power of two this rounds differently
    from the towers' means. "mean": the loss is the tower's own (the mean over the replica's
    examples plus the whole regularization), and the kit averages the gradients as
    `average_gradients` does (the sum in replica order, then a true division by N) and hands
    the average to the optimizer once, in cross-replica context: the towers' divisions at
    every N.
  tf1_towers: how the TF1 script turns its towers into one update (porting.combination:
    each tower's loss as written or divided by N, where the regularization is added, the
    gradients' mean or sum, whose UPDATE_OPS run): porting.AVERAGE_GRADIENTS (the default,
    the tutorial's towers), porting.MODEL_DEPLOY (slim's clones), porting.replicate_model_fn(
    loss_reduction), porting.SYNC_REPLICAS, porting.HOROVOD, or a TowerCombination of the
    script's own. The kit runs that arithmetic and compares each tower's loss with its
    replica's on the scale each side defines.
  update_ops: which towers' UPDATE_OPS (batch-norm moving statistics) the TF1 code runs with
    its train op: "first_tower" (`get_collection(UPDATE_OPS, scope)` of tower 0, as the
    multi-GPU tutorials did), "last_tower" (the scope the loop left last, as Inception's
    inception_train.py kept), "all_towers" (an Estimator model_fn's unscoped
    `get_collection(UPDATE_OPS)` under replicate_model_fn) or "none" (a train op built
    without them, as a model_fn that leaves out their control dependency: TF1's moving
    statistics never move, which the kit then says before a step runs). None: tf1_towers'.
  variable_map: {TF1 name: TF2 name} for variables the kit cannot pair by itself; {TF1 name:
    None} leaves a variable of the TF1 code's own out (the report names it).
  tf1_ema(global_step) -> a tf.compat.v1.train.ExponentialMovingAverage of the trainable
    variables, and tf2_ema(optimizer) -> a tf.train.ExponentialMovingAverage (its num_updates
    typically `optimizer.iterations`): optional, both or neither. TF2 applies it after the
    optimizer's update; TF1 where `ema_order` says: "after_update" (a control dependency on
    the update) or "before_update" (the original tutorial's grouped train op, which in most of
    its runs read the weights before the update).
  tf1_ema_variables(trainable) -> the variables tf1_ema averages (None: `trainable`, the
    trainable variables; Inception's `trainable + tf.compat.v1.moving_average_variables()`
    averages the batch norms' moving statistics too), and tf2_ema_variables(model) -> the
    port's (None: its trainable variables). Both sides must average the same variables.
  tf1_gradients(grads_and_vars) -> the [(gradient, variable)] the TF1 script hands
    apply_gradients, from the towers' averaged ones (its `tf.clip_by_global_norm`, as the PTB
    and BERT scripts clip between tf.gradients and apply_gradients); None: as they are. The
    report compares the gradients before it, as it does the port's before its optimizer's
    clipping (Keras's global_clipnorm).
  tf1_global_step() -> the global step variable as the team's TF1 code makes it, before its
    towers (Inception's train script: a float32 get_variable('global_step', [],
    initializer=tf.constant_initializer(0), trainable=False)); None:
    tf.compat.v1.train.get_or_create_global_step() (int64). Converted checkpoints hold it in
    this dtype, so the team's own Saver restores them.
  random_ops: "aligned" (tower i and replica i draw the same numbers at each step: dropout
    and noise layers compare to the bit; porting.random_ops) or "as_written" (each side's own
    random streams, which no two programs share).
  """
  tower_loss: Callable
  tf1_optimizer: Callable
  build_model: Callable
  replica_loss: Callable
  tf2_optimizer: Callable
  update_ops: Optional[str] = None
  variable_map: Optional[dict] = None
  tf1_ema: Optional[Callable] = None
  tf2_ema: Optional[Callable] = None
  ema_order: str = "after_update"
  gradient_reduction: str = "sum"
  random_ops: str = "aligned"
  tf1_global_step: Optional[Callable] = None
  tf1_ema_variables: Optional[Callable] = None
  tf2_ema_variables: Optional[Callable] = None
  tf1_gradients: Optional[Callable] = None
  tf1_towers: combinations.TowerCombination = combinations.AVERAGE_GRADIENTS

  @property
  def combination(self):
    """tf1_towers, with update_ops where the Port names them."""
    if self.update_ops is None:
      return self.tf1_towers
    return dataclasses.replace(self.tf1_towers, update_ops=self.update_ops)

  def __post_init__(self):
    # The five the kit calls: a None or a non-callable here is the port's, said as such
    # (calling it deep in the kit read as a fault of the kit's).
    for field in ("tower_loss", "tf1_optimizer", "build_model", "replica_loss",
                  "tf2_optimizer"):
      if not callable(getattr(self, field)):
        raise PortError(f"Port's {field} must be a function, got "
                        f"{type(getattr(self, field)).__name__}")
    if not isinstance(self.tf1_towers, combinations.TowerCombination):
      raise PortError("Port's tf1_towers must be a porting.TowerCombination (porting."
                      "AVERAGE_GRADIENTS, MODEL_DEPLOY, ...), got "
                      f"{type(self.tf1_towers).__name__}")
    for field, allowed in (("update_ops", UPDATE_OPS + (None,)), ("ema_order", EMA_ORDERS),
                           ("gradient_reduction", GRADIENT_REDUCTIONS),
                           ("random_ops", RANDOM_OPS)):
      if getattr(self, field) not in allowed:
        raise PortError(f"{field} must be one of {', '.join(a for a in allowed if a)}, got "
                        f"{getattr(self, field)!r}")
    if (self.tf1_ema is None) != (self.tf2_ema is None):
      raise PortError("give tf1_ema and tf2_ema both, or neither: an average on one side "
                      "only has nothing to be compared with")


def loss_and_outputs(result, parts=None):
  """(loss, outputs or None) of what a tower_loss / replica_loss returned; a PortError where
  the loss is not a floating-point tensor (a None, a Python number, labels' ints), which
  TensorFlow's gradients would answer deep inside with a TypeError."""
  loss, outputs = result, None
  if isinstance(result, (tuple, list)):
    if len(result) != 2:
      raise PortError(f"a loss function returned {len(result)} values; return the loss, or "
                      "(loss, outputs)")
    loss, outputs = result
  if not tf.is_tensor(loss) or not loss.dtype.is_floating:
    what = (f"a {loss.dtype.name} tensor" if tf.is_tensor(loss) else
            f"{type(loss).__name__} {loss!r}"[:80])
    raise PortError(f"a loss function returned {what} as its loss; return the loss as a "
                    "floating-point tensor computed from the weights (or (loss, outputs))")
  if parts is not None and not parts and outputs is not None:
    parts += _parts(outputs)  # the first tower's or replica's: what the rows compare
  return loss, _one_tensor(outputs)


def _parts(outputs, path=""):
  """[[path, shape]] of `outputs` in tf.nest's order (a dict's keys sorted): what a side's
  outputs row holds, said where the two sides' differ."""
  if isinstance(outputs, dict):
    return [p for k in sorted(outputs) for p in _parts(outputs[k], f"{path}[{k!r}]")]
  if isinstance(outputs, (list, tuple)):
    return [p for i, o in enumerate(outputs) for p in _parts(o, f"{path}[{i}]")]
  shape = getattr(outputs, "shape", None)
  return [[path or "outputs", shape.as_list() if shape is not None and shape.rank is not None
           else None]]


def _one_tensor(outputs):
  """Several outputs (a segmentation's logits and a classifier's scores: a list, tuple or
  dict of tensors of any shapes) as one flat tensor, in tf.nest's order, compared element by
  element as one output is; both sides must return the same structure."""
  if outputs is None or tf.is_tensor(outputs):
    return outputs
  parts = tf.nest.flatten(outputs)
  if not parts or not all(tf.is_tensor(p) for p in parts):
    raise PortError("a loss function returned outputs that are not tensors; return a tensor, "
                    "or a list, tuple or dict of tensors")
  dtypes = sorted({p.dtype.name for p in parts})
  if len(dtypes) > 1:
    raise PortError(f"a loss function returned outputs of several dtypes ({', '.join(dtypes)}); "
                    "cast them to one")
  return tf.concat([tf.reshape(p, [-1]) for p in parts], 0) if len(parts) > 1 else parts[0]


def batch_source(batches, steps):
  """A function step -> (images, labels) numpy global batch, from a list or a function."""
  if callable(batches):
    return batches
  batches = list(batches)
  if len(batches) < steps:
    raise PortError(f"{steps} steps need {steps} batches, got {len(batches)}")
  return lambda step: batches[step]


def checked_batch(batch, step, replicas):
  """`batch` if it is (images, labels) of one global batch that splits into `replicas`
  equal slices; else a PortError (TensorFlow's own error would come from deep in a step)."""
  if len(batch) != 2 or len(batch[0]) != len(batch[1]) or len(batch[0]) % replicas:
    raise PortError(f"the batch of step {step} must be (images, labels) of one global batch "
                    f"that splits into {replicas} equal slices; got {len(batch)} part(s) of "
                    f"{[len(part) for part in batch]} rows")
  return batch
