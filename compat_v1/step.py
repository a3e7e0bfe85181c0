"""The multi-tower training graph of `cifar10_multi_gpu_train.py`, over the shared core.

Call `build_train_graph(images, labels, devices, settings)` inside a
`tf.Graph().as_default()` block, `settings` the run's cifar10.step_settings.StepSettings. It
creates the variables on the parameter device (/cpu:0, or the first GPU: compat_v1.devices)
with tf.compat.v1.get_variable under their TF1 scopes (initial values from
`cifar10.model.initial_values(settings.seed)`), splits the global batch into contiguous tower slices,
builds one tower per device under `tf.device(dev)` and `name_scope('tower_i')` with variable
reuse after the first, averages the tower gradients there, applies them with
GradientDescentOptimizer and the global step, then updates the EMA. Unlike the original,
the EMA never races the update: a control dependency runs it after the update
(ema_reads="updated") or before it (ema_reads="previous", the order the original's group
usually took).
"""

import collections

import tensorflow as tf

from cifar10 import checkpoints
from cifar10 import losses
from cifar10 import precision
from cifar10 import model
from cifar10 import schedule
from cifar10 import scores
from cifar10 import summaries as cifar10_summaries

v1 = tf.compat.v1
TOWER_NAME = "tower"

TrainGraph = collections.namedtuple(
    "TrainGraph", "train_op loss learning_rate global_step params ema grads summary_op hooks "
    "init_feed precision loss_averages")


def tower_params(initial_values, device="/cpu:0"):
  """The model variables, created by the first tower and reused by the others.

  The caller's variable scope decides: after tower 0 calls `reuse_variables()`, get_variable
  returns the existing variables. `device` holds them: /cpu:0, as `_variable_on_cpu` did (see
  build_train_graph's param_device for GPUs).
  """
  params = {}
  with tf.device(device):
    for spec in model.SPECS:
      scope, leaf = spec.name.split("/")
      with v1.variable_scope(scope):
        params[spec.name] = v1.get_variable(leaf, initializer=initial_values[spec.name])
  return params


def _loss_average(term):
  """The original's loss average of `term`, `summaries/<term>/avg`: a float32 scalar for
  summaries only. A local variable, so that what handles the global ones leaves it alone
  (a restorer of checkpoints written before the averages were saved, the ps/worker
  readiness checks); both loops' Savers name it, so that a resumed run goes on with it."""
  with v1.variable_scope(checkpoints.LOSS_AVERAGE_SCOPE):
    return v1.get_variable(term + "/avg", [], tf.float32, v1.zeros_initializer(),
                           trainable=False, collections=[v1.GraphKeys.LOCAL_VARIABLES])


def average_gradients(tower_grads):
  """Average of each variable's gradient over the towers (a synchronization point).

  Args:
    tower_grads: one list per tower, each [(gradient, variable), ...] over the same variables
      in the same order, as returned by `Optimizer.compute_gradients`:
      [[(g0_t0, v0), (g1_t0, v1), ...], [(g0_t1, v0), (g1_t1, v1), ...], ...].
  Returns:
    [(mean gradient, variable), ...] in that order.
  """
  return [(tower_mean([g for g, _ in grad_and_vars]), grad_and_vars[0][1])
          for grad_and_vars in zip(*tower_grads)]


def tower_mean(values):
  """The mean of one tensor's value on each tower, as the original's average_gradients took
  it: stacked along a new first axis, then reduce_mean over it."""
  return tf.reduce_mean(tf.concat([tf.expand_dims(v, 0) for v in values], 0), 0)


def build_train_graph(images, labels, devices, settings, *, sync_replicas=0, is_chief=True,
                      param_device="/cpu:0"):
  """The train op and what the loop reports; `images`/`labels` are one global batch.

  `settings`: the step's (a StepSettings); the other arguments say where it runs.
  sync_replicas=K (ps/worker only) wraps the optimizer in SyncReplicasOptimizer aggregating K
  gradients per update, which then also updates the EMA (always from the updated weights);
  `hooks` must go to the session. loss_scale (fp16): each tower differentiates its loss times
  this and divides its gradients by it again (cifar10.precision); with precision.DYNAMIC the
  scale lives in the variables `loss_scale` and `loss_scale_good_steps` and a step with
  non-finite gradients updates no weight. param_device holds the weights, their averaged
  gradients, their update and their EMA (the optimizer and the EMA colocate their ops with
  the variables); cifar10.devices.parameter_device decides it.
  """
  if settings.jit_compile:
    raise ValueError("the tower graph has no per-replica function for XLA to compile")
  hparams, compute_dtype, loss_scale = settings.hparams, settings.compute_dtype, settings.loss_scale
  initial_values, init_feed = initial_value_feeds(settings.seed)
  dynamic = settings.dynamic
  with tf.device("/cpu:0"):
    global_step = v1.train.get_or_create_global_step()
    if dynamic:
      scale_var = v1.get_variable("loss_scale", initializer=tf.constant(
          precision.DYNAMIC_INITIAL_SCALE, tf.float32), trainable=False)
      good_var = v1.get_variable("loss_scale_good_steps", initializer=tf.constant(
          0, tf.int64), trainable=False)
      loss_scale = scale_var.read_value()  # read by every tower before this step's update
    lr = schedule.learning_rate(global_step, settings.decay_steps, hparams)
    opt = v1.train.GradientDescentOptimizer(lr)
    image_slices = tf.split(images, len(devices))
    label_slices = tf.split(labels, len(devices))
  tower_grads, tower_losses, tower_hits = [], [], []
  with v1.variable_scope(v1.get_variable_scope()):
    for i, device in enumerate(devices):
      with tf.device(device), tf.name_scope(f"{TOWER_NAME}_{i}"):
        params = tower_params(initial_values, param_device)
        activations = {}  # the last tower's are summarised, as in the original
        logits = model.inference(params, image_slices[i], compute_dtype, activations)
        terms = losses.tower_terms(logits, label_slices[i], params)
        loss = terms["total_loss"]  # == losses.tower_loss
        v1.get_variable_scope().reuse_variables()
        variables = [params[n] for n in model.VARIABLE_NAMES]
        grads = opt.compute_gradients(precision.scaled(loss, loss_scale), variables)
        unscaled = precision.unscaled([g for g, _ in grads], loss_scale)
        tower_grads.append(list(zip(unscaled, variables)))
        tower_losses.append(loss)
        tower_hits.append(scores.batch_precision(logits, label_slices[i]))
  with tf.device(param_device):
    grads = average_gradients(tower_grads)
    hits = tower_mean(tower_hits)  # the global batch's precision, as strategies' step has it
  with tf.device("/cpu:0"):
    if dynamic:
      finite = precision.all_finite([g for g, _ in grads])
      grads = list(zip(precision.skipped_if_not(finite, [g for g, _ in grads]),
                       [v for _, v in grads]))
    loss = losses.check_finite(tf.add_n(tower_losses) / len(devices))
    ema = v1.train.ExponentialMovingAverage(hparams.moving_average_decay, global_step)
    hooks = []
    if sync_replicas:
      opt = v1.train.SyncReplicasOptimizer(
          opt, replicas_to_aggregate=sync_replicas, total_num_replicas=sync_replicas,
          variable_averages=ema, variables_to_average=variables)
      hooks.append(opt.make_session_run_hook(is_chief))
      with tf.control_dependencies([loss]):
        train_op = opt.apply_gradients(grads, global_step=global_step)
    elif settings.ema_reads == "previous":
      with tf.control_dependencies([loss]), tf.device(param_device):  # where the weights are
        ema_op = ema.apply(variables)
      with tf.control_dependencies([ema_op]):
        train_op = opt.apply_gradients(grads, global_step=global_step)
    else:
      with tf.control_dependencies([loss]):
        apply_op = opt.apply_gradients(grads, global_step=global_step)
      with tf.control_dependencies([apply_op]), tf.device(param_device):
        train_op = ema.apply(variables)
    with tf.control_dependencies([loss]):
      average_variables = {n: _loss_average(n) for n in losses.LOSS_TERMS}
      loss_averages = {n: losses.average_update(average_variables[n], terms[n])
                       for n in losses.LOSS_TERMS}
    if dynamic:  # after the update and the EMA, as in strategies.step
      with tf.control_dependencies([train_op]):
        new_scale, new_good = precision.next_scale(scale_var.read_value(),
                                                   good_var.read_value(), finite)
        train_op = tf.group(scale_var.assign(new_scale), good_var.assign(new_good))
    train_op = tf.group(train_op, *loss_averages.values())
    # After the step, so the weight histograms show the updated weights as in TF2.
    with tf.control_dependencies([train_op]):
      # The raw op: v1.summary.scalar would rename "Precision @ 1" to "Precision___1".
      summaries = [v1.summary.scalar(scores.LOSS_TAG, loss),
                   tf.raw_ops.ScalarSummary(tags=scores.PRECISION_TAG, values=hits),
                   v1.summary.scalar("learning_rate", lr)]
      scalars, histograms = cifar10_summaries.original(activations, terms, loss_averages)
      summaries += [v1.summary.scalar(tag, value) for tag, value in scalars.items()]
      summaries += [v1.summary.histogram(tag, value) for tag, value in histograms.items()]
      for name, (grad, var) in zip(model.VARIABLE_NAMES, grads):
        # "/values": a bare "conv1/weights" would collide with the variable's op name.
        summaries.append(v1.summary.histogram(name + "/values", var.read_value()))
        summaries.append(v1.summary.histogram(name + "/gradients", grad))
  return TrainGraph(train_op, loss, lr, global_step, params, ema,
                    [g for g, _ in grads], v1.summary.merge(summaries), hooks, init_feed, hits,
                    average_variables)


def initial_value_feeds(seed):
  """({name: placeholder}, {placeholder: initial value}): the weights' initial values fed to
  the initializer rather than held in the graph as constants, which made every v1 events file
  carry them (9.2 MB; the original's graph drew them with random ops and was small). Run
  `global_variables_initializer()` with the feed (a Scaffold's init_feed_dict does)."""
  values = model.initial_values(seed)
  feeds = {}
  with tf.device("/cpu:0"), tf.name_scope("initial_values"):
    for spec in model.SPECS:
      feeds[spec.name] = v1.placeholder(tf.float32, spec.shape, spec.name.replace("/", "_"))
  return feeds, {feeds[n]: values[n] for n in feeds}
