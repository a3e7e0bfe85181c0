"""ParameterServerStrategy + ClusterCoordinator on a local cluster (chief, workers, ps).

With one worker the asynchronous updates happen one after another, so the run is the
one-device run, bit for bit, also with the large weights partitioned over two ps tasks and
started from another run's checkpoint (--init_from). With two workers the global step is
exact, also when a worker is killed mid-run: the training goes on and the coordinator counts
the step the dead worker had in flight once (tests/test_deploy_tfjob.py, the job as its TFJob
starts it; tests/test_launcher.py, the local launcher's part).
"""

import glob
import re

import numpy as np
import pytest
import tensorflow as tf

from cifar10 import checkpoints
from harness.control import run_summaries
from tests import helpers

pytestmark = pytest.mark.slow
FLAGS = ("--dataset=synthetic", "--batch_size=8", "--seed=2", "--log_frequency=10")


def _pss(tmp_path, workers, *extra, ps=1):
  return helpers.start("strategies.launch", f"--workers={workers}", f"--ps={ps}",
                       "--timeout_secs=240", "--", *FLAGS, f"--train_dir={tmp_path}", *extra)


def _summaries(train_dir):
  """{tag: (step, value)}: scalars, and histograms as TF2 stores them ([bucket, 3] tensors)."""
  out = {}
  for path in glob.glob(f"{train_dir}/events.out.tfevents.*"):
    for event in tf.compat.v1.train.summary_iterator(path):
      for v in event.summary.value:
        if v.tag in run_summaries.TAGS:  # timing and settings, not numbers of the run
          continue
        out[v.tag] = (event.step, tf.make_ndarray(v.tensor))
  return out


def test_one_worker_follows_the_one_device_run_with_partitioned_weights(tmp_path):
  # The reference: the one-device run, from the seed to step 12 (FLAGS' values), in a process
  # of its own as the job's are. In this test's process (an xdist worker, after other tests)
  # its histograms came out 1 ULP apart from the job's in 2 CI runs of many, never alone.
  reference = helpers.run("strategies.train", *FLAGS, "--strategy=one_device", "--max_steps=12",
                          "--save_checkpoint_steps=6", "--save_summaries_steps=11",
                          f"--train_dir={tmp_path / 'one'}", fork=True)
  assert reference.returncode == 0, reference.stderr[-3000:]
  # The job starts from the reference's step 6 (--init_from, as every mode does:
  # tests/test_init_from.py), with the weights over 128 KiB split over two ps tasks: conv2
  # (400 KiB), local3 (3.4 MiB), local4 (288 KiB).
  init_from = str(tmp_path / "one" / "ckpt-6")
  proc = _pss(tmp_path / "pss", 1, "--max_steps=12", "--save_summaries_steps=11",
              f"--init_from={init_from}", "--ps_partition_min_bytes=131072", ps=2)
  out, _ = proc.communicate(timeout=240)
  assert proc.returncode == 0, out[-3000:]
  assert f"Initialized from {init_from} at step 6" in out, out[-3000:]
  partitioned = {name: sorted(re.findall(r"/job:ps/replica:0/task:(\d)/", devices))
                 for name, devices in re.findall(r"(\S+) is partitioned into 2 shards: (.*)", out)}
  assert partitioned == {"conv2/weights": ["0", "1"], "local3/weights": ["0", "1"],
                         "local4/weights": ["0", "1"]}
  a, b = checkpoints.read(str(tmp_path / "pss")), checkpoints.read(str(tmp_path / "one"))
  # The coordinator's summaries: loss, learning rate and weight histograms, as one_device's.
  pss, one = _summaries(tmp_path / "pss"), _summaries(tmp_path / "one")
  assert {t for t in pss if not t.endswith("/gradients")} == set(pss)
  assert {"loss", "learning_rate", "local3/weights/values"} <= set(pss)
  # From step 6, not 0: step 11, the job's last (every 11 steps). A summary step while the
  # coordinator has later steps in flight was seen 1 ULP off one_device's in one run of
  # many (step 10 of this job, conv1's histogram): the last step, after which nothing runs,
  # is the one compared.
  assert helpers.summary_steps(tmp_path / "pss")["loss"] == [11]
  for tag, (step, value) in pss.items():
    assert step == one[tag][0] == 11, tag  # the last of each tag: step 11's
    np.testing.assert_array_equal(value, one[tag][1], err_msg=tag)
  assert a.global_step == b.global_step == 12
  for name in a.weights:
    np.testing.assert_array_equal(a.weights[name], b.weights[name], err_msg=name)
    np.testing.assert_array_equal(a.averages[name], b.averages[name], err_msg=name)
