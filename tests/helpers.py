"""Running the binaries the way a user does, bounded in time, with readable logs."""

import contextlib
import fcntl
import hashlib
import os
import subprocess
import sys
import tempfile

from tests import forked

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def env():
  return forked.server_env()


# Not installed (pyproject.toml): run from a checkout's root, as README says.
CHECKOUT_ONLY = ("examples", "benchmarks", "tests")


def _cwd(module):
  """A neutral directory, where an installed command runs; the checkout for the others."""
  return REPO if module.split(".")[0] in CHECKOUT_ONLY else "/"


def run(module, *args, timeout=240, fork=False):
  """`python -m module args...` as a user runs it; returns the CompletedProcess. `fork`: from
  the fork server's TensorFlow (tests/forked.py), where the check is not about the start."""
  return (forked if fork else subprocess).run(
      [sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=timeout,
      env=env(), cwd=_cwd(module))


def run_with(prefix, environ, module, *args, timeout=240):
  """`prefix... python -m module args...` (a `taskset -c 0` before it) in `environ`."""
  return subprocess.run([*prefix, sys.executable, "-m", module, *args], capture_output=True,
                        text=True, timeout=timeout, env=environ, cwd=_cwd(module))


def start(module, *args, fork=False):
  return (forked if fork else subprocess).Popen(
      [sys.executable, "-m", module, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
      text=True, env=env(), cwd=_cwd(module))


def check_one_line(result, expected):
  """That `result` failed with exit 2 and one `error:` line holding `expected`; the line."""
  assert result.returncode == 2, result.stderr[-2000:]
  line = error_line(result)
  assert line.startswith("error: ") and expected in line, line
  return line


def error_line(result):
  """The last stderr line, which must be the whole one-line error."""
  lines = result.stderr.strip().splitlines()
  return lines[-1] if lines else ""


def write_bin_dataset(data_dir, seed, train_per_file, num_test):
  """A `cifar-10-batches-bin` folder under data_dir whose records are the first examples of
  the synthetic source (learnable, so precision means something): 5 training files of
  train_per_file records and a test file of num_test. Returns the (images, labels) written
  per split."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from cifar10 import data_sources  # pylint: disable=g-import-not-at-top
  root = os.path.join(data_dir, "cifar-10-batches-bin")
  os.makedirs(root, exist_ok=True)
  written = {}
  for split, n in (("train", 5 * train_per_file), ("test", num_test)):
    source = data_sources.synthetic_source(seed, split)
    images, labels = tf.data.Dataset.range(n).map(source.fetch).batch(n).get_single_element()
    images, labels = images.numpy(), labels.numpy()
    records = np.concatenate([labels.astype(np.uint8)[:, None],
                              images.transpose(0, 3, 1, 2).reshape(n, -1)], axis=1)
    chunks = np.split(records, 5) if split == "train" else [records]
    for name, chunk in zip(data_sources.BIN_FILES[split], chunks):
      chunk.tofile(os.path.join(root, name))
    written[split] = (images, labels)
  return written


def constant_shapes(meta_path):
  """Shapes of the Const nodes in the graph of a `.meta` file (data baked into a graph shows
  up here as a constant with one row per example)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  with open(meta_path, "rb") as f:
    graph_def = tf.compat.v1.MetaGraphDef.FromString(f.read()).graph_def
  return [tuple(d.size for d in node.attr["value"].tensor.tensor_shape.dim)
          for node in graph_def.node if node.op == "Const"]


def train_tf2(train_config, devices=("/cpu:0",), strategy="one_device", **kwargs):
  """strategies.loop.train in this process, over `strategy` on these (logical CPU) devices."""
  from strategies import devices as tf2_devices  # pylint: disable=g-import-not-at-top
  from strategies import loop  # pylint: disable=g-import-not-at-top
  return loop.train(train_config, tf2_devices.get_strategy(strategy, list(devices)), **kwargs)


def train_v1(train_config, num_gpus=1, **kwargs):
  """compat_v1.loop.train in this process, on num_gpus towers (CPU devices of its Session)."""
  from cifar10 import config  # pylint: disable=g-import-not-at-top
  from compat_v1 import devices as v1_devices  # pylint: disable=g-import-not-at-top
  from compat_v1 import loop  # pylint: disable=g-import-not-at-top
  names, session_config = v1_devices.setup(config.DeviceConfig(num_gpus=num_gpus))
  return loop.train(train_config, names, session_config, **kwargs)


def trained(train_dir, seed):
  """The checkpoint state of train_dir, checked to hold finite weights that all moved away
  from the --seed's initial values."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  from cifar10 import checkpoints  # pylint: disable=g-import-not-at-top
  from cifar10 import model  # pylint: disable=g-import-not-at-top
  state = checkpoints.read(str(train_dir))
  initial = model.initial_values(seed)
  for name in model.VARIABLE_NAMES:
    assert np.all(np.isfinite(state.weights[name])), name
    assert not np.array_equal(state.weights[name], initial[name]), name
  return state


def summary_steps(folder):
  """{tag: [step, ...]} of the summaries in the events files directly in `folder`, in the
  order written (each file read whole: a file cut mid-record fails here)."""
  import glob  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  steps = {}
  for path in sorted(glob.glob(os.path.join(str(folder), "events.out.tfevents.*"))):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        steps.setdefault(value.tag, []).append(event.step)
  return steps


def call(module, *args):
  """`python -m module args...` inside this process (harness.command_line.cli.call: the same parsing, the
  same one-line errors); returns a CompletedProcess with returncode, stdout (its results)
  and stderr (its log lines, then what it printed there)."""
  import contextlib  # pylint: disable=g-import-not-at-top
  import importlib  # pylint: disable=g-import-not-at-top
  import io  # pylint: disable=g-import-not-at-top
  import logging  # pylint: disable=g-import-not-at-top
  from harness.command_line import cli  # pylint: disable=g-import-not-at-top
  binary = importlib.import_module(module)
  import inspect  # pylint: disable=g-import-not-at-top
  takes_args = len(inspect.signature(binary.main).parameters) == 2  # main(values, args)
  logs, out, err = io.StringIO(), io.StringIO(), io.StringIO()
  handler = logging.StreamHandler(logs)
  logging.getLogger().addHandler(handler)
  try:
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
      status = cli.call(binary.define_flags, binary.main, list(args), takes_args=takes_args)
  finally:
    logging.getLogger().removeHandler(handler)
    sys.stdout.write(out.getvalue())  # still there for capsys, as a process's would be
  return subprocess.CompletedProcess([module, *args], status, out.getvalue(),
                                     logs.getvalue() + err.getvalue())


@contextlib.contextmanager
def recorder_build_lock():
  """One build of ./recorder at a time: its setup.py clears recorder/build and writes its
  egg-info there, so two xdist workers building it at once (the wheel test, and the TF 1.15
  tests where TF115_PYTHON is set) broke each other's build."""
  path = os.path.join(tempfile.gettempdir(),
                      f"recorder-build-{hashlib.sha1(REPO.encode()).hexdigest()[:12]}.lock")
  with open(path, "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
      yield
    finally:
      fcntl.flock(lock, fcntl.LOCK_UN)


def mean_cross_entropy_loss(model, images, labels, global_batch_size):
  """A port's replica_loss under gradient_reduction="mean": the mean sparse cross-entropy of
  the replica's rows plus the model's own losses (its regularizers), as a tower's loss."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  del global_batch_size
  logits = model(images)
  ce = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                     logits=logits))
  return (ce + tf.add_n(model.losses) if model.losses else ce), logits


def image_batches(replicas, per_replica, size, classes, steps, seed=0):
  """`steps` global batches (images [N x per_replica, size, size, 3] float32 normal, int32
  labels below `classes`) from numpy's generator at `seed`: what a porting test feeds."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(seed)
  n = replicas * per_replica
  return [(rng.normal(size=(n, size, size, 3)).astype(np.float32),
           rng.integers(0, classes, size=n).astype(np.int32)) for _ in range(steps)]
