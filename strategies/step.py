"""The synchronous step under any tf.distribute strategy.

`Trainer(strategy, ...)` is a strategies.state.TrainingState (weights, global step, EMA
shadows) with compiled steps; `train_step(iterator, stop_requested)` is one step:

  1. each replica: forward on its slice of the global batch, the tower's loss (mean(CE) over
     the slice + weight_decay), gradients, averaged by tfbits.gates.replica_mean (a SUM
     all-reduce in replica order, then a true division by N): the arithmetic of the TF1 towers'
     `average_gradients`, so the two are the same bits at every N, not only where dividing by N is exact (the TF2 idiom,
     sum(CE) / global_batch + weight_decay / N with a SUM all-reduce, rounds differently
     at N = 3, 5, 6, 7: MIGRATION.md). The all-reduce also carries each replica's stop
     request (SIGTERM, see strategies.loop), so every worker learns at the same step that
     one of them must stop: no extra collective;
  2. the loss is checked for NaN/Inf; every update below depends on that check, so a
     non-finite step raises before anything non-finite reaches a variable or a checkpoint;
  3. w -= lr * g with the shared schedule (the GradientDescentOptimizer kernel);
  4. global_step += 1, then the EMA (num_updates = global_step) reads the updated weights
     (ema_reads="updated"), or, with ema_reads="previous", the EMA runs before step 3 and
     reads the weights and step the update replaces: the order the original usually took.
     The TF1 tutorial grouped the update and the EMA with no order between them; here and in
     compat_v1 the order is fixed, so both trainers agree to the bit either way.

Under ParameterServerStrategy with a partitioner the step differentiates, updates and
averages each shard of a weight (strategies.state).
"""

import collections

import tensorflow as tf

from cifar10 import losses
from cifar10 import model
from cifar10 import precision
from cifar10 import schedule
from cifar10 import scores
from tfbits.gates import replica_mean
from strategies import state

# What one call of the compiled step(s) returns: the first step's loss, learning rate and stop
# flag (whether any process of the job asked to stop), its record for summaries ({} unless
# asked), and the last step's loss and learning rate (the first's, in a call of one step).
# `ran`: the steps the call ran (fewer than asked when a stop request ended it early).
# precision, last_precision: the first and last step's batch precision (the progress line's).
Call = collections.namedtuple(
    "Call", "loss lr stop record last_loss last_lr ran precision last_precision")


class Trainer(state.TrainingState):
  """The compiled steps of one strategy; build it once, before the first step."""

  def __init__(self, strategy, settings, *, summary_outputs=True):
    """`settings`: the step's (a cifar10.step_settings.StepSettings)."""
    self.settings = settings
    # Whether train_step returns what strategies.loop writes as summaries (not under
    # ParameterServerStrategy, whose coordinator would fetch it from the workers and writes
    # its own summaries).
    self.summary_outputs = summary_outputs
    super().__init__(strategy, seed=settings.seed,
                     moving_average_decay=settings.hparams.moving_average_decay,
                     dynamic_loss_scale=settings.dynamic)
    # autograph=False throughout: nothing in the step branches or loops on a tensor (the one
    # loop, _steps', is written as tf.while_loop), and converting its Python took more than
    # half of each trace (2 replicas: 1.0 s for the first call, 0.42 s without), paid at the
    # start of every run and by each of the three functions below.
    # With jit_compile, XLA compiles each replica's forward and backward pass.
    self.forward_backward = (tf.function(self._forward_backward, jit_compile=True,
                                         autograph=False)
                             if settings.jit_compile else self._forward_backward)
    # The compiled step for ClusterCoordinator.schedule, which takes a function of exactly
    # the arguments it is given (a per-worker iterator among them). The synchronous loop's
    # steps capture their iterator instead (compiled_over).
    self.step_fn = tf.function(self._recording_step, autograph=False)
    self._compiled = None  # (iterator, its compiled steps): compiled_over's

  def lr(self):
    return schedule.learning_rate(self.global_step, self.settings.decay_steps,
                                  self.settings.hparams)

  def _forward_backward(self, images, labels, scale):
    """One replica's gradients (unscaled again, as a tower's), tower terms and activations:
    the part of the step that --jit_compile hands to XLA (the all-reduce stays outside)."""
    activations = {}
    with tf.GradientTape() as tape:
      logits = model.inference(self.params, images, self.settings.compute_dtype, activations)
      terms = losses.tower_terms(logits, labels, self.params)  # total_loss: the tower's loss
      scaled_loss = precision.scaled(terms["total_loss"], scale)
    grads = precision.unscaled(tape.gradient(scaled_loss, self.shards), scale)
    return grads, terms, activations

  def _replica_gradients(self, images, labels, *extra):
    """Gradients of one replica, averaged over the replicas with the replica's precision
    (scores.batch_precision: the global batch's, the towers' mean as compat_v1 takes it) and
    `extra` (replica_mean). Also returns the tower terms and activations the original
    summarised."""
    ctx = tf.distribute.get_replica_context()
    scale = self.scale.read_value() if self.dynamic else self.settings.loss_scale
    grads, terms, activations = self.forward_backward(images, labels, scale)
    # The logits are the last layer's output in float32 (model.inference).
    hits = scores.batch_precision(tf.cast(activations["softmax_linear"], tf.float32), labels)
    # identity: a copy on this replica's device (the input lives on the host, and the
    # all-reduce takes its destinations from where its values are).
    extra = [tf.identity(x) for x in [hits] + list(extra)]
    reduced = replica_mean(ctx, grads + extra)
    grads, extra = reduced[:len(grads)], reduced[len(grads):]
    finite = tf.constant(True)
    if self.dynamic:  # the same means on every replica, so the same decision on each
      finite = precision.all_finite(grads)
      grads = precision.skipped_if_not(finite, grads)
    return terms["total_loss"], grads + extra, terms, activations, finite

  def gradients(self, images, labels):
    """(global loss, all-reduced gradients as per-replica values) for one distributed batch.

    The gradients follow `self.shards`: one per weight unless the weights are partitioned.
    """
    loss, grads, _, _, _ = self.strategy.run(self._replica_gradients, args=(images, labels))
    return self.strategy.reduce(tf.distribute.ReduceOp.MEAN, loss, axis=None), grads[:-1]

  def _recording_step(self, iterator, stop):
    return self._step(iterator, stop, record=True)

  def _step(self, iterator, stop, record=True):
    images, labels = next(iterator)
    _, reduced, terms, activations, finite = self.strategy.run(self._replica_gradients,
                                                               args=(images, labels, stop))
    # The loss reported and checked is the towers' (mean of the replicas' tower losses): the
    # same value as compat_v1 reports, to the bit.
    loss = self.strategy.reduce(tf.distribute.ReduceOp.MEAN, terms["total_loss"], axis=None)
    grads, hits, stop = reduced[:-2], reduced[-2], reduced[-1]
    loss = losses.check_finite(loss)
    lr = self.lr()
    with tf.control_dependencies([loss]):
      # Program order is execution order here: tf.function chains the stateful ops on a
      # variable in the order they are written.
      if self.settings.ema_reads == "previous":
        self.apply_ema()
      for var, grad in zip(self.shards, grads):
        self.strategy.extended.update(var, _sgd, args=(grad, lr))
      self.global_step.assign_add(1)
      if self.settings.ema_reads == "updated":
        self.apply_ema()
      if self.dynamic:
        new_scale, new_good = precision.next_scale(
            self.scale.read_value(), self.good_steps.read_value(),
            self.strategy.experimental_local_results(finite)[0])
        self.scale.assign(new_scale)
        self.good_steps.assign(new_good)
      # The original's summaries come from its last tower: here, the last local replica.
      last = lambda value: self.strategy.experimental_local_results(value)[-1]
      terms = {n: last(v) for n, v in terms.items()}
      loss_averages = {n: losses.average_update(self.loss_averages[n], terms[n])
                       for n in losses.LOSS_TERMS}
    hits = self.strategy.experimental_local_results(hits)[0]
    record = {"precision": hits} if record else {}
    if record and self.summary_outputs:
      record.update({"terms": terms, "averages": loss_averages,
                     "activations": {n: last(v) for n, v in activations.items()},
                     "gradients": [self.strategy.experimental_local_results(g)[0]
                                   for g in grads]})
    # The reduced request is the same on every replica; > 0 if any replica anywhere asked.
    return loss, lr, self.strategy.experimental_local_results(stop)[0] > 0, record, hits

  def _steps(self, iterator, stop, more):
    """The step, then up to `more` steps in the same call, with no host round trip between
    them. Returns the fields of a Call: the first step's (loss, lr, record), the job's stop
    flag after the last step run, the last step's loss and lr, the number of steps run, the
    first and the last step's batch precision. Each step is the
    graph of `_step` and carries this process's stop request (stop_flag) in its all-reduce,
    so every process of the job sees a request at the same step and ends the call after it.
    A failed loss check ends the call at that step, with the steps before it applied."""
    loss, lr, stopping, record, hits = self._step(iterator, stop, record=False)

    def go_on(ran, stopping, *_):
      return tf.logical_and(ran <= more, tf.logical_not(stopping))

    def another(ran, stopping, *_):
      last_loss, last_lr, stopping, _, last_hits = self._step(
          iterator, self.stop_flag.read_value(), record=False)
      return ran + 1, stopping, last_loss, last_lr, last_hits

    ran, stopping, last_loss, last_lr, last_hits = tf.while_loop(
        go_on, another, (tf.constant(1), stopping, loss, lr, hits))
    return loss, lr, stopping, record, last_loss, last_lr, ran, hits, last_hits

  def train_step(self, iterator, stop_requested=False, record=True):
    """One synchronous step; returns (global loss, learning rate used, whether to stop,
    the values write_summaries needs: {} without summary_outputs or `record`, the global
    batch's precision).

    `stop_requested` is this process's wish to stop after the step; the returned flag is
    the wish of any process of the job, the same on all of them.
    """
    recording, quiet, _ = self.compiled_over(iterator)
    return (recording if record else quiet)(tf.constant(float(stop_requested)))

  def train_steps(self, iterator, steps, stop_requested=False, record=False):
    """`steps` synchronous steps in one call; returns a Call. One step runs train_step's
    function; only a call of one step returns a record (for summaries)."""
    if steps == 1:
      loss, lr, stopping, out, hits = self.train_step(iterator, stop_requested, record)
      return Call(loss, lr, stopping, out, loss, lr, 1, hits, hits)
    return Call(*self.compiled_over(iterator)[2](tf.constant(float(stop_requested)),
                                                 tf.constant(steps - 1, tf.int32)))

  def compiled_over(self, iterator):
    """(recording step, quiet step, steps) compiled over `iterator`, which they capture.

    Passed as an argument, a distributed iterator (N iterators and their type specs) is
    flattened and matched against the traced signature on every call: 0.35-0.6 ms of each at
    2 and 4 replicas (measured; BENCHMARKS.md), ~3% of a step at batch 8, N = 2. Compiled
    once per iterator (a run has one). The quiet step returns nothing for summaries: the
    activations and gradients it would return (19 MB at batch 128) cost a copy out of the
    function on every step. The functions keep the methods' names, which the profiler shows
    (benchmarks.profile_ops reads them)."""
    if self._compiled is None or self._compiled[0] is not iterator:
      def _recording_step(stop):
        return self._step(iterator, stop, record=True)

      def _quiet_step(stop):
        return self._step(iterator, stop, record=False)

      def _steps(stop, more):
        return self._steps(iterator, stop, more)

      self._compiled = (iterator,) + tuple(tf.function(f, autograph=False) for f in (
          _recording_step, _quiet_step, _steps))
    return self._compiled[1:]


def _sgd(var, grad, lr):
  # The same kernel as tf.compat.v1.train.GradientDescentOptimizer, so both trainers round
  # w - lr * g identically (an assign_sub of lr * g may be fused differently).
  return tf.raw_ops.ResourceApplyGradientDescent(var=var.handle, alpha=tf.cast(lr, var.dtype),
                                                 delta=grad)
