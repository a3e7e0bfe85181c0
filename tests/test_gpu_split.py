"""Each task of a local cluster sees its own GPUs (harness.clusters.gpu_split), proved without a GPU.

The machine's GPU list is faked at gpu_split's boundary (CUDA_VISIBLE_DEVICES, or what
nvidia-smi would list); the launchers' tasks are built as they build them and handed to
gpu_split.assign, which launcher.run calls before it starts any task.
"""

import sys

import pytest

from cifar10.errors import UsageError
from harness.clusters import gpu_split
from harness.clusters import launcher


def _mwms(workers, num_gpus):
  return [launcher.Task("worker", i, [sys.executable], gpus=num_gpus) for i in range(workers)]


def test_each_mwms_worker_sees_only_its_own_gpus():
  # Before: every worker got the parent's environment, saw all 8 GPUs and made them all its
  # replicas (8 per worker, whatever its --num_gpus), each mapping memory on every GPU.
  tasks = _mwms(workers=2, num_gpus=2)
  gpu_split.assign(tasks, [str(i) for i in range(8)])
  assert [t.env["CUDA_VISIBLE_DEVICES"] for t in tasks] == ["0,1", "2,3"]


def test_servers_and_the_coordinator_see_no_gpu_and_a_visible_list_is_respected(monkeypatch):
  monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5,6,7")
  tasks = [launcher.Task("ps", 0, [], server=True, gpus=0),
           launcher.Task("worker", 0, [], gpus=1), launcher.Task("worker", 1, [], gpus=1),
           launcher.Task("chief", 0, [], gpus=0)]
  gpu_split.assign(tasks, gpu_split.machine_gpus())
  assert [t.env["CUDA_VISIBLE_DEVICES"] for t in tasks] == ["", "3", "5", ""]


def test_without_gpus_nothing_is_set(monkeypatch):
  monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
  monkeypatch.setattr(gpu_split.subprocess, "run", _no_nvidia_smi)
  tasks = _mwms(workers=2, num_gpus=2)
  gpu_split.assign(tasks, gpu_split.machine_gpus())
  assert [t.env for t in tasks] == [{}, {}]


def _no_nvidia_smi(*args, **kwargs):
  raise FileNotFoundError("nvidia-smi")


def test_more_gpus_than_the_machine_has_is_one_line():
  with pytest.raises(UsageError, match=r"the job's tasks use 6 GPU\(s\) together \(worker:0: "
                     r"2, worker:1: 2, worker:2: 2\) but this machine has 4 \(0,1,2,3\)"):
    gpu_split.assign(_mwms(workers=3, num_gpus=2), ["0", "1", "2", "3"])


@pytest.mark.parametrize("args,expected", [
    ([], 1), (["--num_gpus=2"], 2), (["--num_gpus", "3", "--x"], 3),
    (["--num_gpus=2", "--num_gpus=4"], 4)])
def test_the_tasks_num_gpus_is_read_as_absl_reads_it(args, expected):
  assert gpu_split.flag_value(args, "num_gpus", 1) == expected


def test_the_launchers_hand_their_tasks_gpus(monkeypatch):
  seen = []

  def run(tasks, chief, timeout=None):  # pylint: disable=unused-argument
    gpu_split.assign(tasks, [str(i) for i in range(8)])
    seen.append({t.name: t.env.get("CUDA_VISIBLE_DEVICES") for t in tasks})
    return 0
  monkeypatch.setattr(launcher, "run", run)
  from strategies import launch as tf2_launch  # pylint: disable=g-import-not-at-top
  from compat_v1 import launch as v1_launch  # pylint: disable=g-import-not-at-top
  from absl import flags  # pylint: disable=g-import-not-at-top
  for module, argv in ((tf2_launch, ["--workers=2"]), (tf2_launch, ["--workers=2", "--ps=1"]),
                       (v1_launch, ["--workers=2", "--ps=1"])):
    fv = flags.FlagValues()
    module.define_flags(fv)
    fv(["launch", *argv])
    module.main(fv, ["--num_gpus=2"])
  assert seen == [{"worker:0": "0,1", "worker:1": "2,3"},  # multi_worker_mirrored
                  {"ps:0": "", "worker:0": "0,1", "worker:1": "2,3", "chief:0": ""},  # PS
                  {"ps:0": "", "worker:0": "0,1", "worker:1": "2,3"}]  # v1 ps/worker
