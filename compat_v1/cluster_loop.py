"""The tower trainer's loop in a ps/worker cluster: Server, replica_device_setter,
MonitoredTrainingSession (the TF1 recipe).

`train(config, devices, session_config, task, sync_replicas, peer_timeout_secs)`, `task` a
harness.clusters.cluster.Task:
  ps      starts a tf.compat.v1.train.Server and serves until it is stopped (the launcher
          stops it when the chief is done).
  worker  builds the tower graph under `replica_device_setter` (variables on the ps tasks, the
          towers on this worker's devices) and trains in a MonitoredTrainingSession; worker 0
          is the chief and writes checkpoints and summaries, and a restarted worker rejoins.
          Its wait for the ps tasks (and the chief) at start is bounded by peer_timeout_secs:
          TF1's session waits for an absent ps task forever.

Asynchronous by default: each worker applies its own gradients to the shared variables, so the
trajectory depends on timing and cannot be bit-equal to anything. `sync_replicas` wraps the
optimizer in SyncReplicasOptimizer (replicas_to_aggregate = number of workers): each update
averages exactly that many gradients computed from the current weights, stale ones dropped.
A fast worker may supply more than one of them, so it is NOT step-equal to the towers; that is
MultiWorkerMirroredStrategy's job (strategies.launch).

Each worker reads shard k of K of the shared stream (rows k*G/K .. of each global batch G).
"""

import os
import threading
import time

from absl import logging
import tensorflow as tf

from cifar10 import checkpoints
from cifar10 import precision
from cifar10.step_settings import StepSettings
from compat_v1 import inputs
from compat_v1 import restore
from compat_v1 import step_saver
from compat_v1.step import build_train_graph
from harness.control import driver
from harness.clusters import watchdog

v1 = tf.compat.v1
# The SyncReplicas chief waits this long for tokens at close; 120 s by default (a known hang).
STOP_GRACE_SECS = 3


def serve(cluster, job, index, proto):
  """Starts this task's server and blocks (a ps task's whole life)."""
  server = v1.train.Server(cluster, job_name=job, task_index=index, config=proto)
  logging.info("%s:%d serving at %s", job, index, cluster.task_address(job, index))
  server.join()


def _local_init_op(loss_averages):
  """The Scaffold's local_init_op, which every worker runs once its session is up (the
  chief's after restoring the checkpoint): the local variables but the loss averages as usual
  (the input's, SyncReplicas' local step), and each loss average only where it is not yet
  initialized. It lives on the ps: the chief's restore has set it, or another worker's start
  has, and a worker that joins or rejoins must not set the job's chart back to 0."""
  shared = {v.op.name for v in loss_averages}
  own = [v for v in v1.local_variables() if v.op.name not in shared]
  inits = [tf.cond(v1.is_variable_initialized(v), tf.no_op,
                   lambda v=v: tf.group(v.assign(tf.zeros_like(v.initial_value))))
           for v in loss_averages]
  return tf.group(v1.variables_initializer(own), *inits, v1.tables_initializer())


def _quiet_token_queue(args):
  """threading.excepthook: the SyncReplicas token queue runner of the chief is still blocked
  when the session closes (no worker sends gradients any more) and dies with an OpError; that
  is the normal end of a synchronous job, not a failure worth a traceback."""
  if args.thread is not None and args.thread.name.startswith("QueueRunnerThread-sync_token_q") \
      and issubclass(args.exc_type, tf.errors.OpError):
    logging.vlog(1, "%s stopped at close (%s)", args.thread.name, args.exc_type.__name__)
    return
  threading.__excepthook__(args)


def _wait_for_chief(graph, target, proto, uninitialized):
  """Returns once the chief has initialized the variables on the ps tasks (the caller bounds
  the wait).

  A non-chief MonitoredTrainingSession checks this too, but sleeps 30 s between checks, long
  enough for a short job to end without it; polling here first lets it join at once.
  """
  with v1.Session(target, graph=graph, config=proto) as sess:
    while len(sess.run(uninitialized)):
      time.sleep(0.2)


def worker_proto(proto, index):
  """`proto` for worker `index`'s sessions: it talks to the ps tasks and itself only.

  Without device filters a session lists the devices of every task of the cluster first, so
  a worker (re)started while another worker is unreachable (not scheduled yet, paused, gone)
  waits for that worker before its first step, although between-graph workers share nothing
  but the ps tasks. tf.estimator's RunConfig gave its workers the same filters.
  """
  filtered = v1.ConfigProto()
  filtered.CopyFrom(proto)
  del filtered.device_filters[:]
  filtered.device_filters.extend(["/job:ps", f"/job:worker/task:{index}"])
  return filtered


def train(config, devices, proto, task, sync_replicas=False, peer_timeout_secs=300):
  """Runs `task` of its cluster until the job is done; `proto` is the session config."""
  cluster, job, index = tf.train.ClusterSpec(task.training_cluster), task.type, task.index
  if job == "ps":
    serve(cluster, job, index, proto)
    return None
  backend = Backend(config, devices, proto, cluster, index, sync_replicas, peer_timeout_secs)
  workers = cluster.num_tasks("worker")
  # A synchronous update consumes every worker's batch; an asynchronous one, this worker's.
  global_batch = config.global_batch_size(len(devices) * workers)
  return driver.train(config, backend, replicas=len(devices) * workers,
                      global_batch=global_batch if sync_replicas else global_batch // workers,
                      chief=index == 0)


class Backend(driver.Backend):
  """One worker of the job for harness.control.driver; worker 0 is the chief, which owns train_dir,
  writes the summaries and saves. The others only train (and stop with the job)."""

  def __init__(self, config, devices, proto, cluster, index, sync_replicas, peer_timeout_secs):
    self.config, self.devices, self.cluster = config, devices, cluster
    self.proto = worker_proto(proto, index)
    self.index, self.sync_replicas, self.peer_timeout_secs = index, sync_replicas, peer_timeout_secs
    self.chief = index == 0
    self.server = v1.train.Server(cluster, job_name="worker", task_index=index,
                                  config=self.proto)
    self.keep, self.values, self.next_step, self.local_steps = [], None, 0, 0
    self.restores_loss_averages = True  # whether the checkpoint to resume holds them
    self.session = self.writer = None

  def resume(self, path, keep):
    # MonitoredTrainingSession restores the newest checkpoint of train_dir (the driver's
    # recover made the index name it); the step is read first, for the input's start.
    self.keep = keep
    state = checkpoints.read(path, kinds=("step",))
    self.restores_loss_averages = bool(state.loss_averages)
    if not state.loss_averages:
      logging.info(checkpoints.NO_LOSS_AVERAGES, path)
    return state.global_step

  def initialize(self, values):
    self.values = values  # --init_from: the chief assigns them once the variables exist
    return values.global_step if values else 0

  def start(self, step):
    config, cluster, index = self.config, self.cluster, self.index
    self.next_step = step
    workers = cluster.num_tasks("worker")
    worker_device = f"/job:worker/task:{index}"
    global_batch = config.global_batch_size(len(self.devices) * workers)
    arrays = inputs.load(config, "train")
    graph = tf.Graph()
    with graph.as_default():
      with tf.device(worker_device + "/cpu:0"):
        # Async workers step independently; the global step is the best place to resume.
        images, labels, input_init, feed = inputs.train_batch(
            arrays, seed=config.seed, global_batch_size=global_batch, start_step=step,
            shard=(index, workers))
      with v1.device(v1.train.replica_device_setter(worker_device=worker_device,
                                                     cluster=cluster)):
        self.g = g = build_train_graph(
            images, labels, self.devices, StepSettings.of(config, len(self.devices) * workers),
            sync_replicas=workers if self.sync_replicas else 0, is_chief=self.chief)
        # Read after this worker's train op: with SyncReplicas that op returns once the
        # update it waited for is applied, so this is the step after it (fetched alongside
        # the train op, the step is read before the update lands).
        with tf.control_dependencies([g.train_op]):
          self.step_after = tf.identity(g.global_step.read_value())
        averages = [g.ema.average(v) for v in g.params.values()]
        loader = restore.Loader(g.global_step, g.params, dict(zip(g.params, averages)))
        self.all_finite_op = precision.all_finite(list(g.params.values()) + averages)
      # Global variables only: local ones (SyncReplicas' local step) are this worker's.
      uninitialized = (None if self.chief else
                       v1.report_uninitialized_variables(v1.global_variables()))
      # --max_checkpoints_to_keep (across restarts too) and paths relative to train_dir.
      # The loss averages too: local variables (compat_v1.step) that live on the ps like
      # the weights, which every worker's step updates and the chief's summaries show.
      averages = list(g.loss_averages.values())
      self.saver = step_saver.StepSaver(g.global_step, v1.global_variables() + averages,
                                        sharded=True, save_relative_paths=True,
                                        max_to_keep=config.max_checkpoints_to_keep)
      self.saver.saver.recover_last_checkpoints(self.keep)
      restorer = v1.train.Saver(
          v1.global_variables() + (averages if self.restores_loss_averages else []),
          sharded=True)
      values = self.values
      scaffold = v1.train.Scaffold(
          saver=restorer, init_feed_dict=g.init_feed,
          local_init_op=_local_init_op(averages),
          init_fn=(lambda _, sess: loader.assign(sess, values)) if values else None)
      if self.chief:
        self.writer = v1.summary.FileWriter(config.train_dir, graph)
    if self.sync_replicas and self.chief:
      threading.excepthook = _quiet_token_queue
    logging.info("worker:%d training %s on %d tower(s) %s, from step %d", index,
                 config.dataset, len(self.devices), self.devices, step)
    with graph.as_default(), watchdog.deadline(
        self.peer_timeout_secs, f"worker:{index}: the ps tasks and the chief of "
        f"{cluster.as_dict()} were not all up within {self.peer_timeout_secs} s "
        "(--peer_timeout_secs); check that each one was started and that its port is "
        "reachable"):
      if not self.chief:
        _wait_for_chief(graph, self.server.target, self.proto, uninitialized)
      # Saves and summaries are the driver's: no saver or summary hooks here.
      self.session = v1.train.MonitoredTrainingSession(
          master=self.server.target, is_chief=self.chief, checkpoint_dir=config.train_dir,
          hooks=[inputs.InitializeHook(input_init, feed)] + list(g.hooks),
          save_checkpoint_secs=None, save_checkpoint_steps=None, save_summaries_steps=None,
          save_summaries_secs=None, log_step_count_steps=0, scaffold=scaffold,
          stop_grace_period_secs=STOP_GRACE_SECS, config=self.proto)
    self.graph = graph

  def train(self, call):
    g = self.g
    fetches = [g.train_op, g.loss, g.learning_rate, self.step_after, g.precision]
    with self.graph.as_default():
      out = self.session.run(fetches + ([g.summary_op] if call.record else []))
    self.next_step = int(out[3])
    self.local_steps += 1  # this worker's gradient computations (its own train_op runs)
    return driver.Steps(out[1], out[2], out[1], out[2], next_step=self.next_step,
                        record=out[5] if call.record else None, precision=out[4],
                        last_precision=out[4])

  def _raw(self, fn):
    """fn(session) on the raw Session: no hook runs (a hook's fetches would run a step)."""
    with self.graph.as_default():
      return self.session.run_step_fn(lambda step_context: fn(step_context.session))

  def write_summaries(self, step, steps):
    self.writer.add_summary(steps.record, step)

  def all_finite(self):
    return not self.chief or bool(self._raw(lambda sess: sess.run(self.all_finite_op)))

  def save(self, step):  # pylint: disable=unused-argument  # named by the step it holds
    if not self.chief:
      return None
    prefix = os.path.join(self.config.train_dir, "model.ckpt")
    path = self._raw(lambda sess: self.saver.save(sess, prefix))
    # Named by the shared step it holds: other workers may have moved it on.
    self.next_step = max(self.next_step, int(path.rsplit("-", 1)[1]))
    return path

  def global_step(self):
    return self.next_step

  def close(self):
    if self.next_step >= self.config.max_steps:
      logging.info("worker:%d done at global step %d after %d local steps", self.index,
                   self.next_step, self.local_steps)
    if self.writer is not None:
      self.writer.close()
    if self.session is not None:
      with self.graph.as_default():
        self.session.close()
