"""Times full training steps of one trainer in this process (used by benchmarks.throughput).

Each function sets up N devices (this must be the process's first TensorFlow work), builds the
trainer on the shared synthetic stream, runs `warmup` untimed steps, then returns the seconds
of `steps` timed ones, ending with a wait for the device.
"""

import time


def tf2(n, batch, warmup, steps, threads):
  from cifar10 import config, devices, input_pipeline as ip, schedule  # pylint: disable=g-import-not-at-top,g-multiple-import
  from strategies import distribute  # pylint: disable=g-import-not-at-top
  from strategies.trainer import Trainer  # pylint: disable=g-import-not-at-top
  names = devices.setup(config.DeviceConfig(num_gpus=n, intra_op_threads=threads))
  strategy = distribute.get_strategy("mirrored", names)
  trainer = Trainer(strategy, seed=0, global_batch_size=batch * n,
                    decay_steps=schedule.decay_steps(batch))
  stream = ip.train_dataset(ip.synthetic_source(0), seed=0, global_batch_size=batch * n)
  iterator = iter(strategy.experimental_distribute_dataset(stream))
  for _ in range(warmup):
    loss, _, _, _ = trainer.train_step(iterator)
  float(loss)
  begin = time.time()
  for _ in range(steps):
    loss, _, _, _ = trainer.train_step(iterator)
  float(loss)
  return time.time() - begin


def v1(n, batch, warmup, steps, threads):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from cifar10 import config, input_pipeline as ip, schedule  # pylint: disable=g-import-not-at-top,g-multiple-import
  from cifar10.hparams import DEFAULT  # pylint: disable=g-import-not-at-top
  from compat_v1 import session, towers  # pylint: disable=g-import-not-at-top,g-multiple-import
  names, proto = session.setup(config.DeviceConfig(num_gpus=n, intra_op_threads=threads))
  with tf.Graph().as_default():
    stream = ip.train_dataset(ip.synthetic_source(0), seed=0, global_batch_size=batch * n)
    images, labels = tf.compat.v1.data.make_one_shot_iterator(stream).get_next()
    g = towers.build_train_graph(images, labels, names, seed=0,
                                 decay_steps=schedule.decay_steps(batch), hparams=DEFAULT)
    with tf.compat.v1.Session(config=proto) as sess:
      sess.run([tf.compat.v1.global_variables_initializer(),
                tf.compat.v1.local_variables_initializer()])
      for _ in range(warmup):
        sess.run(g.train_op)
      begin = time.time()
      for _ in range(steps):
        sess.run(g.train_op)
      return time.time() - begin
