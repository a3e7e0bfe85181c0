"""--all_reduce: the all-reduce is a choice, checked where it cannot run."""

import re

import numpy as np
import pytest

from cifar10 import checkpoints
from cifar10.errors import UsageError
from harness import cluster
from strategies import devices
from tests import helpers

FLAGS = ("--dataset=synthetic", "--batch_size=4", "--max_steps=2", "--num_gpus=2")


@pytest.mark.slow
def test_the_explicit_sum_on_one_device_is_what_auto_runs_on_cpus(tmp_path):
  for name, flag in (("auto", "--all_reduce=auto"), ("one", "--all_reduce=reduce_to_one_device")):
    result = helpers.call("strategies.train", *FLAGS, "--max_steps=1", flag,
                          f"--train_dir={tmp_path / name}")
    assert result.returncode == 0, result.stderr[-2000:]
  auto, one = (checkpoints.read(str(tmp_path / n)) for n in ("auto", "one"))
  for name in auto.weights:
    np.testing.assert_array_equal(auto.weights[name], one.weights[name], err_msg=name)


@pytest.mark.parametrize("strategy,all_reduce,expected", [
    ("mirrored", "nccl", "--all_reduce=nccl needs GPUs"),
    ("mirrored", "hierarchical_copy", "--all_reduce=hierarchical_copy needs GPUs"),
    ("mirrored", "ring", "--all_reduce=ring is not one of auto, nccl, hierarchical_copy, "
                         "reduce_to_one_device (--strategy=mirrored)"),
    ("one_device", "nccl", "--all_reduce applies to mirrored and multi_worker_mirrored"),
    ("multi_worker_mirrored", "hierarchical_copy", "is not one of auto, ring, nccl"),
    ("multi_worker_mirrored", "nccl", "--all_reduce=nccl needs GPUs; on CPU use auto or ring"),
])
def test_an_all_reduce_that_cannot_run_here_is_one_line(strategy, all_reduce, expected,
                                                        monkeypatch):
  monkeypatch.setenv("TF_CONFIG", cluster.to_json({"worker": ["127.0.0.1:1"]}, "worker", 0))
  names = ["/cpu:0", "/cpu:1"] if strategy == "mirrored" else ["/cpu:0"]
  with pytest.raises(UsageError, match=re.escape(expected)):
    devices.get_strategy(strategy, names, all_reduce=all_reduce)


def test_the_binary_says_it_in_one_line(tmp_path):
  result = helpers.call("strategies.train", *FLAGS, "--all_reduce=nccl", f"--train_dir={tmp_path}")
  assert result.returncode == 2
  assert helpers.error_line(result).startswith("error: --all_reduce=nccl needs GPUs")
