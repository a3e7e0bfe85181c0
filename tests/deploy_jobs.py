"""What the deployment tests share: the deploy/ folder, a run small enough for a test, and
starting every pod or task of a job at once on 127.0.0.1."""

import os
import re
import subprocess
import time

import tensorflow as tf

from tests import forked
from tests import helpers

DEPLOY = os.path.join(helpers.REPO, "deploy")
# What the tests change in the files' arguments: a run that fits in a test.
SMALL = {"--batch_size": "4", "--max_steps": "6", "--save_checkpoint_steps": "3",
         "--log_frequency": "3", "--evaluator_num_examples": "64"}


def args(args, train_dir, overrides=None):
  """The manifest's arguments with SMALL's values, then `overrides`', and train_dir (others
  as written)."""
  given = dict(a.split("=", 1) for a in args)
  given.update(SMALL)
  given.update(overrides or {})
  given["--train_dir"] = str(train_dir)
  return [f"{k}={v}" for k, v in given.items()]


def run_all(commands, timeout=240):
  """Starts every (name, argv, env) at once; returns {name: (status, output)}."""
  procs = {name: forked.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, env=env, cwd="/")
           for name, argv, env in commands}
  deadline, results = time.time() + timeout, {}
  try:
    for name, proc in procs.items():
      out, _ = proc.communicate(timeout=max(1.0, deadline - time.time()))
      results[name] = (proc.returncode, out)
  finally:
    for proc in procs.values():
      proc.kill()
      proc.wait()
  return results


def weights(train_dir):
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(train_dir)))
  # Not the loss averages: the summaries' values of the process's last local replica (the
  # original's last tower), replica 1 of a mirrored run and replica 0 of a worker's.
  return {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map()
          if "OPTIMIZER_SLOT" not in k and k != "_CHECKPOINTABLE_OBJECT_GRAPH"
          and not k.startswith("loss_averages/")}


def evaluated_the_final_step(out, train_dir, step):
  final = str(train_dir / f"ckpt-{step}")
  assert re.search(r"step %d: precision @ 1 = \d\.\d{3}, loss = \d+\.\d{3} \(64 examples, "
                   % step + re.escape(final), out), out[-3000:]
  assert f"Scored the final step {step} of --max_steps={step}; the evaluator is done" in out
  assert tf.io.gfile.glob(str(train_dir / "eval" / "events.out.tfevents.*"))


def port_is_free(port):
  import socket  # pylint: disable=g-import-not-at-top
  with socket.socket() as probe:
    try:
      probe.bind(("127.0.0.1", port))
    except OSError:
      return False
  return True
