"""The TF2 side's step, one tf.function over the replicas: each replica's loss and gradients
on a tape, reduced as the port says (gradient_reduction "sum": handed to the Keras optimizer,
which sums them; "mean": averaged as average_gradients averages, the optimizer's own sum handed
the average once), the update, and the EMA after it. Its only device-aware lines are the
reductions."""

import tensorflow as tf

from porting import spec
from porting.errors import PortError
from tfbits.gates import replica_mean


def first_replica_only(ctx, averaged):
  """What each replica hands a Keras optimizer, which sums the replicas' gradients itself
  (and only in replica context), so that the sum is `averaged` to the bit: the average on
  replica 0, -0.0 on the others (x + -0.0 is x for every x, signed zeros included)."""
  if tf.get_static_value(ctx.replica_id_in_sync_group) == 0:
    return averaged
  return [tf.fill(tf.shape(g), tf.constant(-0.0, g.dtype)) for g in averaged]


def distributed_step(side, images, labels, step):
  """One step of tf2_replicas.Replicas `side` on the global batch (images, labels), at `step`:
  (each replica's loss and outputs, the reduced gradients as reported, the rate used)."""
  if side.source is not None:  # a trace: its draws are keyed by its step argument
    side.source.step = step
    side.source.drawn.clear()
    side.source.ops.clear()
  n = side.strategy.num_replicas_in_sync
  per = tf.shape(images)[0] // n
  global_batch = tf.shape(images)[0]

  def slice_of(ctx):
    i = ctx.replica_id_in_sync_group
    return images[i * per:(i + 1) * per], labels[i * per:(i + 1) * per]

  x, y = side.strategy.experimental_distribute_values_from_function(slice_of)

  mean = side.port.gradient_reduction == "mean"

  def replica(x, y):
    with tf.GradientTape() as tape:
      loss, outputs = spec.loss_and_outputs(
          side.port.replica_loss(side.model, x, y, global_batch), side.output_parts)
      # A LossScaleOptimizer's scale (as Keras's fit applies it; its apply_gradients
      # divides by it again); other Keras optimizers return the loss as it is.
      scaled = side.optimizer.scale_loss(loss) if side.scaled else loss
    grads = tape.gradient(scaled, side.trainable)
    if any(g is None for g in grads):
      missing = [n for n, g in zip(side.names, grads) if g is None]
      # Kept as said: AutoGraph re-raises an error from a trace wrapped in its own
      # "in user code: File ..." text, which _unwrapped takes off.
      side.error = (f"replica_loss has no gradient for {', '.join(missing)}: the port's loss "
                    "does not depend on them (a loss term left out, such as an auxiliary "
                    "head's, or a layer the call skips)")
      raise PortError(side.error)
    side.sparse.update(n for n, g in zip(side.names, grads) if isinstance(g, tf.IndexedSlices))
    ctx = tf.distribute.get_replica_context()
    if mean:
      reduced = replica_mean(ctx, grads)
      grads = first_replica_only(ctx, reduced)
    else:
      # An embedding's gradient is IndexedSlices: the optimizer is handed them as they are
      # (its sparse update is the port's), the report their dense sum, as TF1's
      # average_gradients makes it (tf.expand_dims of IndexedSlices: unsorted_segment_sum).
      reduced = [tf.convert_to_tensor(g) for g in
                 ctx.all_reduce(tf.distribute.ReduceOp.SUM, grads)]
    lr = tf.identity(side.optimizer.learning_rate)  # before the update moves the step
    if side.scaled:  # the gradients reported as TF1's compute_gradients returns them
      scale = tf.identity(side.optimizer.dynamic_scale)  # before the update moves it
      reduced = [r / scale for r in reduced]
    side.optimizer.apply_gradients(zip(grads, side.trainable))
    return loss, outputs, reduced, lr

  out = side.strategy.run(replica, (x, y))
  if side.ema is not None:  # after the update: the program order is the execution order
    with side.strategy.scope():
      side.ema.apply(side._tf_averaged())
  return out
