"""Training throughput of the TF2 trainer and the v1 towers, side by side, in one run.

  python -m benchmarks.throughput --num_gpus=1,2 --steps=50 --warmup=10

Each (trainer, N) runs in its own child process (devices are fixed when TensorFlow starts)
on the shared synthetic stream, the full step included (input, forward, backward, all-reduce
or tower average, update, EMA). After --warmup steps, --steps steps are timed, ending with a
wait for the device. Prints examples/sec of each and the ratio TF2 / v1 per N. On a machine
without GPUs N means N logical CPU devices that share the same cores.
"""

import json
import os
import subprocess
import sys
import time

from absl import flags

import cifar10_flags as common

flags.DEFINE_list("num_gpus", ["1", "2"], "Replica / tower counts to measure.")
flags.DEFINE_integer("batch_size", 128, "Images per replica per step.")
flags.DEFINE_integer("steps", 50, "Timed steps.")
flags.DEFINE_integer("warmup", 10, "Untimed steps first (tracing, graph optimisation).")
flags.DEFINE_integer("intra_op_threads", 0, "Threads inside one op (0: TF decides).")
flags.DEFINE_string("child", None, "Internal: 'tf2:N' or 'v1:N', run one measurement.")
FLAGS = flags.FLAGS


def _measure_tf2(n, batch, warmup, steps, threads):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
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
    loss, _ = trainer.train_step(iterator)
  float(loss)
  begin = time.time()
  for _ in range(steps):
    loss, _ = trainer.train_step(iterator)
  float(loss)
  return time.time() - begin


def _measure_v1(n, batch, warmup, steps, threads):
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
      sess.run(tf.compat.v1.global_variables_initializer())
      for _ in range(warmup):
        sess.run(g.train_op)
      begin = time.time()
      for _ in range(steps):
        sess.run(g.train_op)
      return time.time() - begin


def _child(spec):
  kind, n = spec.split(":")
  measure = _measure_tf2 if kind == "tf2" else _measure_v1
  seconds = measure(int(n), FLAGS.batch_size, FLAGS.warmup, FLAGS.steps, FLAGS.intra_op_threads)
  print(json.dumps({"examples_per_sec": FLAGS.steps * FLAGS.batch_size * int(n) / seconds}))


def _run_child(kind, n):
  args = [sys.executable, "-m", "benchmarks.throughput", f"--child={kind}:{n}",
          f"--batch_size={FLAGS.batch_size}", f"--steps={FLAGS.steps}",
          f"--warmup={FLAGS.warmup}", f"--intra_op_threads={FLAGS.intra_op_threads}"]
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))
  out = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
  if out.returncode:
    raise common.UsageError(f"{kind} with N={n} failed: {out.stderr.strip().splitlines()[-1]}")
  return json.loads(out.stdout.strip().splitlines()[-1])["examples_per_sec"]


def main():
  if FLAGS.child:
    return _child(FLAGS.child)
  counts = [int(n) for n in FLAGS.num_gpus]
  if min(counts) < 1 or FLAGS.steps < 1 or FLAGS.batch_size < 1 or FLAGS.warmup < 1:
    raise common.UsageError("--num_gpus, --steps, --warmup and --batch_size must be positive")
  print(f"global batch = {FLAGS.batch_size} x N, {FLAGS.steps} timed steps after "
        f"{FLAGS.warmup} warm-up steps, synthetic data")
  print(f"{'N':>3} {'TF2 ex/s':>10} {'v1 ex/s':>10} {'TF2 / v1':>9}")
  for n in counts:
    tf2, v1 = _run_child("tf2", n), _run_child("v1", n)
    print(f"{n:>3} {tf2:>10.1f} {v1:>10.1f} {tf2 / v1:>9.2f}", flush=True)


if __name__ == "__main__":
  common.app_run(main)
