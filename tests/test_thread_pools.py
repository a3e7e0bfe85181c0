"""A run's thread pools are settings of the run (tfbits.threads): resolved once as TensorFlow
would (0: the schedulable CPUs, or TF_NUM_*_THREADS), set explicitly, recorded, and set again
on resume wherever it lands; a process holds one set of pools, and a run of other counts is
refused in one line, never silently trained on the first run's."""

import dataclasses
import os
import re

import pytest

from cifar10 import config
from cifar10.errors import UsageError
from harness.folders import run_record
from tests import helpers
from tfbits import threads
from tfbits.errors import OneLineError


def test_zero_is_tensorflows_own_count(monkeypatch):
  monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 3, 5})
  assert threads.schedulable_cpus() == 3
  assert threads.resolve(0, 0, environ={}) == (3, 3)
  assert threads.resolve(0, 0, environ={"TF_NUM_INTRAOP_THREADS": "2"}) == (2, 3)
  assert threads.resolve(4, 1, environ={"TF_NUM_INTEROP_THREADS": "2"}) == (4, 1)
  assert threads.resolve(0, 0, environ={"TF_NUM_INTRAOP_THREADS": "x"}) == (3, 3)


def test_a_process_keeps_its_pools_and_refuses_others_in_one_line():
  """This worker's pools are TensorFlow's defaults, set at its start (conftest): a run of
  the defaults finds them; one of other counts is refused, as compat_v1 once ignored and
  strategies once let a first run impose."""
  held = threads.effective()
  assert threads.apply(0, 0) == held
  with pytest.raises(OneLineError, match=re.escape(
      f"this process's TensorFlow already runs intra-op {held[0]}, inter-op {held[1]} "
      f"threads, fixed when it started; a run of intra-op {held[0] + 1}, inter-op")):
    threads.apply(held[0] + 1, 0)


@pytest.mark.parametrize("trainer", ["strategies.train", "compat_v1.train"])
def test_both_trainers_refuse_other_counts_in_a_process_that_has_its_pools(trainer, tmp_path):
  held = threads.effective()
  result = helpers.call(trainer, "--dataset=synthetic", "--max_steps=1",
                        f"--intra_op_threads={held[0] + 1}", f"--train_dir={tmp_path}")
  helpers.check_one_line(result, "this process's TensorFlow already runs")
  assert not (tmp_path / run_record.RECORD).exists()


def _run(tmp_path, **changes):
  return config.TrainConfig(train_dir=str(tmp_path), dataset="synthetic", **changes)


def test_a_resume_takes_the_recorded_counts_and_guards_a_changed_one(tmp_path):
  (tmp_path / "checkpoint").write_text('model_checkpoint_path: "ckpt-1"\n')
  held = threads.effective()
  record = run_record.check(_run(tmp_path, override_run_config=True), 1)
  assert (record["settings"]["intra_op_threads"], record["settings"]["inter_op_threads"]) == held
  recorded = {**record, "settings": {**record["settings"], "intra_op_threads": 7}}
  run_record.write(str(tmp_path), recorded)
  devices = config.DeviceConfig()
  assert run_record.resumed_threads(devices, _run(tmp_path)) == dataclasses.replace(
      devices, intra_op_threads=7, inter_op_threads=held[1])
  explicit = config.DeviceConfig(intra_op_threads=5)  # given: kept, and refused by the check
  assert run_record.resumed_threads(explicit, _run(tmp_path)).intra_op_threads == 5
  with pytest.raises(UsageError, match=re.escape(
      f"(--intra_op_threads was 7, now {held[0]})")):
    run_record.check(_run(tmp_path), 1)


def test_a_record_from_before_the_counts_takes_the_processs(tmp_path):
  (tmp_path / "checkpoint").write_text('model_checkpoint_path: "ckpt-1"\n')
  record = run_record.check(_run(tmp_path, override_run_config=True), 1)
  old = {k: v for k, v in record["settings"].items() if k not in run_record.THREADS}
  run_record.write(str(tmp_path), {**record, "settings": old})
  assert run_record.check(_run(tmp_path), 1)["settings"] == record["settings"]
  assert run_record.resumed_threads(config.DeviceConfig(), _run(tmp_path)) == (
      config.DeviceConfig())


@pytest.mark.slow
@pytest.mark.skipif(threads.schedulable_cpus() < 2, reason="needs 2 schedulable CPUs")
def test_a_run_resumed_under_taskset_ends_with_the_uninterrupted_runs_bits(tmp_path):
  """Started on 2 CPUs, resumed under `taskset -c 0` (a node with another CPU set): the
  uninterrupted run's bits, where a run started there trains on others (Eigen's convolution
  gradients split their sums by the intra-op count)."""
  common = ["--dataset=synthetic", "--batch_size=8", "--seed=3", "--num_gpus=1"]
  whole, resumed, bound = tmp_path / "whole", tmp_path / "resumed", tmp_path / "bound"
  env = {k: v for k, v in helpers.env().items()
         if k not in ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")}
  # On 2 CPUs, in this process: its pools are a 2-CPU process's defaults, set explicitly
  # (tests/conftest.py), as the binary sets them in a process of its own. Only the runs
  # under taskset need their own process, the CPU set being the process's.
  if threads.effective()[0] == 1:  # TF_NUM_INTRAOP_THREADS=1 where the suite started
    pytest.skip("this test process runs 1 intra-op thread, as the runs under taskset do")
  for folder, steps in ((whole, 3), (resumed, 1)):
    result = helpers.call("strategies.train", *common, f"--max_steps={steps}",
                          f"--train_dir={folder}")
    assert result.returncode == 0, result.stderr[-2000:]
  for folder in (resumed, bound):
    result = helpers.run_with(["taskset", "-c", "0"], env, "strategies.train", *common,
                              "--max_steps=3", f"--train_dir={folder}")
    assert result.returncode == 0, result.stderr[-2000:]
  # Compared in this process too: reading checkpoints moves no bits.
  same = helpers.call("equivalence.checkpoints", f"{whole}/ckpt-3", f"{resumed}/ckpt-3")
  assert same.returncode == 0 and "EQUIVALENT" in same.stdout, same.stdout[-2000:]
  other = helpers.call("equivalence.checkpoints", f"{whole}/ckpt-3", f"{bound}/ckpt-3")
  assert other.returncode == 1, other.stdout[-2000:]  # the test could tell them apart
