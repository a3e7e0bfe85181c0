"""MirroredStrategy on logical CPU devices: the split of the global batch and its gradients."""

import numpy as np
import pytest
import tensorflow as tf

from cifar10 import config
from cifar10 import data_sources as sources
from cifar10 import input_pipeline as ip
from cifar10 import model
from cifar10.errors import UsageError
from strategies import devices as tf2_devices
from strategies import inputs
from cifar10.step_settings import StepSettings
from strategies.step import Trainer

GLOBAL_BATCH = 16


def _global_batch():
  return next(iter(ip.train_dataset(sources.synthetic_source(9), seed=9,
                                    global_batch_size=GLOBAL_BATCH)))


def _devices(n):
  return [f"/cpu:{i}" for i in range(n)]


def _mirrored_gradients(n, images, labels, seed):
  strategy = tf2_devices.get_strategy("mirrored", _devices(n))
  trainer = Trainer(strategy, StepSettings(seed=seed, decay_steps=100))
  dist = strategy.experimental_distribute_dataset(
      tf.data.Dataset.from_tensors((images, labels)))
  loss, grads = tf.function(trainer.gradients)(*next(iter(dist)))
  per_replica = [[g.numpy() for g in strategy.experimental_local_results(grad)]
                 for grad in grads]
  return float(loss), per_replica, strategy


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("branch", ["cpu", "gpu"])
@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_each_replica_gets_its_contiguous_slice_of_the_global_batch(n, branch):
  # The loop's input from a resumed step on: replica r's batch is rows [r*B/n, (r+1)*B/n) of
  # the one-machine global batch of that step. Both branches: one pipeline per CPU replica,
  # and the one GPU replicas get (one pipeline, split and prefetched onto the devices),
  # driven here on CPU devices.
  cfg = config.TrainConfig(train_dir="unused", dataset="synthetic", seed=9,
                           batch_size=GLOBAL_BATCH // n)
  strategy = tf2_devices.get_strategy("mirrored", _devices(n))
  source = sources.synthetic_source(9)
  iterator = inputs.distributed_input(cfg, strategy, source, start=3,
                                      per_replica=branch == "cpu")
  stream = iter(ip.train_dataset(source, seed=9, global_batch_size=GLOBAL_BATCH, start_step=3))
  per = GLOBAL_BATCH // n
  for _ in range(2):
    images, labels = next(stream)
    x, y = next(iterator)
    for r, (xr, yr) in enumerate(zip(strategy.experimental_local_results(x),
                                     strategy.experimental_local_results(y))):
      np.testing.assert_array_equal(xr.numpy(), images[r * per:(r + 1) * per].numpy())
      np.testing.assert_array_equal(yr.numpy(), labels[r * per:(r + 1) * per].numpy())


def test_replica_pipelines_share_the_hosts_cores():
  # tf.data gives each pipeline one thread per core: 4 CPU replicas on 2 cores ran 8 pipeline
  # threads beside the step's, 2 replicas 4; one each measured faster at both
  # (strategies/inputs.py).
  assert inputs.pipeline_threads(4, cores=2) == inputs.pipeline_threads(3, cores=2) == 1
  assert inputs.pipeline_threads(2, cores=2) == 1
  assert inputs.pipeline_threads(1, cores=2) is None  # the host to itself: tf.data's own
  assert inputs.pipeline_threads(2, cores=16) == 8 and inputs.pipeline_threads(4, cores=16) == 4
  assert inputs.pipeline_threads(64, cores=16) == 1
  # Each replica's own pipeline gets it; the GPU branch's one pipeline keeps tf.data's.
  cfg = config.TrainConfig(train_dir="unused", dataset="synthetic", seed=9, batch_size=4)
  strategy = tf2_devices.get_strategy("mirrored", _devices(4))
  made = []
  strategy.distribute_datasets_from_function = lambda fn, options=None: made.append(
      fn(tf.distribute.InputContext(4, 1, 4))) or iter([])
  inputs.distributed_input(cfg, strategy, sources.synthetic_source(9), start=0,
                           per_replica=True)
  expected = inputs.pipeline_threads(4)
  assert made[0].options().threading.private_threadpool_size == expected


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_every_replica_holds_the_same_all_reduced_gradient(n):
  # Equal to the v1 towers' average to the bit, and so to one device's gradient of the whole
  # batch up to summation order: tests/test_equivalence.py.
  images, labels = _global_batch()
  _, per_replica, _ = _mirrored_gradients(n, images, labels, seed=11)
  for name, replicas in zip(model.VARIABLE_NAMES, per_replica):
    assert len(replicas) == n and np.abs(replicas[0]).max() > 0, name
    for got in replicas[1:]:
      np.testing.assert_array_equal(got, replicas[0], err_msg=f"{name}: replicas disagree")


def test_one_device_strategy_refuses_more_than_one_device():
  with pytest.raises(UsageError, match="one_device runs one replica"):
    tf2_devices.get_strategy("one_device", _devices(2))
  with pytest.raises(UsageError, match="unknown --strategy 'tpu'"):
    tf2_devices.get_strategy("tpu", _devices(1))


def test_a_stop_request_reaches_every_replica_through_the_step_all_reduce():
  # The SIGTERM path of strategies.loop: one process's request, summed with the gradients,
  # comes back true from the step, so every replica (and worker) stops after the same step.
  strategy = tf2_devices.get_strategy("mirrored", _devices(2))
  trainer = Trainer(strategy, StepSettings(seed=9, decay_steps=100))
  stream = ip.train_dataset(sources.synthetic_source(9), seed=9, global_batch_size=GLOBAL_BATCH)
  iterator = iter(strategy.experimental_distribute_dataset(stream))
  flags = [bool(trainer.train_step(iterator, stop_requested=request)[2])
           for request in (False, True, False)]
  assert flags == [False, True, False]
  assert int(trainer.global_step.numpy()) == 3  # the requesting step itself is completed


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_the_gpu_input_branch_trains_the_same_bits(tmp_path, monkeypatch):
  # The TF2 loop with the input GPU replicas get (experimental_distribute_dataset, prefetched
  # onto the devices), driven on two CPU replicas, against the CPU branch it takes here.
  import functools  # pylint: disable=g-import-not-at-top
  from cifar10 import checkpoints  # pylint: disable=g-import-not-at-top
  from strategies import loop  # pylint: disable=g-import-not-at-top
  from tests import helpers  # pylint: disable=g-import-not-at-top
  states = []
  for branch in ("cpu", "gpu"):
    monkeypatch.setattr(loop, "distributed_input", functools.partial(
        inputs.distributed_input, per_replica=branch == "cpu"))
    run = config.TrainConfig(train_dir=str(tmp_path / branch), dataset="synthetic", seed=4,
                             batch_size=4, max_steps=3)
    assert helpers.train_tf2(run, devices=("/cpu:0", "/cpu:1"), strategy="mirrored") == 3
    states.append(checkpoints.read(str(tmp_path / branch)))
  for key in states[0].weights:
    np.testing.assert_array_equal(states[0].weights[key], states[1].weights[key], err_msg=key)
    np.testing.assert_array_equal(states[0].averages[key], states[1].averages[key],
                                  err_msg=key)


@pytest.mark.parametrize("worker", [0, 1])
def test_a_worker_of_two_gpus_feeds_each_replica_its_own_batch(worker):
  # multi_worker_mirrored, 2 workers x 2 GPUs: num_replicas_in_sync is 4 and each worker's
  # pipeline feeds its 2 replicas in turn. Before: its elements were the worker's 2B rows,
  # so each replica got a worker batch (2 x the batch and the effective learning rate).
  batch = GLOBAL_BATCH // 4
  cfg = config.TrainConfig(train_dir="unused", dataset="synthetic", seed=9, batch_size=batch)
  source = sources.synthetic_source(9)
  ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=worker,
                                   num_replicas_in_sync=4)
  dataset = inputs.pipeline_dataset(cfg, source, 3, ctx)
  assert dataset.element_spec[0].shape.as_list() == [batch, 24, 24, 3]
  assert dataset.element_spec[1].shape.as_list() == [batch]
  elements = iter(dataset)
  stream = iter(ip.train_dataset(source, seed=9, global_batch_size=GLOBAL_BATCH, start_step=3))
  for _ in range(2):
    images, labels = next(stream)
    for local in range(2):  # replica worker*2 + local takes tower worker*2 + local's rows
      rows = slice((worker * 2 + local) * batch, (worker * 2 + local + 1) * batch)
      x, y = next(elements)
      np.testing.assert_array_equal(x.numpy(), images[rows].numpy())
      np.testing.assert_array_equal(y.numpy(), labels[rows].numpy())


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_the_loops_steps_capture_their_iterator_and_are_compiled_once_per_iterator():
  # Passed as an argument, a distributed iterator is flattened and matched against the traced
  # signature on every call (0.35-0.6 ms of each measured at 2 and 4 replicas); captured, a
  # call takes the stop flag alone (and the steps' count).
  strategy = tf2_devices.get_strategy("mirrored", _devices(2))
  trainer = Trainer(strategy, StepSettings(seed=9, decay_steps=100))
  stream = ip.train_dataset(sources.synthetic_source(9), seed=9, global_batch_size=GLOBAL_BATCH)
  iterator = iter(strategy.experimental_distribute_dataset(stream))
  for _ in range(3):
    trainer.train_step(iterator, record=False)
  trainer.train_steps(iterator, 2)
  recording, quiet, steps = trainer.compiled_over(iterator)
  assert quiet.experimental_get_tracing_count() == steps.experimental_get_tracing_count() == 1
  assert recording.experimental_get_tracing_count() == 0  # no step recorded yet
  signature = quiet.get_concrete_function(tf.constant(0.0)).structured_input_signature
  assert [spec.dtype for spec in signature[0]] == [tf.float32] and not signature[1]
  assert int(trainer.global_step.numpy()) == 5
  # Another iterator (a resumed run's) gets steps of its own; the first iterator's are kept
  # no longer.
  other = iter(strategy.experimental_distribute_dataset(stream))
  trainer.train_step(other, record=False)
  assert trainer.compiled_over(other)[1] is not quiet
  assert int(trainer.global_step.numpy()) == 6
