"""Times training in this process, one kind per process (for benchmarks.throughput).

Each function sets up N devices (this must be the process's first TensorFlow work), runs
`warmup` untimed steps (tracing, graph optimisation) and returns (wall seconds, CPU seconds)
of the next `steps` steps; the CPU seconds are the whole process's, every thread's
(`time.process_time`), so wall x cores over them is how busy the cores were kept:

  tf2         strategies.loop.train, the real TF2 loop (steps_per_loop steps per call), under
              --strategy=mirrored or (`strategy`) central_storage
  v1          compat_v1.loop.train, the real tower loop
  keras_path  examples.keras_loop.fit, the project's Keras path (same model and numbers)
  keras_peer  benchmarks.keras_peer: the CNN as Keras users write it, compile + fit
  bare_step   forward, backward and SGD of the model in one plain tf.function, no strategy,
              one constant batch: no input pipeline, EMA, summaries or checks (the ceiling)

The real loops run into a temporary train_dir on the shared synthetic stream with what a
user's run does: the per-step checks, log lines, summaries every --save_summaries_steps, the
final checkpoint. `peak_gflops` measures the machine's float32 matmul rate, the yardstick of
`training_flops_per_example`.
"""

import tempfile
import time

# Multiply-accumulates of one forward pass (cifar10.model): 5x5 convolutions producing 24x24
# and 12x12 maps of 64 channels, then the local layers.
_FORWARD_MACS = (24 * 24 * 64 * 5 * 5 * 3 + 12 * 12 * 64 * 5 * 5 * 64
                 + 2304 * 384 + 384 * 192 + 192 * 10)


def training_flops_per_example():
  """Forward plus backward FLOPs of one example: 2 per MAC forward, and twice the forward in
  the backward pass (gradients of weights and of inputs), less conv1's input gradient, which
  nothing needs."""
  conv1 = 24 * 24 * 64 * 5 * 5 * 3
  return 2 * (3 * _FORWARD_MACS - conv1)


def _now():
  return time.perf_counter(), time.process_time()


def _span(begin, end):
  """(wall seconds, CPU seconds) between two _now()s."""
  return end[0] - begin[0], end[1] - begin[1]


def _clock(warmup, steps):
  marks = {}

  def on_step(step, loss, learning_rate):  # pylint: disable=unused-argument
    if step + 1 in (warmup, warmup + steps):
      marks[step + 1] = _now()

  return on_step, lambda: _span(marks[warmup], marks[warmup + steps])


def _config(train_dir, batch, warmup, steps, precision):
  from cifar10 import config  # pylint: disable=g-import-not-at-top
  # One checkpoint, at the end (keras_fit's epoch is save_checkpoint_steps long).
  return config.TrainConfig(train_dir=train_dir, max_steps=warmup + steps, batch_size=batch,
                            dataset="synthetic", precision=precision,
                            save_checkpoint_steps=warmup + steps)


# What every measurement of this process runs under: the bit contract's GPU settings
# (--deterministic, the default, as the trainers) or not (benchmarks.throughput
# --nodeterministic: what they cost, on a GPU).
SETTINGS = {"deterministic": True}


def configure(deterministic):
  SETTINGS["deterministic"] = deterministic


def _tf2_strategy(n, threads, name="mirrored"):
  from cifar10 import config  # pylint: disable=g-import-not-at-top
  from strategies import devices  # pylint: disable=g-import-not-at-top
  names = devices.setup(config.DeviceConfig(num_gpus=n, intra_op_threads=threads,
                                            deterministic=SETTINGS["deterministic"]))
  return devices.get_strategy(name, names)


def tf2(n, batch, warmup, steps, threads, precision="fp32", steps_per_loop=1,
        strategy="mirrored"):
  from strategies import loop  # pylint: disable=g-import-not-at-top
  strategy = _tf2_strategy(n, threads, strategy)
  on_step, seconds = _clock(warmup, steps)
  with tempfile.TemporaryDirectory(prefix="benchmark-tf2-") as train_dir:
    loop.train(_config(train_dir, batch, warmup, steps, precision), strategy, on_step=on_step,
             steps_per_loop=steps_per_loop)
  return seconds()


def v1(n, batch, warmup, steps, threads, precision="fp32"):
  from cifar10 import config  # pylint: disable=g-import-not-at-top
  from compat_v1 import devices, loop  # pylint: disable=g-import-not-at-top,g-multiple-import
  names, session_config = devices.setup(config.DeviceConfig(
      num_gpus=n, intra_op_threads=threads, deterministic=SETTINGS["deterministic"]))
  on_step, seconds = _clock(warmup, steps)
  with tempfile.TemporaryDirectory(prefix="benchmark-v1-") as train_dir:
    loop.train(_config(train_dir, batch, warmup, steps, precision), names, session_config,
             on_step=on_step)
  return seconds()


def _batch_clock(warmup, steps):
  """A Keras callback timing batches warmup .. warmup + steps of fit, and its seconds."""
  import keras  # pylint: disable=g-import-not-at-top
  marks = {}

  class Clock(keras.callbacks.Callback):
    count = 0

    def on_train_batch_end(self, batch, logs=None):
      Clock.count += 1
      if Clock.count in (warmup, warmup + steps):
        marks[Clock.count] = _now()

  return Clock(), lambda: _span(marks[warmup], marks[warmup + steps])


def keras_path(n, batch, warmup, steps, threads, precision="fp32"):
  from examples import keras_loop  # pylint: disable=g-import-not-at-top
  strategy = _tf2_strategy(n, threads)
  clock, seconds = _batch_clock(warmup, steps)
  with tempfile.TemporaryDirectory(prefix="benchmark-keras-") as train_dir:
    keras_loop.fit(_config(train_dir, batch, warmup, steps, precision), strategy,
                   callbacks=[clock])
  return seconds()


def keras_peer(n, batch, warmup, steps, threads, precision="fp32"):
  import keras  # pylint: disable=g-import-not-at-top
  from benchmarks import keras_peer as peer  # pylint: disable=g-import-not-at-top
  from cifar10 import data_sources, input_pipeline  # pylint: disable=g-import-not-at-top,g-multiple-import
  policy = {"fp32": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}[precision]
  keras.mixed_precision.set_global_policy(policy)
  strategy = _tf2_strategy(n, threads)
  net = peer.build(strategy)
  source = data_sources.synthetic_source(0)
  dataset = input_pipeline.train_dataset(source, seed=0, global_batch_size=batch * n)
  clock, seconds = _batch_clock(warmup, steps)
  net.fit(dataset, epochs=1, steps_per_epoch=warmup + steps, callbacks=[clock], verbose=0)
  return seconds()


def bare_step(n, batch, warmup, steps, threads, precision="fp32"):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from cifar10 import data_sources, input_pipeline, losses, model  # pylint: disable=g-import-not-at-top,g-multiple-import
  from cifar10 import precision as mixed  # pylint: disable=g-import-not-at-top
  from harness.devices import determinism  # pylint: disable=g-import-not-at-top
  del n  # one device: the ceiling of one replica's step
  tf.config.threading.set_intra_op_parallelism_threads(threads)
  determinism.apply(SETTINGS["deterministic"])
  params = {k: tf.Variable(v) for k, v in model.initial_values(0).items()}
  source = data_sources.synthetic_source(0)
  images, labels = next(iter(input_pipeline.train_dataset(source, seed=0,
                                                          global_batch_size=batch)))
  dtype = mixed.compute_dtype(precision)

  @tf.function
  def step():
    with tf.GradientTape() as tape:
      loss = losses.tower_loss(model.inference(params, images, dtype), labels, params)
    grads = tape.gradient(loss, [params[k] for k in model.VARIABLE_NAMES])
    for name, grad in zip(model.VARIABLE_NAMES, grads):
      params[name].assign_sub(0.1 * grad)
    return loss

  for _ in range(warmup):
    step().numpy()
  begin = _now()
  for _ in range(steps - 1):
    step()
  step().numpy()  # waits for the queue: the last timed step is done
  return _span(begin, _now())


def peak_gflops(threads, size=2048, seconds=0.5):
  """float32 GFLOP/s of a size x size matmul through TensorFlow on this machine (on GPUs with
  TensorFloat-32 off under --deterministic, as the steps it is the ceiling of).

  Timed over a run of matmuls at least `seconds` long, doubled until it is: a fixed count
  (20, before) lasted 2-3 s on a 2-core CPU, and 20 x 17.2 GFLOP is about 5 ms at an H200's
  67 TFLOP/s fp32 rate (its data sheet's figure, not measured here), too
  short a window to time queued GPU work against its launch cost."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from harness.devices import determinism  # pylint: disable=g-import-not-at-top
  tf.config.threading.set_intra_op_parallelism_threads(threads)
  determinism.apply(SETTINGS["deterministic"])
  a, b = tf.random.normal([size, size]), tf.random.normal([size, size])
  matmul = tf.function(tf.matmul)
  for _ in range(3):
    matmul(a, b).numpy()

  def run(repeats):
    for _ in range(repeats):
      out = matmul(a, b)
    out.numpy()  # waits for the queue: the last matmul is done
  repeats, elapsed = timed_window(run, seconds)
  return 2 * size ** 3 * repeats / elapsed / 1e9


def timed_window(run, seconds, clock=time.perf_counter):
  """(repeats, seconds taken) of the first `run(repeats)` that lasted at least `seconds`,
  repeats doubling from 1."""
  repeats = 1
  while True:
    begin = clock()
    run(repeats)
    elapsed = clock() - begin
    if elapsed >= seconds:
      return repeats, elapsed
    repeats *= 2
