"""What a porting comparison costs on a large model: time, and memory against the model's own.

  python -m benchmarks.porting_scale --hidden=3072,8192 --steps=3

The model is the kind of TF1 multi-GPU script teams ported: a `tf.layers` CNN (three
convolutions with biases and max-pooling, flatten, two dense layers of --hidden units each
followed by dropout, logits), softmax cross-entropy on one-hot labels, AdamOptimizer; the
port is Keras 3 with porting.TF1Adam. --hidden=3072 gives ~20M parameters, 8192 ~100M. Each
size runs in a child process of its own (peak memory is a process's): one replica, --steps
steps, once with TF1Adam (EQUAL: every row the same bits) and once with Keras's Adam (every
weight differs from step 2: the report's most expensive case). Prints, per size: parameters,
the two sides' state (variables, optimizer slots and gradients, both sides, in MB), the
comparison's peak memory above the process before it (MB, and x that state), the seconds of
the training steps and of the report's differences.
"""

import json
import resource
import sys
import time

from absl import flags

from benchmarks import children
from cifar10.errors import UsageError
from harness.command_line import cli
from harness.command_line import flag_ranges

MAX_HIDDEN = 65536  # units of a dense layer (~17G parameters)

SIZE, CLASSES, FILTERS = 32, 10, (64, 128, 256)
BATCH = 16


def define_flags(fv):
  flag_ranges.integers("hidden", ["3072"], "Units of each of the two dense layers, one size "
                       "per value (3072: ~20M parameters; 8192: ~100M).", flag_values=fv,
                       bounds=(1, MAX_HIDDEN))
  flag_ranges.integer("steps", 3, "Steps compared.", flag_values=fv)
  flags.DEFINE_string("optimizer", "both", "tf1adam, keras_adam or both.", flag_values=fv)
  flag_ranges.integer("child_hidden", 0, "Internal: measure this size.", flag_values=fv,
                      bounds=(0, MAX_HIDDEN),  # 0: not a child
                      applies="internal (a measurement's own process)")
  flags.DEFINE_string("child_optimizer", "", "Internal.", flag_values=fv)


def parameters(hidden):
  """The model's parameter count for `hidden` units."""
  count, channels = 0, 3
  for filters in FILTERS:
    count += 3 * 3 * channels * filters + filters
    channels = filters
  flat = (SIZE // 2 ** len(FILTERS)) ** 2 * channels
  return count + flat * hidden + hidden + hidden * hidden + hidden + hidden * CLASSES + CLASSES


def _port(hidden, optimizer):
  import keras  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import porting  # pylint: disable=g-import-not-at-top
  v1 = tf.compat.v1

  def tower_loss(images, labels):
    layers = porting.tf1_layers.layers()
    x = images
    for i, filters in enumerate(FILTERS):
      x = layers.conv2d(x, filters, 3, padding="same", activation=tf.nn.relu, name=f"conv{i}")
      x = layers.max_pooling2d(x, 2, 2)
    x = layers.flatten(x)
    for i in range(2):
      x = layers.dropout(layers.dense(x, hidden, tf.nn.relu, name=f"fc{i}"), 0.5,
                         training=True)
    logits = layers.dense(x, CLASSES, name="logits")
    return tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(
        labels=tf.one_hot(labels, CLASSES), logits=logits))

  class _GatedConv(keras.layers.Layer):
    """Conv2D + ReLU with TF1's conv bias gradient (porting.gated_bias_add)."""

    def __init__(self, filters):
      super().__init__()
      self.filters = filters

    def build(self, input_shape):
      self.kernel = self.add_weight(shape=(3, 3, input_shape[-1], self.filters),
                                    initializer="glorot_uniform", name="kernel")
      self.bias = self.add_weight(shape=(self.filters,), initializer="zeros", name="bias")

    def call(self, x):
      return tf.nn.relu(porting.gated_bias_add(tf.nn.conv2d(x, self.kernel, 1, "SAME"),
                                               self.bias))

  def build():
    model = keras.Sequential(
        [keras.Input((SIZE, SIZE, 3))] +
        [layer for f in FILTERS for layer in (_GatedConv(f), keras.layers.MaxPooling2D(2, 2))] +
        [keras.layers.Flatten()] +
        [layer for _ in range(2) for layer in (keras.layers.Dense(hidden, "relu"),
                                                keras.layers.Dropout(0.5))] +
        [keras.layers.Dense(CLASSES)])
    return model

  def replica_loss(model, images, labels, global_batch):
    del global_batch
    return tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(
        labels=tf.one_hot(labels, CLASSES), logits=model(images, training=True)))

  tf2 = ((lambda: porting.TF1Adam(1e-4)) if optimizer == "tf1adam" else
         (lambda: keras.optimizers.Adam(1e-4, epsilon=1e-8)))
  return porting.Port(tower_loss=tower_loss, tf1_optimizer=lambda s: v1.train.AdamOptimizer(
      1e-4), build_model=build, replica_loss=replica_loss, tf2_optimizer=tf2,
                      gradient_reduction="mean")


def _rss_mb():
  with open("/proc/self/statm") as f:
    return int(f.read().split()[1]) * resource.getpagesize() / 2 ** 20


def measure(hidden, steps, optimizer):
  """{parameters, state_mb, peak_mb, x_state, steps_s, report_s, equal} of one comparison."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import porting  # pylint: disable=g-import-not-at-top
  from porting import report  # pylint: disable=g-import-not-at-top
  porting.replica_devices(1)
  rng = np.random.default_rng(0)
  batches = [(rng.normal(size=(BATCH, SIZE, SIZE, 3)).astype(np.float32),
              rng.integers(0, CLASSES, BATCH).astype(np.int32)) for _ in range(steps)]
  spent = [0.0]
  step_rows = report.step_rows

  def timed(*args):
    begin = time.perf_counter()
    try:
      return step_rows(*args)
    finally:
      spent[0] += time.perf_counter() - begin
  report.step_rows = timed
  before = _rss_mb()
  begin = time.perf_counter()
  result = porting.compare(_port(hidden, optimizer), batches, replicas=1, steps=steps)
  total = time.perf_counter() - begin
  peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - before
  count = parameters(hidden)
  state = 2 * count * 4 * 4 / 2 ** 20  # both sides: variables, m, v, gradients (float32)
  return {"parameters": count, "optimizer": optimizer, "state_mb": round(state),
          "peak_mb": round(peak), "x_state": round(peak / state, 2),
          "steps_s": round(total - spent[0], 1), "report_s": round(spent[0], 2),
          "equal": result.equal}


def main(values, args):
  del args
  if values.child_hidden:
    if values.child_optimizer not in ("tf1adam", "keras_adam"):
      raise UsageError("--child_optimizer must be tf1adam or keras_adam (--child_hidden is "
                       "internal: give --hidden and --optimizer)")
    print(json.dumps(measure(values.child_hidden, values.steps, values.child_optimizer)))
    return
  sizes = values.hidden
  if values.optimizer not in ("tf1adam", "keras_adam", "both"):
    raise UsageError(f"--optimizer must be tf1adam, keras_adam or both, got "
                     f"{values.optimizer!r}")
  kinds = ["tf1adam", "keras_adam"] if values.optimizer == "both" else [values.optimizer]
  print(f"{'params':>12} {'optimizer':>10} {'state MB':>9} {'peak MB':>8} {'x state':>8} "
        f"{'steps s':>8} {'report s':>9}  verdict")
  progress = children.Progress(len(sizes) * len(kinds))
  for hidden in sizes:
    for kind in kinds:
      child = progress.measured(f"{hidden} units, {kind}", lambda h=hidden, k=kind: children.run(
          [sys.executable, "-m", "benchmarks.porting_scale", f"--child_hidden={h}",
           f"--child_optimizer={k}", f"--steps={values.steps}"]))
      if child.returncode:
        lines = child.stderr.strip().splitlines() or ["no output"]
        raise UsageError(f"the comparison of {hidden} units failed: {lines[-1]}")
      r = json.loads(child.stdout.strip().splitlines()[-1])
      print(f"{r['parameters']:>12,} {kind:>10} {r['state_mb']:>9} {r['peak_mb']:>8} "
            f"{r['x_state']:>8} {r['steps_s']:>8} {r['report_s']:>9}  "
            f"{'EQUAL' if r['equal'] else 'NOT EQUAL'}")


if __name__ == "__main__":
  cli.app_run(flags.FLAGS, define_flags, main, takes_args=True)
