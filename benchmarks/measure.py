"""Times the real training loops of both trainers in this process (for benchmarks.throughput).

Each function sets up N devices (this must be the process's first TensorFlow work), then runs
the trainer's own loop (strategies.loop.run, compat_v1.loop.run) into a temporary train_dir
on the shared synthetic stream, with everything a user's run does: the per-step checks, log
lines, summaries every --save_summaries_steps, the final checkpoint. The loop's on_step clock
starts after `warmup` steps (tracing, graph optimisation) and stops after `warmup + steps`;
the seconds between are returned.
"""

import tempfile
import time


def _clock(warmup, steps):
  marks = {}

  def on_step(step, loss, learning_rate):  # pylint: disable=unused-argument
    if step + 1 in (warmup, warmup + steps):
      marks[step + 1] = time.perf_counter()

  return on_step, lambda: marks[warmup + steps] - marks[warmup]


def _config(train_dir, batch, warmup, steps):
  from cifar10 import config  # pylint: disable=g-import-not-at-top
  return config.TrainConfig(train_dir=train_dir, max_steps=warmup + steps, batch_size=batch,
                            dataset="synthetic")


def tf2(n, batch, warmup, steps, threads, steps_per_loop=1):
  from cifar10 import config  # pylint: disable=g-import-not-at-top
  from strategies import devices, loop  # pylint: disable=g-import-not-at-top,g-multiple-import
  names = devices.setup(config.DeviceConfig(num_gpus=n, intra_op_threads=threads))
  strategy = devices.get_strategy("mirrored", names)
  on_step, seconds = _clock(warmup, steps)
  with tempfile.TemporaryDirectory(prefix="benchmark-tf2-") as train_dir:
    loop.run(_config(train_dir, batch, warmup, steps), strategy, on_step=on_step,
             steps_per_loop=steps_per_loop)
  return seconds()


def v1(n, batch, warmup, steps, threads):
  from cifar10 import config  # pylint: disable=g-import-not-at-top
  from compat_v1 import devices, loop  # pylint: disable=g-import-not-at-top,g-multiple-import
  names, session_config = devices.setup(config.DeviceConfig(num_gpus=n,
                                                            intra_op_threads=threads))
  on_step, seconds = _clock(warmup, steps)
  with tempfile.TemporaryDirectory(prefix="benchmark-v1-") as train_dir:
    loop.run(_config(train_dir, batch, warmup, steps), names, session_config, on_step=on_step)
  return seconds()
