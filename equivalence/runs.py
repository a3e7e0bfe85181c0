"""Both trainers, driven in-process over the same weights and batches, for comparison.

Each function returns plain numpy dicts keyed by the TF1 variable names, so `compare.py` can
diff them without caring which world they came from. The TF2 side needs the process to have
at least N logical CPU devices (or N GPUs) configured before TensorFlow starts; the v1 side
asks its Session for N CPU devices itself.
"""

import dataclasses
import sys
import tempfile

import numpy as np
import tensorflow as tf

from cifar10 import checkpoints
from cifar10 import input_pipeline as ip
from cifar10 import launcher
from cifar10 import losses
from cifar10 import model
from cifar10.hparams import DEFAULT
from compat_v1 import towers
from strategies import distribute
from strategies.trainer import Trainer

v1 = tf.compat.v1


def global_batch(seed, global_batch_size):
  """The first global batch of the shared synthetic training stream."""
  stream = ip.train_dataset(ip.synthetic_source(seed), seed=seed,
                            global_batch_size=global_batch_size)
  images, labels = next(iter(stream))
  return images.numpy(), labels.numpy()


def _devices(n):
  return [f"/cpu:{i}" for i in range(n)]


def _v1_session(n):
  return v1.ConfigProto(device_count={"CPU": n, "GPU": 0})


def tf2_gradients(n, seed, images, labels):
  """All-reduced MirroredStrategy gradients of one global batch over n replicas."""
  strategy = distribute.get_strategy("mirrored", _devices(n))
  trainer = Trainer(strategy, seed=seed, global_batch_size=len(images), decay_steps=1)
  dist = strategy.experimental_distribute_dataset(
      tf.data.Dataset.from_tensors((images, labels)))
  _, grads = tf.function(trainer.gradients)(*next(iter(dist)))
  return {name: strategy.experimental_local_results(g)[0].numpy()
          for name, g in zip(model.VARIABLE_NAMES, grads)}


def v1_gradients(n, seed, images, labels):
  """average_gradients of n towers for the same global batch, in a Graph and Session."""
  with tf.Graph().as_default():
    g = towers.build_train_graph(tf.constant(images), tf.constant(labels), _devices(n),
                                 seed=seed, decay_steps=1, hparams=DEFAULT)
    with v1.Session(config=_v1_session(n)) as sess:
      sess.run(v1.global_variables_initializer())
      values = sess.run(g.grads)
  return dict(zip(model.VARIABLE_NAMES, values))


def single_device_gradients(seed, images, labels):
  """The whole global batch on one device with the tutorial's plain loss."""
  params = {n: tf.Variable(v) for n, v in model.initial_values(seed).items()}
  with tf.GradientTape() as tape:
    loss = losses.tower_loss(model.inference(params, images), labels, params)
  grads = tape.gradient(loss, [params[n] for n in model.VARIABLE_NAMES])
  return {name: g.numpy() for name, g in zip(model.VARIABLE_NAMES, grads)}


@dataclasses.dataclass
class RunResult:
  """Weights, EMA shadows (keyed 'name/ExponentialMovingAverage'), per-step lr and loss."""
  variables: dict
  learning_rates: list
  losses: list
  global_step: int


def tf2_train(n, seed, steps, per_replica_batch, decay_steps, ema_reads="updated"):
  """`steps` MirroredStrategy steps from the seed's weights on the shared stream."""
  strategy = distribute.get_strategy("mirrored", _devices(n))
  trainer = Trainer(strategy, seed=seed, global_batch_size=per_replica_batch * n,
                    decay_steps=decay_steps, ema_reads=ema_reads)
  stream = ip.train_dataset(ip.synthetic_source(seed), seed=seed,
                            global_batch_size=per_replica_batch * n)
  iterator = iter(strategy.experimental_distribute_dataset(stream))
  lrs, loss_values = [], []
  for _ in range(steps):
    loss, lr, _, _ = trainer.train_step(iterator)
    lrs.append(float(lr))
    loss_values.append(float(loss))
  variables = {n: v.numpy() for n, v in trainer.params.items()}
  variables.update({f"{n}/ExponentialMovingAverage": v.numpy()
                    for n, v in trainer.averages.items()})
  return RunResult(variables, lrs, loss_values, int(trainer.global_step.numpy()))


def keras_train(n, seed, steps, per_replica_batch, decay_steps):
  """`steps` steps of Keras `fit` (strategies.keras_model) under MirroredStrategy.

  No EMA (Keras keeps none); the losses are fit's per-step loss, the running mean of the
  epoch, so only the first equals the trainers' loss of that step.
  """
  from strategies import keras_model  # pylint: disable=g-import-not-at-top  # imports keras
  strategy = distribute.get_strategy("mirrored", _devices(n))
  net = keras_model.build(strategy, seed=seed, decay_steps=decay_steps)
  stream = ip.train_dataset(ip.synthetic_source(seed), seed=seed,
                            global_batch_size=per_replica_batch * n)
  lrs = []  # the rate of each step, read before the step (at the optimizer's step count)
  record = keras_model.keras.callbacks.LambdaCallback(
      on_train_batch_begin=lambda *_, **__: lrs.append(float(net.optimizer.learning_rate)))
  history = net.fit(stream, steps_per_epoch=1, epochs=steps, verbose=0, callbacks=[record],
                    shuffle=False)
  return RunResult({name: v.numpy() for name, v in net.params.items()}, lrs,
                   history.history["loss"], int(net.optimizer.iterations.numpy()))


def v1_train(n, seed, steps, per_replica_batch, decay_steps, ema_reads="updated"):
  """`steps` runs of the tower train op from the seed's weights on the shared stream."""
  with tf.Graph().as_default():
    stream = ip.train_dataset(ip.synthetic_source(seed), seed=seed,
                              global_batch_size=per_replica_batch * n)
    images, labels = v1.data.make_one_shot_iterator(stream).get_next()
    g = towers.build_train_graph(images, labels, _devices(n), seed=seed,
                                 decay_steps=decay_steps, hparams=DEFAULT, ema_reads=ema_reads)
    shadows = {f"{n}/ExponentialMovingAverage": g.ema.average(v) for n, v in g.params.items()}
    with v1.Session(config=_v1_session(n)) as sess:
      sess.run([v1.global_variables_initializer(), v1.local_variables_initializer()])
      lrs, loss_values = [], []
      for _ in range(steps):
        _, loss, lr = sess.run([g.train_op, g.loss, g.learning_rate])
        lrs.append(float(lr))
        loss_values.append(float(loss))
      variables = sess.run({**g.params, **shadows})
      step = int(sess.run(g.global_step))
  return RunResult({k: np.asarray(v) for k, v in variables.items()}, lrs, loss_values, step)


def multi_worker_train(workers, seed, steps, per_replica_batch):
  """`strategies.train --strategy=multi_worker_mirrored` on `workers` local processes.

  The binary, as users run it: its own decay_steps (the original's) and its checkpoint.
  Returns the weights and EMA of the final checkpoint, keyed like the other runs.
  """
  with tempfile.TemporaryDirectory(prefix="equivalence-mwms-") as train_dir:
    spec = launcher.cluster(worker=workers)
    argv = [sys.executable, "-m", "strategies.train", "--strategy=multi_worker_mirrored",
            "--num_gpus=1", "--dataset=synthetic", f"--seed={seed}",
            f"--batch_size={per_replica_batch}", f"--max_steps={steps}",
            f"--save_checkpoint_steps={steps}", f"--train_dir={train_dir}",
            "--peer_timeout_secs=120"]
    tasks = [launcher.Task("worker", i, argv,
                           env={"TF_CONFIG": launcher.tf_config(spec, "worker", i),
                                "TF_CPP_MIN_LOG_LEVEL": "2"}) for i in range(workers)]
    status = launcher.run(tasks, chief="worker:0", timeout=600, echo=False)
    if status:
      raise RuntimeError(f"the multi-worker job failed with exit status {status}")
    state = checkpoints.read(train_dir)
  variables = dict(state.weights)
  variables.update({f"{n}/ExponentialMovingAverage": v for n, v in state.averages.items()})
  return RunResult(variables, [], [], state.global_step)
