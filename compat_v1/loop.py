"""The Session loop of the tower trainer: resume, input, logging, summaries, Saver.

`run(config, device_config)` mirrors strategies.loop step for step: it resumes from the newest
`model.ckpt-STEP` in train_dir (reading its global step before the graph is built, so the
shared input stream starts at the same example as TF2's would), prints the same line every
log_frequency steps, writes summaries every save_summaries_steps with a FileWriter and saves
with tf.compat.v1.train.Saver every save_checkpoint_steps and at the end.
"""

import dataclasses
import os

from absl import logging
import tensorflow as tf

from cifar10 import checkpoints
from cifar10 import errors
from cifar10 import progress
from cifar10 import schedule
from cifar10 import signals
from cifar10.hparams import DEFAULT
from compat_v1 import inputs
from compat_v1 import restore
from compat_v1 import session
from compat_v1 import towers

v1 = tf.compat.v1


def run(config, device_config):
  """Trains; returns the final global step. Raises UsageError on bad data or a NaN loss."""
  devices, proto = session.setup(device_config)
  n = len(devices)
  latest = tf.train.latest_checkpoint(config.train_dir)
  init_path = checkpoints.resolve(config.init_from) if config.init_from and not latest else None
  resume_from = latest or init_path
  start = checkpoints.read(resume_from).global_step if resume_from else 0
  if start >= config.max_steps:
    logging.info("Step %d already reached --max_steps=%d; nothing to do", start,
                 config.max_steps)
    return start
  decay_steps = schedule.decay_steps(config.batch_size, n, config.decay_steps_per_global_batch)
  logging.info("Training %s on %d tower(s) %s, global batch %d, decay every %d steps",
               config.dataset, n, devices, config.batch_size * n, decay_steps)
  arrays = inputs.load(config, "train")
  graph = tf.Graph()
  with graph.as_default():
    images, labels, input_init, feed = inputs.train_batch(
        arrays, seed=config.seed, global_batch_size=config.batch_size * n, start_step=start)
    hparams = dataclasses.replace(DEFAULT, initial_learning_rate=config.learning_rate)
    g = towers.build_train_graph(
        images, labels, devices, seed=config.seed, decay_steps=decay_steps, hparams=hparams,
        compute_dtype=tf.float16 if config.use_fp16 else tf.float32,
        ema_reads=config.ema_reads)
    saver = v1.train.Saver(max_to_keep=config.max_checkpoints_to_keep)
    if init_path:
      averages = {n: g.ema.average(v) for n, v in g.params.items()}
      init_loader = restore.Loader(g.global_step, g.params, averages)
    init = v1.global_variables_initializer()
    local_init = v1.local_variables_initializer()
    os.makedirs(config.train_dir, exist_ok=True)
    writer = v1.summary.FileWriter(config.train_dir, graph)
  graph.finalize()
  prefix = os.path.join(config.train_dir, "model.ckpt")
  with v1.Session(graph=graph, config=proto) as sess:
    sess.run([input_init, local_init], feed)
    if latest:
      try:
        saver.restore(sess, latest)
      except Exception as e:  # pylint: disable=broad-except  # TF raises many kinds here
        raise errors.cannot_resume(latest, e) from None
      logging.info("Resumed from %s at step %d", latest, start)
    else:
      sess.run(init)
      if init_path:
        init_loader.load(sess, init_path)
        logging.info("Initialized from %s at step %d", init_path, start)
    logger = progress.StepLogger(start, config.max_steps, config.batch_size * n,
                                 config.log_frequency)
    with signals.stop_on_sigterm() as stop_requested:
      for step in range(start, config.max_steps):
        fetches = [g.train_op, g.loss]
        if step % config.save_summaries_steps == 0:
          fetches.append(g.summary_op)
        try:
          out = sess.run(fetches)
        except tf.errors.InvalidArgumentError as e:
          if "loss is not finite" not in str(e):
            raise
          raise errors.nan_loss(step, tf.train.latest_checkpoint(config.train_dir)) from None
        if len(out) == 3:
          writer.add_summary(out[2], step)
        logger.after_step(step, lambda: out[1])
        done = step + 1
        stopping = bool(stop_requested) and done < config.max_steps
        if done % config.save_checkpoint_steps == 0 or done == config.max_steps or stopping:
          path = saver.save(sess, prefix, global_step=done)
        if stopping:
          writer.close()
          raise errors.stopped(done, path)
  writer.close()
  logging.info("Done: step %d, checkpoint %s", config.max_steps,
               tf.train.latest_checkpoint(config.train_dir))
  return config.max_steps
