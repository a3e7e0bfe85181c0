"""Nothing lost, nothing silent: a run's folder is its own, and bad folders are one line.

The faults of a careless or hostile user, each against both trainers (and the Keras path
where it applies), in-process through helpers.call unless a process is what is tested.
"""

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys

import pytest

from harness import ownership
from tests import helpers

TRAINERS = pytest.mark.parametrize("trainer", ["strategies.train", "compat_v1.train",
                                               "examples.keras_fit"])
FLAGS = ("--dataset=synthetic", "--batch_size=4", "--max_steps=2", "--save_checkpoint_steps=1")


def _check(result, expected):
  assert result.returncode == 2, result.stderr[-2000:]
  line = helpers.error_line(result)
  assert line.startswith("error: ") and expected in line, line
  return line


@TRAINERS
def test_a_second_run_on_a_train_dir_in_use_is_refused_naming_the_owner(trainer, tmp_path):
  with ownership.own(str(tmp_path)):
    line = _check(helpers.call(trainer, *FLAGS, f"--train_dir={tmp_path}"),
                  f"--train_dir={tmp_path} is in use by another run (host ")
  assert f"pid {os.getpid()}" in line
  assert not [f for f in os.listdir(tmp_path) if f != ownership.LOCK_FILE]
  # Once the owner is gone the folder is free again.
  assert helpers.call(trainer, *FLAGS, f"--train_dir={tmp_path}").returncode == 0


def test_a_sigkilled_owner_leaves_no_stuck_lock(tmp_path):
  holder = subprocess.Popen(
      [sys.executable, "-c", "import sys, time; from harness import ownership\n"
       f"with ownership.own({str(tmp_path)!r}):\n  print('held', flush=True); time.sleep(60)"],
      stdout=subprocess.PIPE, text=True, cwd=helpers.REPO)
  try:
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(ownership.UsageError, match="is in use by another run"):
      with ownership.own(str(tmp_path)):
        pass
    holder.send_signal(signal.SIGKILL)
    holder.wait(30)
    with ownership.own(str(tmp_path)):
      pass
  finally:
    holder.kill()
    holder.wait(30)


@TRAINERS
def test_a_train_dir_that_is_a_file_or_under_one_is_one_line(trainer, tmp_path):
  path = tmp_path / "file"
  path.write_text("not a folder")
  for train_dir in (path, path / "sub"):
    _check(helpers.call(trainer, *FLAGS, f"--train_dir={train_dir}"),
           f"cannot use --train_dir={train_dir}: ")
  assert path.read_text() == "not a folder"


@pytest.mark.parametrize("evaluator", ["strategies.eval", "compat_v1.eval"])
def test_an_eval_dir_that_is_a_file_is_one_line(evaluator, tmp_path):
  path = tmp_path / "file"
  path.write_text("not a folder")
  _check(helpers.call(evaluator, "--dataset=synthetic", "--run_once", "--num_examples=8",
                      f"--checkpoint_dir={tmp_path}", f"--eval_dir={path}"),
         f"cannot use --eval_dir={path}: ")


@TRAINERS
def test_non_finite_weights_are_never_saved(trainer, tmp_path):
  # A finite loss whose update is not: one local4 weight of the --init_from checkpoint is
  # 1000, and its weight-decay gradient (0.004 x 1000) times the largest float32 rate
  # overflows. Before: the loss check alone let TF2 save Inf weights at step 1, which no
  # later run could resume from.
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from cifar10 import checkpoints  # pylint: disable=g-import-not-at-top
  from cifar10 import config  # pylint: disable=g-import-not-at-top
  from cifar10 import model  # pylint: disable=g-import-not-at-top
  weights = model.initial_values(0)
  weights["local4/weights"][0, 0] = 1000.0
  names = [*weights, *(n + checkpoints.EMA_SUFFIX for n in weights), "global_step"]
  start = str(tmp_path / "start" / "model.ckpt-0")  # the original tutorial's names
  tf.raw_ops.SaveV2(prefix=start, tensor_names=names, shape_and_slices=[""] * len(names),
                    tensors=[*weights.values(), *weights.values(), np.int64(0)])
  train_dir = tmp_path / "train"
  line = _check(helpers.call(trainer, "--dataset=synthetic", "--batch_size=4", "--max_steps=4",
                             f"--learning_rate={config.FLOAT32_MAX}", f"--init_from={start}",
                             "--save_checkpoint_steps=1", f"--train_dir={train_dir}"),
                "weights or moving averages are NaN or Inf after step 0; not saved")
  assert "Lower --learning_rate" in line
  assert not list(train_dir.glob("*.index"))


def test_sigterm_stays_handled_after_the_loop_until_the_process_exits():
  # The loops leave their stop_on_signals block before exiting with the preemption exit code; a second
  # SIGTERM in that window (schedulers repeat it) must not meet the default handler, which
  # would end the process at once, the save and its stop line cut short.
  import time  # pylint: disable=g-import-not-at-top
  from harness import signals  # pylint: disable=g-import-not-at-top
  previous = signal.getsignal(signal.SIGTERM)
  try:
    with signals.stop_on_signals() as request:
      os.kill(os.getpid(), signal.SIGTERM)
      deadline = time.time() + 5
      while not request and time.time() < deadline:
        time.sleep(0.01)
      assert request
    assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, previous)
    os.kill(os.getpid(), signal.SIGTERM)  # would end pytest itself before the fix
    time.sleep(0.05)
  finally:
    signal.signal(signal.SIGTERM, previous)


@pytest.mark.slow
def test_v1_ps_worker_jobs_save_on_sigterm(tmp_path):
  import glob  # pylint: disable=g-import-not-at-top
  import re  # pylint: disable=g-import-not-at-top
  import time  # pylint: disable=g-import-not-at-top
  from cifar10 import checkpoints  # pylint: disable=g-import-not-at-top
  proc = helpers.start("compat_v1.launch", "--workers=2", "--ps=1", "--timeout_secs=240", "--",
                       "--dataset=synthetic", "--batch_size=4", "--max_steps=100000",
                       "--save_checkpoint_steps=100000", "--learning_rate=0.02",
                       f"--train_dir={tmp_path}")
  try:
    deadline = time.time() + 120
    # The chief's summary writer opens its events file once its session is up.
    while not glob.glob(f"{tmp_path}/events.out.tfevents.*") and time.time() < deadline:
      assert proc.poll() is None, proc.stdout.read()[-3000:]
      time.sleep(0.1)
    time.sleep(3)  # some steps, none of them saved by the (never due) periodic checkpoint
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=90)
  finally:
    proc.kill()
  match = re.search(r"\[worker:0\] stopped: SIGTERM after step (\d+); saved (\S+);", out)
  assert match, out[-3000:]
  step, path = int(match[1]), match[2]
  assert step > 0 and checkpoints.read(path).global_step == step
  assert checkpoints.read(str(tmp_path)).global_step == step


@pytest.mark.parametrize("trainer", ["strategies.train", "compat_v1.train"])
def test_a_stray_tf_config_does_not_send_a_single_machine_run_elsewhere(trainer, tmp_path,
                                                                      monkeypatch):
  # Left in the shell by an earlier job: a non-chief worker of a cluster without ps tasks.
  monkeypatch.setenv("TF_CONFIG", '{"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}, '
                     '"task": {"type": "worker", "index": 1}}')
  result = helpers.call(trainer, *FLAGS, f"--train_dir={tmp_path}")
  assert result.returncode == 0, result.stderr[-2000:]
  assert "TF_CONFIG is set but ignored" in result.stderr
  from cifar10 import checkpoints  # pylint: disable=g-import-not-at-top
  assert checkpoints.read(str(tmp_path)).global_step == 2


@pytest.mark.parametrize("trainer", [("strategies.train", "--strategy=multi_worker_mirrored"),
                                     ("strategies.train", "--strategy=parameter_server"),
                                     ("compat_v1.train", "--sync_replicas=false")])
@pytest.mark.parametrize("value,expected", [
    ("{not json", "TF_CONFIG is not JSON"),
    ('{"task": {"type": "worker", "index": "x"}}', "TF_CONFIG has a malformed task"),
    ('{"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"], "ps": ["127.0.0.1:3"]}, '
     '"task": {"type": "worker", "index": 5}}',
     "TF_CONFIG names task worker:5, but its cluster has 2 worker task(s)"),
])
def test_a_malformed_tf_config_is_one_line_where_it_matters(trainer, value, expected,
                                                            tmp_path, monkeypatch):
  monkeypatch.setenv("TF_CONFIG", value)
  module, mode = trainer
  _check(helpers.call(module, mode, *FLAGS, f"--train_dir={tmp_path}"), expected)
  assert not os.listdir(tmp_path)


def test_a_failed_keras_run_leaves_tf_summary_recording_in_this_process(tmp_path):
  # keras_fit stopped by the non-finite check inside fit; the TF2 loop run after it in the
  # same process must still write its summaries.
  flags = ("--dataset=synthetic", "--batch_size=4", "--max_steps=2", "--learning_rate=1e38",
           "--save_checkpoint_steps=1")
  assert helpers.call("examples.keras_fit", *flags, f"--train_dir={tmp_path / 'k'}"
                      ).returncode == 2
  assert helpers.call("strategies.train", *FLAGS, f"--train_dir={tmp_path / 't'}"
                      ).returncode == 0
  from equivalence import runs  # pylint: disable=g-import-not-at-top
  assert list(runs.summaries(tmp_path / "t")["loss"]) == [0]


@pytest.mark.parametrize("trainer", ["strategies.train", "compat_v1.train"])
@pytest.mark.parametrize("flag,expected", [
    ("--seed=9223372036854775808", "--seed must be in [0, 2**63), got 9223372036854775808"),
    ("--learning_rate=inf", "--learning_rate must be positive and finite as a float32 (at most "
     "3.402823e+38), got inf"),
    ("--learning_rate=nan", "finite as a float32 (at most 3.402823e+38), got nan"),
    # Before: accepted, and Inf in the trainers (with numpy's overflow warning on stderr).
    ("--learning_rate=1e300", "finite as a float32 (at most 3.402823e+38), got 1e+300"),
])
def test_seeds_and_rates_tensorflow_cannot_hold_are_one_line(trainer, flag, expected, tmp_path):
  _check(helpers.call(trainer, *FLAGS, flag, f"--train_dir={tmp_path}"), expected)
  assert not os.listdir(tmp_path)


@pytest.mark.parametrize("binary", ["strategies.train", "compat_v1.train", "strategies.eval",
                                    "compat_v1.eval"])
def test_labels_outside_cifar10_are_one_line_for_training_and_evaluation(binary, tmp_path):
  import numpy as np  # pylint: disable=g-import-not-at-top
  written = helpers.write_bin_dataset(str(tmp_path / "data"), seed=1, train_per_file=4,
                                      num_test=8)
  root = tmp_path / "data" / "cifar-10-batches-bin"
  name = "data_batch_3.bin" if binary.endswith("train") else "test_batch.bin"
  records = np.fromfile(root / name, np.uint8).reshape(-1, 3073)
  assert records[2, 0] == written["train" if binary.endswith("train") else "test"][1][
      8 + 2 if name == "data_batch_3.bin" else 2]  # the record a valid label came from
  records[2, 0] = 12  # CIFAR-10 has labels 0..9
  records.tofile(root / name)
  args = (("--batch_size=4", "--max_steps=1", f"--train_dir={tmp_path / 't'}")
          if binary.endswith("train") else
          ("--run_once", f"--checkpoint_dir={tmp_path}", f"--eval_dir={tmp_path / 'e'}"))
  _check(helpers.call(binary, "--dataset=cifar10_bin", f"--data_dir={tmp_path / 'data'}",
                      *args), "has label 12")


@pytest.mark.parametrize("error,expected", [
    (OSError(28, "No space left on device", "/d/x/ckpt-2.index"),
     "cannot write to /d/x/ckpt-2.index: No space left on device; "),
    ("ResourceExhaustedError", "cannot write to /d/x/model.ckpt-2.data-00000-of-00001"
     ".tempstate42: No space left on device; "),
    (OSError(30, "Read-only file system"), "cannot write to a file: Read-only file system; "),
    (OSError(1, "Operation not permitted", "/d/x/.lock"),
     "cannot access /d/x/.lock: Operation not permitted; "),
])
def test_a_write_the_disk_refuses_is_one_line(error, expected):
  from harness import cli  # pylint: disable=g-import-not-at-top
  if error == "ResourceExhaustedError":  # TensorFlow's words for errno 28 in a Saver
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    error = tf.errors.ResourceExhaustedError(
        None, None, "/d/x/model.ckpt-2.data-00000-of-00001.tempstate42; No space left on "
        "device\n\tFailed to flush")
  assert str(cli.storage(error)).startswith(expected)
  assert "resumes from the newest" in str(cli.storage(error))
  # A GPU out of memory is ResourceExhausted too, but not a disk's problem.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  assert cli.storage(tf.errors.ResourceExhaustedError(None, None, "OOM when allocating")) is None
  assert cli.storage(ValueError("No space left on device")) is None


def _can_mount():
  if not shutil.which("unshare"):
    return False
  return subprocess.run(["unshare", "-m", "mount", "-t", "tmpfs", "tmpfs", "/mnt"],
                        capture_output=True, timeout=30).returncode == 0


@pytest.mark.slow
def test_a_full_or_read_only_disk_is_one_line_and_loses_nothing(tmp_path):
  # Real disks: tmpfs mounts in a private mount namespace (tests/storage_faults.py).
  if not _can_mount():
    pytest.skip("needs `unshare -m` and tmpfs mounts (root with CAP_SYS_ADMIN)")
  result = subprocess.run(["unshare", "-m", sys.executable, "-m", "tests.storage_faults",
                           str(tmp_path)], capture_output=True, text=True, timeout=240,
                          env=helpers.env(), cwd=helpers.REPO)
  assert result.returncode == 0, result.stderr[-3000:]
  seen = json.loads(result.stdout.strip().splitlines()[-1])
  for trainer in ("strategies.train", "compat_v1.train", "examples.keras_fit"):
    runs = seen[trainer]
    assert runs["first"]["status"] == 0, runs["first"]["tail"]
    # Full: one line naming the file, exit 2; the step-1 checkpoint is still the newest.
    assert runs["full"]["status"] == 2, runs["full"]["tail"]
    assert re.fullmatch(r"error: cannot write to /\S+: No space left on device; .*",
                        runs["full"]["line"]), runs["full"]["line"]
    assert "Traceback" not in runs["full"]["tail"]
    assert runs["after_full"]["latest"] in ("ckpt-1", "model.ckpt-1")
    assert runs["after_full"].get("complete", True)
    # Room again: resumes at step 1, reaches 3, no temporary files left behind.
    assert runs["again"]["status"] == 0 and runs["resumed"], runs["again"]["tail"]
    assert runs["final"]["latest"] in ("ckpt-3", "model.ckpt-3")
    assert runs["final"].get("step", 3) == 3 and runs["final"]["debris"] == []
    assert runs["read_only"]["status"] == 2
    assert runs["read_only"]["line"].endswith("/train: Read-only file system")
  for evaluator in ("strategies.eval", "compat_v1.eval"):
    assert seen[evaluator]["eval_dir_read_only"]["status"] == 2
    assert seen[evaluator]["eval_dir_read_only"]["line"].endswith("/eval: Read-only file system")
    # A read-only run folder can still be evaluated.
    assert seen[evaluator]["checkpoint_dir_read_only"]["status"] == 0
    assert "(8 examples, step 3," in seen[evaluator]["checkpoint_dir_read_only"]["line"]


def _state(pid):
  """The kernel's state letter of process `pid` (Z: ended, not yet reaped), or None."""
  try:
    with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
      return f.read().rsplit(")", 1)[1].split()[0]
  except FileNotFoundError:
    return None


def test_the_peer_wait_watchdog_dies_with_the_process_it_guards():
  # Before: it slept out its whole timeout after its worker was SIGKILLed, then sent SIGKILL
  # to whatever process had the PID by then.
  import time  # pylint: disable=g-import-not-at-top
  guarded = subprocess.Popen(
      [sys.executable, "-c", "import time\nfrom harness import watchdog\n"
       "with watchdog.deadline(60, 'never') as w:\n  print(w.pid, flush=True); time.sleep(1)\n"
       "  print('waiting', flush=True); time.sleep(60)"],
      stdout=subprocess.PIPE, text=True, cwd=helpers.REPO)
  try:
    pid = int(guarded.stdout.readline())
    assert guarded.stdout.readline().strip() == "waiting"
    assert _state(pid) not in (None, "Z")
    guarded.send_signal(signal.SIGKILL)
    guarded.wait(30)
    deadline = time.time() + 3
    while _state(pid) not in (None, "Z") and time.time() < deadline:
      time.sleep(0.02)
    assert _state(pid) in (None, "Z")
  finally:
    guarded.kill()
    guarded.wait(30)


@pytest.mark.slow
def test_a_v1_worker_whose_ps_never_comes_up_is_a_bounded_error(tmp_path):
  import time  # pylint: disable=g-import-not-at-top
  from harness import launcher  # pylint: disable=g-import-not-at-top
  ps, worker = (f"127.0.0.1:{p}" for p in launcher.free_ports(2))
  begin = time.time()
  result = helpers.run("compat_v1.train", "--job_name=worker", "--task_index=0",
                       f"--ps_hosts={ps}", f"--worker_hosts={worker}", "--peer_timeout_secs=2",
                       *FLAGS, f"--train_dir={tmp_path}", timeout=120)
  assert result.returncode != 0 and time.time() - begin < 60
  assert helpers.error_line(result) == (
      f"error: worker:0: the ps tasks and the chief of {{'ps': ['{ps}'], 'worker': "
      f"['{worker}']}} were not all up within 2 s (--peer_timeout_secs); check that each one "
      "was started and that its port is reachable")
  assert not [f for f in os.listdir(tmp_path) if "ckpt" in f or f == "checkpoint"]


@pytest.mark.parametrize("trainer", ["strategies.train", "compat_v1.train"])
def test_more_cpu_replicas_than_a_sane_bound_are_refused_up_front(trainer, tmp_path):
  # Before: --num_gpus=4096 on a machine without GPUs built towers until memory ran out.
  _check(helpers.call(trainer, *FLAGS, "--num_gpus=4096", f"--train_dir={tmp_path}"),
         "--num_gpus=4096 but no GPU is visible, and on CPUs at most 64 replicas")
  assert not os.listdir(tmp_path)


def _cluster(*jobs):
  from harness import launcher  # pylint: disable=g-import-not-at-top
  ports = iter(launcher.free_ports(len(jobs)))
  cluster = {}
  for job in jobs:
    cluster.setdefault(job, []).append(f"127.0.0.1:{next(ports)}")
  return cluster


@pytest.mark.parametrize("args,expected", [
    (("compat_v1.train", "--job_name=worker", "--ps_hosts=127.0.0.1:2222",
      "--worker_hosts=garbage"), "the worker job's address 'garbage' is not host:port"),
    (("compat_v1.train", "--job_name=ps", "--ps_hosts=127.0.0.1:99999",
      "--worker_hosts=127.0.0.1:2"), "the ps job's address '127.0.0.1:99999' is not host:port"),
    (("strategies.train", "--strategy=parameter_server"),
     "--strategy=parameter_server needs TF_CONFIG with chief, worker and ps tasks"),
    (("strategies.train", "--strategy=multi_worker_mirrored"),
     "--strategy=multi_worker_mirrored needs TF_CONFIG (one per worker)"),
])
def test_cluster_flags_that_name_no_cluster_are_one_line(args, expected, tmp_path, monkeypatch):
  monkeypatch.delenv("TF_CONFIG", raising=False)
  _check(helpers.call(*args, *FLAGS, f"--train_dir={tmp_path}"), expected)
  assert not os.listdir(tmp_path)


@pytest.mark.parametrize("args,jobs,task", [
    (("strategies.train", "--strategy=multi_worker_mirrored"), ("worker", "worker"), "worker"),
    (("strategies.train", "--strategy=parameter_server"), ("chief", "worker", "ps"), "chief"),
    (("strategies.train", "--strategy=parameter_server"), ("chief", "worker", "ps"), "ps"),
    (("compat_v1.train",), ("worker", "ps"), "ps"),
    (("compat_v1.train",), ("worker", "ps"), "worker"),
])
def test_a_task_whose_port_is_taken_is_one_line(args, jobs, task, tmp_path, monkeypatch):
  import socket  # pylint: disable=g-import-not-at-top
  from harness import cluster  # pylint: disable=g-import-not-at-top
  spec = _cluster(*jobs)
  with socket.socket() as taken:  # another process's server on this task's port
    taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    address = spec[task][0]
    taken.bind(("127.0.0.1", int(address.rpartition(":")[2])))
    taken.listen()
    monkeypatch.setenv("TF_CONFIG", cluster.to_json(spec, task, 0))
    _check(helpers.call(*args, *FLAGS, "--peer_timeout_secs=5", f"--train_dir={tmp_path}"),
           f"{task}:0 cannot listen on {address}: port {address.rpartition(':')[2]} is in use "
           "by another process on this machine")
  assert not os.listdir(tmp_path)


class _Done(Exception):
  pass


@pytest.mark.slow
@pytest.mark.parametrize("trainer,evaluator", [("strategies.train", "strategies.evaluator"),
                                               ("compat_v1.train", "compat_v1.evaluator")])
def test_an_evaluator_skips_a_checkpoint_the_trainer_deletes_while_it_is_read(
    trainer, evaluator, tmp_path):
  # The race of continuous evaluation against a trainer that keeps one checkpoint: the
  # checkpoint found is deleted before it is read. Before: the evaluator died (exit 2, a
  # misleading "Variable name ... missing").
  import contextlib  # pylint: disable=g-import-not-at-top
  import importlib  # pylint: disable=g-import-not-at-top
  from cifar10 import config  # pylint: disable=g-import-not-at-top
  train_dir = str(tmp_path / "train")
  train = lambda steps: helpers.call(trainer, *FLAGS, f"--max_steps={steps}",
                                     "--max_checkpoints_to_keep=1", f"--train_dir={train_dir}")
  assert train(1).returncode == 0
  for run_once in (True, False):
    with contextlib.closing(importlib.import_module(evaluator).Evaluator(config.EvalConfig(
        checkpoint_dir=train_dir, eval_dir=str(tmp_path / "eval"), num_examples=8,
        batch_size=8, run_once=run_once, eval_interval_secs=1, dataset="synthetic"))) as scorer:
      _evaluate_while_the_trainer_deletes(scorer, train, run_once)


def _evaluate_while_the_trainer_deletes(scorer, train, run_once):
  from harness import polling  # pylint: disable=g-import-not-at-top
  seen = []

  def evaluate(path):
    seen.append(os.path.basename(path))
    if len(seen) == 1:  # the trainer moves on meanwhile, and deletes `path`
      assert train(int(path.rsplit("-", 1)[1]) + 1).returncode == 0
      assert not os.path.exists(path + ".index")
    result = scorer.evaluate(path)
    if not run_once:
      raise _Done(result)
    return result

  if run_once:
    _, step = polling.evaluate_each(evaluate, scorer.config)
    assert step == 2
    assert [s.split("ckpt-")[1] for s in seen] == ["1", "2"]
  else:
    with pytest.raises(_Done) as done:
      polling.evaluate_each(evaluate, scorer.config)
    assert done.value.args[0][1] == 3
    assert [s.split("ckpt-")[1] for s in seen] == ["2", "3"]


@pytest.mark.parametrize("trainer", ["tf2", "v1"])
def test_ctrl_c_finishes_the_step_saves_and_a_second_one_quits(trainer, tmp_path):
  # Before: Ctrl-C ended the run at once (exit 130), losing every step since the last
  # periodic checkpoint.
  from cifar10 import checkpoints  # pylint: disable=g-import-not-at-top
  from cifar10 import config  # pylint: disable=g-import-not-at-top
  from cifar10 import errors  # pylint: disable=g-import-not-at-top
  train = helpers.train_tf2 if trainer == "tf2" else helpers.train_v1
  previous = signal.getsignal(signal.SIGINT)
  run = config.TrainConfig(train_dir=str(tmp_path / "a"), dataset="synthetic", batch_size=4,
                           max_steps=100, save_checkpoint_steps=1000)

  def press(times, at):
    def on_step(step, loss, lr):  # pylint: disable=unused-argument
      if step == at:
        for _ in range(times):
          os.kill(os.getpid(), signal.SIGINT)
    return on_step

  try:
    with pytest.raises(errors.Stopped) as stopped:
      train(run, on_step=press(1, at=2))
    assert stopped.value.status == 130
    path = str(tmp_path / "a" / ("ckpt-4" if trainer == "tf2" else "model.ckpt-4"))
    assert str(stopped.value) == (f"Ctrl-C after step 4; saved {path}; run the same command "
                                  "again to continue")
    assert checkpoints.read(str(tmp_path / "a")).global_step == 4
    # A second Ctrl-C quits at once, saving nothing more.
    run = dataclasses.replace(run, train_dir=str(tmp_path / "b"))
    with pytest.raises(KeyboardInterrupt):
      train(run, on_step=press(2, at=2))
    assert not [f for f in os.listdir(tmp_path / "b") if "ckpt-" in f]
  finally:
    signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("trainer", ["tf2", "v1"])
def test_a_sigterm_stop_exits_with_the_preemption_exit_code(trainer, tmp_path):
  # Before: 42, which a TFJob `restartPolicy: ExitCode` treats as permanent (it restarts on
  # 128-255 only), so a preempted pod that saved was never restarted.
  from cifar10 import checkpoints  # pylint: disable=g-import-not-at-top
  from cifar10 import config  # pylint: disable=g-import-not-at-top
  from cifar10 import errors  # pylint: disable=g-import-not-at-top
  train = helpers.train_tf2 if trainer == "tf2" else helpers.train_v1
  previous = signal.getsignal(signal.SIGTERM)

  def on_step(step, loss, lr):  # pylint: disable=unused-argument
    if step == 1:
      os.kill(os.getpid(), signal.SIGTERM)

  try:
    for code, folder in ((None, "default"), (42, "tf_handler_code")):
      run = config.TrainConfig(train_dir=str(tmp_path / folder), dataset="synthetic",
                               batch_size=4, max_steps=100, save_checkpoint_steps=1000,
                               **({} if code is None else {"preemption_exit_code": code}))
      with pytest.raises(errors.Stopped) as stopped:
        train(run, on_step=on_step)
      assert stopped.value.status == (143 if code is None else code)
      assert str(stopped.value).startswith("SIGTERM after step 3; saved ")
      assert checkpoints.read(str(tmp_path / folder)).global_step == 3
  finally:
    signal.signal(signal.SIGTERM, previous)


@pytest.mark.parametrize("trainer", ["strategies.train", "compat_v1.train"])
@pytest.mark.parametrize("code", ["0", "2", "256"])
def test_a_preemption_exit_code_that_means_something_else_is_refused(trainer, code, tmp_path):
  result = helpers.call(trainer, "--dataset=synthetic", f"--preemption_exit_code={code}",
                        f"--train_dir={tmp_path}")
  assert result.returncode == 2
  assert result.stderr.strip().splitlines()[-1] == (
      "error: --preemption_exit_code must be in 3..255 (0 is success, 1 a crash, 2 a usage "
      f"error), got {code}")
