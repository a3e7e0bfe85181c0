"""What a person reads first: TensorFlow's noise kept off the screen, and progress lines that
say how fast the run goes and when it ends."""

import logging as std_logging
import os
import re
import subprocess
import sys

from absl import logging
import pytest

from harness.control import progress
from tfbits import quiet
from tests import helpers


class _Clock:
  def __init__(self):
    self.now = 1000.0

  def __call__(self):
    return self.now


def _logger(monkeypatch, caplog, **kwargs):
  """(a fake clock, a StepLogger of log_frequency 10 from step 0 reading it), its lines
  captured."""
  clock = _Clock()
  monkeypatch.setattr(progress.time, "time", clock)
  logging.set_verbosity(logging.INFO)
  caplog.set_level(std_logging.INFO)
  return clock, progress.StepLogger(start_step=0, log_frequency=10, **kwargs)


def test_progress_lines_time_tracing_apart_and_take_the_eta_from_a_steady_rate(
    monkeypatch, caplog):
  """Before: the first line's examples/sec was the tracing's, and the ETA came from the last
  10 steps alone (2:09:25, 7:14:36, 2:13:36 within a minute of one run)."""
  clock, logger = _logger(monkeypatch, caplog, max_steps=1000, global_batch_size=64)
  clock.now += 5.0  # the first step: tracing
  logger.after_step(0, lambda: 4.5)
  for step in range(1, 21):
    clock.now += 0.25 if step <= 10 else 1.0  # a slow stretch: 10 steps at 1 s
    logger.after_step(step, lambda: 3.25)
  clock.now += 0.5 * 979
  logger.after_step(999, lambda: 1.0)
  lines = [r.getMessage() for r in caplog.records if "step " in r.getMessage()]
  assert lines == [
      "step 0, loss = 4.50 (first step: 5.0 s, tracing included)",
      # 10 steps in 2.5 s since the first line: 989 steps left take 247 s.
      "step 10, loss = 3.25 (256.0 examples/sec; 0.250 sec/batch; ETA 0:04:07)",
      # The last 10 steps took 10 s, but the rate since the first line is 20 steps in 12.5 s:
      # 979 left take 612 s (from the last 10 alone: 979 s).
      "step 20, loss = 3.25 (64.0 examples/sec; 1.000 sec/batch; ETA 0:10:12)",
      "step 999, loss = 1.00 (128.0 examples/sec; 0.500 sec/batch)",
  ]
  assert max(len(line) for line in lines) + len("00:00:00 ") <= 100
  assert logger.rates == (128.0, 2.0)  # what the driver writes as examples_per_second


def test_progress_lines_carry_the_batch_precision_and_a_changed_learning_rate(monkeypatch,
                                                                           caplog):
  # What Keras's bar and Model Garden's logs show and the line did not: the batch's
  # precision on every line; the rate on a start's first line and wherever it changed (on
  # every line it passed 100 columns from step 100000).
  clock, logger = _logger(monkeypatch, caplog, max_steps=1000000, global_batch_size=128)
  clock.now += 5.0
  logger.after_step(0, lambda: 2.5, lambda: 0.1, lambda: 0.0625)
  for step, lr in ((10, 0.1), (20, 0.1), (30, 1e-05), (123450, 1e-05)):
    clock.now += 0.0125 * (step - logger.last)
    logger.after_step(step, lambda: 2.25, lambda lr=lr: lr, lambda: 0.9140625)
  lines = [r.getMessage() for r in caplog.records if "step " in r.getMessage()]
  assert lines == [
      "step 0, loss = 2.50 (first step: 5.0 s, tracing included; acc 0.06; lr 0.1)",
      "step 10, loss = 2.25 (10240.0 examples/sec; 0.013 sec/batch; acc 0.91; ETA 3:28:20)",
      "step 20, loss = 2.25 (10240.0 examples/sec; 0.013 sec/batch; acc 0.91; ETA 3:28:20)",
      "step 30, loss = 2.25 (10240.0 examples/sec; 0.013 sec/batch; acc 0.91; lr 1e-05; "
      "ETA 3:28:20)",
      "step 123450, loss = 2.25 (10240.0 examples/sec; 0.013 sec/batch; acc 0.91; "
      "ETA 3:02:37)"]
  assert max(len(line) for line in lines[1:3] + lines[4:]) + len("00:00:00 ") <= 100


@pytest.mark.parametrize("trainer", ["strategies.train", "compat_v1.train"])
@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_a_lines_batch_precision_is_the_steps_precision_summary(trainer, tmp_path):
  from equivalence import runs  # pylint: disable=g-import-not-at-top
  from cifar10 import scores  # pylint: disable=g-import-not-at-top
  result = helpers.call(trainer, "--num_gpus=2", "--dataset=synthetic", "--batch_size=16",
                        "--max_steps=2", "--log_frequency=1", "--save_summaries_steps=1",
                        f"--train_dir={tmp_path}")
  assert result.returncode == 0, result.stderr[-2000:]
  shown = [float(a) for a in re.findall(r"step \d+, loss = .*; acc ([\d.]+)", result.stderr)]
  written = runs.summaries(tmp_path)[scores.PRECISION_TAG]
  assert shown == [round(float(written[s]), 2) for s in (0, 1)] and len(shown) == 2


def test_devices_on_a_line_are_runs_of_indices():
  assert progress.device_list(["CPU:0", "CPU:1"]) == "CPU:0-1"
  assert progress.device_list([f"GPU:{i}" for i in range(8)]) == "GPU:0-7"
  assert progress.device_list(["GPU:0", "GPU:2", "GPU:3", "cpu:0"]) == "GPU:0, GPU:2-3, cpu:0"
  # The start lines' names as the trainers hold them: 8 of them fit a line as 2 do.
  assert progress.device_list([f"/cpu:{i}" for i in range(8)]) == "/cpu:0-7"


def test_the_binaries_log_lines_carry_a_short_prefix():
  """absl's prefix (`I1125 18:46:03.133764 140500600138624 progress.py:45] `) and a second
  timestamp made a progress line ~170 characters."""
  record = std_logging.LogRecord("absl", std_logging.INFO, "x.py", 1, "step %d", (3,), None)
  line = progress.ShortPrefix().format(record)
  assert len(line) == len("00:00:00 step 3") and line.endswith(" step 3")
  record.levelno, record.levelname = std_logging.WARNING, "WARNING"
  assert progress.ShortPrefix().format(record).startswith("W ")


def test_an_eta_of_days_stays_readable():
  assert progress.eta_text(3 * 86400 + 3723.4) == "3 days, 1:02:03"
  assert progress.eta_text(86400 + 5) == "1 day, 0:00:05" and progress.eta_text(59) == "0:00:59"
  # --max_steps=2**62 at 20 steps/sec: more days than datetime.timedelta holds (it raised
  # OverflowError on the progress line, a traceback after step 0).
  assert progress.eta_text(2 ** 62 / 20).startswith("2668799779182 days, ")


def test_native_noise_is_held_back_and_every_other_line_shown(capfd):
  with quiet.native_stderr_filtered():
    os.write(2, b"WARNING: All log messages before absl::InitializeLog() is called are "
                b"written to STDERR\n")
    os.write(2, b"I0000 00:00:1.5 1 cudart_stub.cc:31] Could not find cuda drivers on your "
                b"machine, GPU will not be used.\n")
    os.write(2, b"E0000 00:00:1.5 1 cuda_platform.cc:52] failed call to cuInit: INTERNAL\n")
    os.write(2, b"E0000 00:00:1.5 1 something.cc:1] a real error\n")
    os.write(2, b"x" * 200000 + b"\n")  # more than a pipe holds: drained while it runs
  err = capfd.readouterr().err
  assert err == "E0000 00:00:1.5 1 something.cc:1] a real error\n" + "x" * 200000 + "\n"


# TensorFlow 2.21's own lines, as a Keras fit and a SyncReplicas job's ps task wrote them.
_RUN_NOISE = (
    "W0000 00:00:1795705947.593209   28058 dataset.cc:997] Input of GeneratorDatasetOp::Dataset"
    " will not be optimized because the dataset does not implement the AsGraphDefInternal() "
    "method needed to apply optimizations.\n"
    "W0000 00:00:1795705854.188547   26175 local_rendezvous.cc:412] Local rendezvous is aborting"
    " with status: CANCELLED: TakeGrad operation was cancelled\n"
    "\t [[{{node sync_replicas/ResourceAccumulatorTakeGradient_9}}]] "
    "[type.googleapis.com/tensorflow.DerivedStatus='']\n"
    # A NaN loss: the trainers' own check, which their one line says.
    "W0000 00:00:1795705854.2 26175 local_rendezvous.cc:412] Local rendezvous is aborting with"
    " status: INVALID_ARGUMENT: loss is not finite : Tensor had NaN values\n"
    "\t [[{{node CheckNumerics}}]]\n"
    # A finished multi-worker task whose peer's heartbeats stopped as the job ended (a user's
    # report: the last words of a job that succeeded); a peer lost mid-run is the trainers'
    # own one line to retry (tests/test_multi_worker.py).
    "E0000 00:00:1795705999.1 3001 base_collective_executor.cc:252] BaseCollectiveExecutor::"
    "StartAbort UNAVAILABLE: The following tasks are unhealthy (stopped sending heartbeats): "
    "/job:worker/replica:0/task:1 The tasks have crashed. Check the task logs for an earlier "
    "error, or scheduler events (e.g. preemption, eviction) to debug further.\n")


@pytest.mark.parametrize("end", ["exit", "abort"])
def test_a_binarys_stderr_passes_a_filter_for_its_whole_life(end):
  # After the import: TensorFlow's notes of doing what it should are dropped, every other
  # line kept in order, the line before exit out before the process ends, and a crash's
  # last line still out (the filter is a process of its own, not a thread that dies too).
  code = ("import os, sys; from tfbits import quiet; quiet.filter_native_stderr(); "
          "os.write(2, sys.argv[1].encode()); print('W 00:00:01 ours', file=sys.stderr); "
          "os.write(2, b'\\t [[a tab-indented line of ours]]\\n'); "
          "os.write(2, b'E0000 something.cc:1] a real error\\n'); "
          "sys.stderr.write('last line, no newline'); sys.stderr.flush(); "
          + ("os.abort()" if end == "abort" else "sys.exit(3)"))
  result = subprocess.run([sys.executable, "-c", code, _RUN_NOISE], capture_output=True,
                          text=True, env=helpers.env(), timeout=60, cwd=helpers.REPO)
  assert result.returncode == (-6 if end == "abort" else 3)
  assert result.stderr == ("W 00:00:01 ours\n\t [[a tab-indented line of ours]]\n"
                           "E0000 something.cc:1] a real error\nlast line, no newline")


def test_tensorflows_deprecation_notices_are_dropped_and_its_other_warnings_kept():
  import logging as std  # pylint: disable=g-import-not-at-top
  quiet.install(verbose=False)
  try:
    tf_logger = std.getLogger("tensorflow")
    notice = std.LogRecord("tensorflow", std.WARNING, "/x/tensorflow/python/util/deprecation.py",
                           1, "From step.py:134: SyncReplicasOptimizer.__init__ is deprecated",
                           (), None)
    other = std.LogRecord("tensorflow", std.WARNING, "/x/tensorflow/python/ops/a.py", 1, "w",
                          (), None)
    assert not tf_logger.filter(notice) and tf_logger.filter(other)
  finally:
    quiet.install(verbose=True)  # this process's loggers as they were
    assert tf_logger.filter(notice)


@pytest.mark.slow
@pytest.mark.parametrize("verbosity,shown", [(None, False), ("1", True)])
def test_importing_tensorflow_says_nothing_unless_verbosity_asks(verbosity, shown):
  # A fresh interpreter, as a user's binary starts: TensorFlow's import-time lines
  # (several on this machine without a GPU) are gone, and --verbosity=1 brings them back.
  code = ("from tfbits import quiet; import sys; quiet.install(verbose=sys.argv[1] == '1'); "
          "import tensorflow as tf; tf.constant(1.0) + 1.0; print('done', flush=True)")
  env = dict(helpers.env())
  env.pop("TF_CPP_MIN_LOG_LEVEL", None)
  result = subprocess.run([sys.executable, "-c", code, verbosity or "0"], capture_output=True,
                          text=True, env=env, timeout=120, check=True, cwd=helpers.REPO)
  assert result.stdout == "done\n"
  noise = [line for line in result.stderr.splitlines() if quiet.NATIVE_NOISE.search(line)]
  if shown:
    assert noise, result.stderr
  else:
    assert result.stderr == ""


def test_the_quickstart_shows_two_lines_before_its_progress(tmp_path):
  result = helpers.call("strategies.train", "--num_gpus=2", "--dataset=synthetic",
                        "--batch_size=4", "--max_steps=1", f"--train_dir={tmp_path}")
  assert result.returncode == 0, result.stderr[-2000:]
  lines = result.stderr.splitlines()
  first = next(i for i, line in enumerate(lines) if "step 0, loss = " in line)
  assert first <= 8, lines[:first]
  assert not [line for line in lines if "then broadcast to" in line]


BINARIES = ["strategies.train", "compat_v1.train", "strategies.eval", "compat_v1.eval",
            "strategies.launch", "compat_v1.launch", "equivalence.__main__",
            "equivalence.checkpoints", "benchmarks.throughput", "benchmarks.input_pipeline",
            "benchmarks.profile_ops", "examples.keras_fit", "examples.keras_two_outputs",
            "examples.model_parallel"]


def test_no_binary_imports_tensorflow_before_its_flags_are_parsed():
  # harness.command_line.cli quiets TensorFlow's first screen before main imports it, and a bad flag
  # is answered before TensorFlow's seconds of import. Before: strategies.train imported it at
  # module level (through harness.devices.determinism), and its first screen came back.
  code = ("import importlib, sys\n"
          "for name in sys.argv[1:]:\n"
          "  importlib.import_module(name)\n"
          "print(sorted(m for m in sys.modules if m.split('.')[0] == 'tensorflow')[:1])")
  result = subprocess.run([sys.executable, "-c", code, *BINARIES], capture_output=True,
                          text=True, env=helpers.env(), timeout=120, check=True,
                          cwd=helpers.REPO)
  assert result.stdout == "[]\n", result.stdout
