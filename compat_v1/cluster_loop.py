"""The tower trainer's loop in a ps/worker cluster: Server, replica_device_setter,
MonitoredTrainingSession (the TF1 recipe).

`run(config, devices, session_config, task, sync_replicas, peer_timeout_secs)`, `task` a
harness.cluster.Task:
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

import threading
import time

from absl import logging
import tensorflow as tf

from cifar10 import checkpoints
from cifar10 import errors
from cifar10 import precision
from compat_v1 import inputs
from compat_v1.step import build_train_graph
from harness import ownership
from harness import progress
from harness import signals
from harness import watchdog

v1 = tf.compat.v1
# The SyncReplicas chief waits this long for tokens at close; 120 s by default (a known hang).
STOP_GRACE_SECS = 3


def serve(cluster, job, index, proto):
  """Starts this task's server and blocks (a ps task's whole life)."""
  server = v1.train.Server(cluster, job_name=job, task_index=index, config=proto)
  logging.info("%s:%d serving at %s", job, index, cluster.task_address(job, index))
  server.join()


def _quiet_token_queue(args):
  """threading.excepthook: the SyncReplicas token queue runner of the chief is still blocked
  when the session closes (no worker sends gradients any more) and dies with an OpError; that
  is the normal end of a synchronous job, not a failure worth a traceback."""
  if args.thread is not None and args.thread.name.startswith("QueueRunnerThread-sync_token_q") \
      and issubclass(args.exc_type, tf.errors.OpError):
    logging.info("%s stopped at close (%s)", args.thread.name, args.exc_type.__name__)
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


def run(config, devices, proto, task, sync_replicas=False, peer_timeout_secs=300):
  """Runs `task` of its cluster until the job is done; `proto` is the session config."""
  cluster, job, index = tf.train.ClusterSpec(task.training_cluster), task.type, task.index
  if job == "ps":
    serve(cluster, job, index, proto)
    return
  if index == 0:  # the chief writes train_dir: one run per train_dir
    workers = cluster.num_tasks("worker")
    with ownership.own_run(config, len(devices) * workers):
      _work(config, devices, proto, cluster, index, sync_replicas, peer_timeout_secs)
  else:
    _work(config, devices, proto, cluster, index, sync_replicas, peer_timeout_secs)


def _work(config, devices, proto, cluster, index, sync_replicas, peer_timeout_secs):
  """A worker's life: build, wait for the chief (unless it is the chief), train."""
  workers = cluster.num_tasks("worker")
  server = v1.train.Server(cluster, job_name="worker", task_index=index, config=proto)
  chief = index == 0
  worker_device = f"/job:worker/task:{index}"
  latest, keep = checkpoints.recover(config.train_dir, repair=chief)
  start = checkpoints.read(latest).global_step if latest else 0
  decay_steps = config.steps_between_decays(len(devices) * workers)
  global_batch = config.global_batch_size(len(devices) * workers)
  arrays = inputs.load(config, "train")
  graph = tf.Graph()
  with graph.as_default():
    with tf.device(worker_device + "/cpu:0"):
      # Async workers step independently; the global step is the best place to resume.
      images, labels, input_init, feed = inputs.train_batch(
          arrays, seed=config.seed, global_batch_size=global_batch, start_step=start,
          shard=(index, workers))
    with v1.device(v1.train.replica_device_setter(worker_device=worker_device,
                                                   cluster=cluster)):
      g = build_train_graph(
          images, labels, devices, seed=config.seed, decay_steps=decay_steps,
          hparams=config.hparams, compute_dtype=precision.compute_dtype(config.precision),
          loss_scale=config.scale, sync_replicas=workers if sync_replicas else 0,
          is_chief=chief,
          ema_reads=config.ema_reads)
      # Read after this worker's train op: with SyncReplicas that op returns once the update
      # it waited for is applied, so this is the step after it (fetched alongside the train
      # op, the step is read before the update lands).
      with tf.control_dependencies([g.train_op]):
        step_after = tf.identity(g.global_step.read_value())
    # Global variables only: local ones (SyncReplicas' local step) are this worker's to init.
    uninitialized = None if chief else v1.report_uninitialized_variables(v1.global_variables())
    # MonitoredTrainingSession's default saver, plus what the single-machine loop's has:
    # --max_checkpoints_to_keep (across restarts too) and paths relative to train_dir.
    saver = v1.train.Saver(sharded=True, max_to_keep=config.max_checkpoints_to_keep,
                           save_relative_paths=True)
    saver.recover_last_checkpoints(keep)
  hooks = [v1.train.StopAtStepHook(last_step=config.max_steps),
           v1.train.NanTensorHook(g.loss),
           inputs.InitializeHook(input_init, feed)] + list(g.hooks)
  # A synchronous update consumes every worker's batch; an asynchronous one, this worker's.
  step_batch = global_batch if sync_replicas else global_batch // workers
  logger = progress.StepLogger(start, config.max_steps, step_batch, config.log_frequency)
  step = start
  if sync_replicas and chief:
    threading.excepthook = _quiet_token_queue
  with graph.as_default(), watchdog.deadline(
      peer_timeout_secs, f"worker:{index}: the ps tasks and the chief of {cluster.as_dict()} were not all "
      f"up within {peer_timeout_secs} s (--peer_timeout_secs); check that "
      "each one was started and that its port is reachable"):
    if not chief:
      _wait_for_chief(graph, server.target, proto, uninitialized)
    session = v1.train.MonitoredTrainingSession(
        master=server.target, is_chief=chief, checkpoint_dir=config.train_dir, hooks=hooks,
        save_checkpoint_steps=config.save_checkpoint_steps,
        save_summaries_steps=config.save_summaries_steps, log_step_count_steps=0,
        scaffold=v1.train.Scaffold(saver=saver),
        stop_grace_period_secs=STOP_GRACE_SECS, config=proto)
  with graph.as_default(), session as sess:
    local_steps = 0  # this worker's gradient computations (its own train_op runs)
    last = lambda: tf.train.latest_checkpoint(config.train_dir)
    with signals.stop_on_signals() as stop_requested:
      while not sess.should_stop() and not stop_requested:
        try:
          with errors.loss_checked(step, last):
            _, loss, step = sess.run([g.train_op, g.loss, step_after])
        except v1.train.NanLossDuringTrainingError:
          raise errors.NonFiniteLoss(step, last()) from None
        local_steps += 1
        logger.after_step(step - 1, lambda: loss)
  # Leaving the session above ran its hooks' end(): the chief's CheckpointSaverHook saved
  # the step reached, so a stop on SIGTERM loses nothing. Other workers may still have
  # updated the shared step after this worker's last one: name the step that was saved.
  if stop_requested and step < config.max_steps:
    path = last()
    raise errors.stopped(int(path.rsplit("-", 1)[1]) if path else step, path,
                         stop_requested.signal, config.preemption_exit_code)
  logging.info("worker:%d done at global step %d after %d local steps", index, step,
               local_steps)
