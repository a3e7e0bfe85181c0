"""Both trainers, driven in-process over the same weights and batches, for comparison.

The training runs are the real loops (strategies.loop.train, compat_v1.loop.train) over a
temporary train_dir, read back from what they wrote; the gradient checks call the real step
builders. Each function returns plain numpy dicts keyed by the TF1 variable names, so
`compare.py` can diff them without caring which world they came from. Devices are set up as the
binaries set them up (strategies.devices.setup, compat_v1.devices.setup, with --num_gpus=N and the
other flags' defaults): the TF2 side needs the process to have at least N logical CPU devices
(or N GPUs) before TensorFlow starts; the v1 side asks its Session for N CPU devices itself.
The step-by-step comparison (porting.check, over cifar10_port) runs on the kit's own device
set-up, which differs in one way: its MirroredStrategy sums replicas on the first device on
GPUs too (porting.devices.strategy), where the trainer's --all_reduce=auto uses NCCL.
"""

import dataclasses
import glob
import sys
import tempfile

import numpy as np
import tensorflow as tf

from cifar10 import checkpoints
from cifar10 import config
from cifar10 import data_sources as sources
from cifar10 import devices as device_plan
from cifar10 import input_pipeline as ip
from cifar10 import losses
from cifar10 import model
from cifar10.step_settings import StepSettings
from compat_v1 import devices as v1_devices
from compat_v1.step import build_train_graph
from harness.clusters import cluster
from harness.clusters import launcher
from harness.control import run_summaries
from strategies import devices as tf2_devices
from strategies.step import Trainer

v1 = tf.compat.v1


def global_batch(seed, global_batch_size):
  """The first global batch of the shared synthetic training stream."""
  stream = ip.train_dataset(sources.synthetic_source(seed), seed=seed,
                            global_batch_size=global_batch_size)
  images, labels = next(iter(stream))
  return images.numpy(), labels.numpy()


def _devices(n):
  """What `strategies.train --num_gpus=n` sets up and replicates over (its defaults: the
  first n GPUs, or n logical CPU devices; the bit contract's settings)."""
  return tf2_devices.setup(config.DeviceConfig(num_gpus=n))


def _v1_session(n):
  """The ConfigProto `compat_v1.train --num_gpus=n` builds for its Session."""
  return v1_devices.setup(config.DeviceConfig(num_gpus=n))[1]


def tf2_gradients(n, seed, images, labels):
  """All-reduced MirroredStrategy gradients of one global batch over n replicas."""
  strategy = tf2_devices.get_strategy("mirrored", _devices(n))
  trainer = Trainer(strategy, StepSettings(seed=seed, decay_steps=1))
  dist = strategy.experimental_distribute_dataset(
      tf.data.Dataset.from_tensors((images, labels)))
  _, grads = tf.function(trainer.gradients, autograph=False)(*next(iter(dist)))
  return {name: strategy.experimental_local_results(g)[0].numpy()
          for name, g in zip(model.VARIABLE_NAMES, grads)}


def v1_gradients(n, seed, images, labels):
  """average_gradients of n towers for the same global batch, in a Graph and Session."""
  with tf.Graph().as_default():
    devices = _devices(n)
    g = build_train_graph(tf.constant(images), tf.constant(labels), devices,
                          StepSettings(seed=seed, decay_steps=1),
                          param_device=device_plan.parameter_device(devices))
    with v1.Session(config=_v1_session(n)) as sess:
      sess.run(v1.global_variables_initializer(), g.init_feed)
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


def summaries(train_dir):
  """{tag: {step: scalar value, or None for a histogram}} of a run's event files (the
  driver's own, harness.control.run_summaries.TAGS, left out: the machine's timing, the command)."""
  out = {}
  for path in glob.glob(f"{train_dir}/events.out.tfevents.*"):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        if value.tag in run_summaries.TAGS or value.metadata.plugin_data.plugin_name in (
            "graph_run_metadata_graph",):  # the TF2 step's graph: what ran, not its numbers
          continue
        if value.HasField("histo") or (value.HasField("tensor") and value.tensor.tensor_shape.dim):
          scalar = None
        else:  # v1 writes simple_value, tf.summary a float32 tensor
          scalar = (np.float32(value.simple_value) if value.WhichOneof("value") == "simple_value"
                    else tf.make_ndarray(value.tensor).item())
        out.setdefault(value.tag, {})[event.step] = scalar
  return out


def train_config(train_dir, seed, steps, per_replica_batch, decay_steps, **overrides):
  """The run both loops are driven with here: synthetic data, one checkpoint at the end."""
  values = dict(train_dir=train_dir, max_steps=steps, batch_size=per_replica_batch, seed=seed,
                dataset="synthetic", decay_steps=decay_steps, save_summaries_steps=steps,
                save_checkpoint_steps=steps, log_frequency=steps)
  return config.TrainConfig(**{**values, **overrides})


def _train(run, prefix):
  """run(train_dir, on_step) with either loop; the RunResult of its checkpoint and steps."""
  lrs, loss_values = [], []

  def on_step(step, loss, lr):
    del step
    lrs.append(float(lr))
    loss_values.append(float(loss))

  with tempfile.TemporaryDirectory(prefix=prefix) as train_dir:
    run(train_dir, on_step)
    state = checkpoints.read(train_dir)
  variables = dict(state.weights)
  variables.update({f"{n}/ExponentialMovingAverage": v for n, v in state.averages.items()})
  return RunResult(variables, lrs, loss_values, state.global_step)


def tf2_train(n, seed, steps, per_replica_batch, decay_steps, strategy="mirrored",
              **overrides):
  """strategies.loop.train over `strategy` (--strategy: mirrored, central_storage) with n
  replicas; its RunResult."""
  from strategies import loop as tf2_loop  # pylint: disable=g-import-not-at-top
  return _train(lambda train_dir, on_step: tf2_loop.train(
      train_config(train_dir, seed, steps, per_replica_batch, decay_steps, **overrides),
      tf2_devices.get_strategy(strategy, _devices(n)), on_step=on_step), "equivalence-tf2-")


def v1_train(n, seed, steps, per_replica_batch, decay_steps, **overrides):
  """compat_v1.loop.train with n towers; its RunResult."""
  from compat_v1 import loop as v1_loop  # pylint: disable=g-import-not-at-top
  return _train(lambda train_dir, on_step: v1_loop.train(
      train_config(train_dir, seed, steps, per_replica_batch, decay_steps, **overrides),
      _devices(n), _v1_session(n), on_step=on_step), "equivalence-v1-")


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
                           env={"TF_CONFIG": cluster.to_json(spec, "worker", i),
                                "TF_CPP_MIN_LOG_LEVEL": "2"}) for i in range(workers)]
    status = launcher.run(tasks, chief="worker:0", timeout=600, echo=False)
    if status:
      raise RuntimeError(f"the multi-worker job failed with exit status {status}")
    state = checkpoints.read(train_dir)
  variables = dict(state.weights)
  variables.update({f"{n}/ExponentialMovingAverage": v for n, v in state.averages.items()})
  return RunResult(variables, [], [], state.global_step)
