"""A SyncReplicasOptimizer job small enough to audit every update (run by test_ps_worker).

  python -m tests.sync_replicas_job UPDATES

One ps and two worker servers in this process, each worker a thread with its own graph,
wired as compat_v1.cluster_loop wires the real trainer (replica_device_setter,
replicas_to_aggregate = total_num_replicas = workers, the optimizer's session hook,
MonitoredTrainingSession with a short stop grace period). The model is one weight w and the
loss 0.5 * (w - x)^2 with a fresh integer x per worker step, so a gradient is w - x and, at
learning rate 1, an update that averages gradients g_a, g_b computed at weights w_k sets
w_{k+1} = (x_a + x_b) / 2: from the weights alone one can tell which gradients an update used
and at which weights they were computed. Worker 1 sleeps before each step, so worker 0 is the
fast one. Prints one JSON line: every worker step as [worker, w read, x], and the final
global step and weight.
"""

import json
import os
import sys
import threading
import time

import numpy as np
import tensorflow as tf

from harness.clusters import launcher

v1 = tf.compat.v1


def main(updates):
  spec = tf.train.ClusterSpec(launcher.cluster(ps=1, worker=2))
  servers = {(job, i): v1.train.Server(spec, job_name=job, task_index=i)
             for job, i in (("ps", 0), ("worker", 0), ("worker", 1))}
  records, lock, done = [], threading.Lock(), threading.Event()
  final = {}
  rng = np.random.default_rng(0)
  xs = iter(rng.permutation(100000)[:10000].astype(np.float32))

  def worker(index, delay):
    graph = tf.Graph()
    with graph.as_default():
      with v1.device(v1.train.replica_device_setter(worker_device=f"/job:worker/task:{index}",
                                                     cluster=spec)):
        step = v1.train.get_or_create_global_step()
        w = v1.get_variable("w", initializer=tf.constant([0.5]))
        x = v1.placeholder(tf.float32, [1])
        read = tf.identity(w)  # the value this step's gradient is computed from
        loss = 0.5 * tf.reduce_sum(tf.square(read - x))
        opt = v1.train.SyncReplicasOptimizer(v1.train.GradientDescentOptimizer(1.0),
                                             replicas_to_aggregate=2, total_num_replicas=2)
        train = opt.minimize(loss, global_step=step)
        hooks = [opt.make_session_run_hook(index == 0),
                 v1.train.StopAtStepHook(last_step=updates)]
    with graph.as_default(), v1.train.MonitoredTrainingSession(
        master=servers[("worker", index)].target, is_chief=index == 0, hooks=hooks,
        stop_grace_period_secs=3, save_checkpoint_secs=None, save_summaries_steps=None,
        log_step_count_steps=0) as sess:
      while not sess.should_stop():
        time.sleep(delay)
        with lock:
          value = next(xs)
        _, seen = sess.run([train, read], {x: [value]})
        with lock:
          records.append([index, float(seen[0]), float(value)])
    if index == 0:
      with graph.as_default(), v1.Session(servers[("worker", 0)].target) as plain:
        final["global_step"], final["w"] = plain.run([step, w])
      done.set()

  threads = [threading.Thread(target=worker, args=(i, d), daemon=True)
             for i, d in ((0, 0.0), (1, 0.05))]
  for thread in threads:
    thread.start()
  if not done.wait(100):
    print(json.dumps({"error": "the chief did not finish", "records": records}), flush=True)
    os._exit(1)  # pylint: disable=protected-access  # the chief is done; worker 1 may still wait for a token that never comes
  time.sleep(0.5)
  with lock:
    print(json.dumps({"records": records, "global_step": int(final["global_step"]),
                      "w": float(final["w"][0])}), flush=True)
  os._exit(0)  # pylint: disable=protected-access  # servers and a blocked worker never end


if __name__ == "__main__":
  main(int(sys.argv[1]))
