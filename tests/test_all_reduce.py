"""--all_reduce: the all-reduce is a choice, checked where it cannot run."""

import re

import pytest

from cifar10.errors import UsageError
from harness.clusters import cluster
from strategies import devices
from tests import helpers

FLAGS = ("--dataset=synthetic", "--batch_size=4", "--max_steps=2", "--num_gpus=2")


@pytest.mark.parametrize("names,all_reduce,kind,device", [
    # NCCL, named: left to MirroredStrategy, auto became reduce-to-one-device (a warning only)
    # whenever fewer GPUs were visible than the machine has (--visible_gpus=0,2 on 4 GPUs).
    (["/gpu:0", "/gpu:1"], "auto", "NcclAllReduce", None),
    (["/gpu:0", "/gpu:1"], "nccl", "NcclAllReduce", None),
    (["/gpu:0", "/gpu:1"], "hierarchical_copy", "HierarchicalCopyAllReduce", None),
    (["/gpu:0", "/gpu:1"], "reduce_to_one_device", "ReductionToOneDevice", "/gpu:0"),
    # Between logical CPUs auto is the sum on the first device, in replica order: the order
    # that keeps TF2 bit-identical to the towers' average (tests/test_equivalence.py).
    (["/cpu:0", "/cpu:1"], "auto", "ReductionToOneDevice", "/cpu:0"),
    (["/cpu:0", "/cpu:1"], "reduce_to_one_device", "ReductionToOneDevice", "/cpu:0"),
])
def test_each_choice_builds_its_all_reduce(names, all_reduce, kind, device):
  ops = devices._cross_device_ops(all_reduce, names)  # pylint: disable=protected-access
  assert type(ops).__name__ == kind
  if device:
    assert ops.reduce_to_device == device


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
