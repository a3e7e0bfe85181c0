"""The tower trainer's Session loop, driven from outside: build the graph, then run it.

  devices, session_config = compat_v1.devices.setup(device_config)   # the entry point's job
  compat_v1.loop.run(config, devices, session_config)                # -> the final global step

`run` mirrors strategies.loop step for step: it resumes from the newest `model.ckpt-STEP` in
train_dir (reading its global step before the graph is built, so the shared input stream
starts at the same example as TF2's would) or starts from --init_from, prints the same line
every log_frequency steps, writes summaries every save_summaries_steps with a FileWriter and
saves with tf.compat.v1.train.Saver every save_checkpoint_steps, at the end and on SIGTERM.
`build` is its first half: the graph and every op the loop runs, finalized.
"""

import dataclasses
import os

from absl import logging
import tensorflow as tf

from cifar10 import checkpoints
from cifar10 import errors
from cifar10 import precision
from compat_v1 import inputs
from compat_v1 import restore
from compat_v1.step import build_train_graph
from compat_v1.step import TrainGraph
from harness import ownership
from harness import profiling
from harness import progress
from harness import signals

v1 = tf.compat.v1


@dataclasses.dataclass
class Built:
  """The finalized training graph and what the loop runs in it."""
  graph: tf.Graph
  train: TrainGraph
  input_init: tf.Operation
  feed: dict
  init: tf.Operation
  local_init: tf.Operation
  saver: v1.train.Saver
  writer: v1.summary.FileWriter
  init_loader: restore.Loader  # assigns an --init_from checkpoint; None without one
  all_finite: tf.Tensor  # every weight and moving average finite (checked before each save)


def last_checkpoint(config):
  return tf.train.latest_checkpoint(config.train_dir)


# ---------------------------------------------------------------------------- Graph

def build(config, devices, start, arrays, init_from=None):
  """The tower graph of `config` on `devices`, its input starting at step `start`.

  arrays: (images, labels) numpy arrays of the training split, or None for synthetic data.
  """
  n = len(devices)
  graph = tf.Graph()
  with graph.as_default():
    images, labels, input_init, feed = inputs.train_batch(
        arrays, seed=config.seed, global_batch_size=config.global_batch_size(n),
        start_step=start)
    g = build_train_graph(
        images, labels, devices, seed=config.seed,
        decay_steps=config.steps_between_decays(n),
        hparams=config.hparams, compute_dtype=precision.compute_dtype(config.precision),
        loss_scale=config.scale,
        ema_reads=config.ema_reads)
    # Relative paths in the index: the folder can be moved or copied and still resumes.
    saver = v1.train.Saver(max_to_keep=config.max_checkpoints_to_keep, save_relative_paths=True)
    init_loader = None
    if init_from:
      averages = {n: g.ema.average(v) for n, v in g.params.items()}
      init_loader = restore.Loader(g.global_step, g.params, averages)
    tracked = list(g.params.values()) + [g.ema.average(v) for v in g.params.values()]
    all_finite = tf.reduce_all(tf.stack([tf.reduce_all(tf.math.is_finite(v)) for v in tracked]))
    init = v1.global_variables_initializer()
    local_init = v1.local_variables_initializer()
    os.makedirs(config.train_dir, exist_ok=True)
    writer = v1.summary.FileWriter(config.train_dir, graph)
  graph.finalize()
  return Built(graph, g, input_init, feed, init, local_init, saver, writer, init_loader,
               all_finite)


# ---------------------------------------------------------------------------- Train loop

def run(config, devices, session_config, dataset=None, on_step=None):
  """Trains; returns the final global step.

  dataset: the examples to train on, (images, labels) numpy arrays; default: config.dataset.
  on_step: called as on_step(step, loss, learning_rate) after each step (0-based step; the
    loss and rate of that step, as numpy values), e.g. by the benchmark's clock.
  Raises UsageError on bad data, errors.NonFiniteLoss on a NaN/Inf loss (nothing of that
  step applied or saved) and errors.Stopped after saving on SIGTERM.
  """
  with ownership.own_run(config, len(devices)):  # one run per train_dir
    return _run(config, devices, session_config, dataset, on_step)


def _run(config, devices, session_config, dataset, on_step):
  latest, keep = checkpoints.recover(config.train_dir)
  init_path = checkpoints.resolve(config.init_from) if config.init_from and not latest else None
  resume_from = latest or init_path
  start = checkpoints.read(resume_from).global_step if resume_from else 0
  if start >= config.max_steps:
    logging.info("Step %d already reached --max_steps=%d; nothing to do", start,
                 config.max_steps)
    return start
  arrays = dataset if dataset is not None else inputs.load(config, "train")
  b = build(config, devices, start, arrays, init_path)
  try:
    return _train(config, devices, session_config, on_step, b, start, latest, keep, init_path)
  finally:
    # On every exit: a FileWriter left open loses what it holds since its last flush (its
    # thread dies with the process), i.e. the summaries of the steps before a failure.
    b.writer.close()


def _train(config, devices, session_config, on_step, b, start, latest, keep, init_path):
  n = len(devices)
  logging.info("Training %s on %d tower(s) %s, global batch %d, decay every %d steps",
               config.dataset, n, devices, config.global_batch_size(n),
               config.steps_between_decays(n))
  g = b.train
  prefix = os.path.join(config.train_dir, "model.ckpt")
  with v1.Session(graph=b.graph, config=session_config) as sess:
    sess.run([b.input_init, b.local_init], b.feed)
    if latest:
      try:
        b.saver.restore(sess, latest)
      except Exception as e:  # pylint: disable=broad-except  # TF raises many kinds here
        raise errors.cannot_resume(latest, e) from None
      logging.info("Resumed from %s at step %d", latest, start)
      b.saver.recover_last_checkpoints(keep)  # so --max_checkpoints_to_keep spans restarts
    else:
      sess.run(b.init)
      if init_path:
        b.init_loader.load(sess, init_path)
        logging.info("Initialized from %s at step %d", init_path, start)
    logger = progress.StepLogger(start, config.max_steps, config.global_batch_size(n),
                                 config.log_frequency)
    profile = profiling.Window(config.train_dir, config.profile_steps)
    with signals.stop_on_signals() as stop_requested, profile:
      for step in range(start, config.max_steps):
        profile.before(step)
        fetches = [g.train_op, g.loss, g.learning_rate]
        if step % config.save_summaries_steps == 0:
          fetches.append(g.summary_op)
        with errors.loss_checked(step, lambda: last_checkpoint(config)):
          out = sess.run(fetches)
        if len(out) == 4:
          b.writer.add_summary(out[3], step)
        profile.after(step)
        logger.after_step(step, lambda: out[1])
        done = step + 1
        stopping = bool(stop_requested) and done < config.max_steps
        if done % config.save_checkpoint_steps == 0 or done == config.max_steps or stopping:
          if not sess.run(b.all_finite):
            raise errors.NonFiniteState(step, last_checkpoint(config))
          path = b.saver.save(sess, prefix, global_step=done)
        if on_step:
          on_step(step, out[1], out[2])
        if stopping:
          raise errors.stopped(done, path, stop_requested.signal,
                               config.preemption_exit_code)
  logging.info("Done: step %d, checkpoint %s", config.max_steps, last_checkpoint(config))
  return config.max_steps
