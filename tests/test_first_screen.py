"""What a person reads first: TensorFlow's noise kept off the screen, and progress lines that
say how fast the run goes and when it ends."""

import logging as std_logging
import os
import subprocess
import sys

from absl import logging
import pytest

from harness import progress
from harness import quiet
from tests import helpers


class _Clock:
  def __init__(self):
    self.now = 1000.0

  def __call__(self):
    return self.now


def test_progress_lines_add_the_step_rate_and_the_time_left(monkeypatch, caplog):
  clock = _Clock()
  monkeypatch.setattr(progress.time, "time", clock)
  logging.set_verbosity(logging.INFO)
  caplog.set_level(std_logging.INFO)
  logger = progress.StepLogger(start_step=0, max_steps=1000, global_batch_size=64,
                               log_frequency=10)
  clock.now += 5.0  # the first step: tracing
  logger.after_step(0, lambda: 4.5)
  for step in range(1, 11):
    clock.now += 0.25
    logger.after_step(step, lambda: 3.25)
  clock.now += 0.5 * 989
  logger.after_step(999, lambda: 1.0)
  lines = [r.getMessage().split(": ", 1)[1] for r in caplog.records
           if "examples/sec" in r.getMessage()]
  assert lines == [
      # The original's first line, timed over the tracing: no ETA from that rate.
      "step 0, loss = 4.50 (12.8 examples/sec; 5.000 sec/batch; 0.20 steps/sec)",
      # 10 steps in 2.5 s: 989 steps left take 247 s.
      "step 10, loss = 3.25 (256.0 examples/sec; 0.250 sec/batch; 4.00 steps/sec; ETA 0:04:07)",
      "step 999, loss = 1.00 (128.0 examples/sec; 0.500 sec/batch; 2.00 steps/sec)",
  ]


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


@pytest.mark.slow
@pytest.mark.parametrize("verbosity,shown", [(None, False), ("1", True)])
def test_importing_tensorflow_says_nothing_unless_verbosity_asks(verbosity, shown):
  # A fresh interpreter, as a user's binary starts: TensorFlow's import-time lines
  # (several on this machine without a GPU) are gone, and --verbosity=1 brings them back.
  code = ("from harness import quiet; import sys; quiet.install(verbose=sys.argv[1] == '1'); "
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
  first = next(i for i, line in enumerate(lines) if "examples/sec" in line)
  assert first <= 8, lines[:first]
  assert not [line for line in lines if "then broadcast to" in line]


BINARIES = ["strategies.train", "compat_v1.train", "strategies.eval", "compat_v1.eval",
            "strategies.launch", "compat_v1.launch", "equivalence.__main__",
            "equivalence.checkpoints", "benchmarks.throughput", "benchmarks.input_pipeline",
            "benchmarks.profile_ops", "examples.keras_fit", "examples.keras_two_outputs",
            "examples.model_parallel"]


def test_no_binary_imports_tensorflow_before_its_flags_are_parsed():
  # harness.cli quiets TensorFlow's first screen before main imports it, and a bad flag is
  # answered before TensorFlow's seconds of import. Before: strategies.train imported it at
  # module level (through harness.determinism), and its first screen came back.
  code = ("import importlib, sys\n"
          "for name in sys.argv[1:]:\n"
          "  importlib.import_module(name)\n"
          "print(sorted(m for m in sys.modules if m.split('.')[0] == 'tensorflow')[:1])")
  result = subprocess.run([sys.executable, "-c", code, *BINARIES], capture_output=True,
                          text=True, env=helpers.env(), timeout=120, check=True,
                          cwd=helpers.REPO)
  assert result.stdout == "[]\n", result.stdout
