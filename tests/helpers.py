"""Running the binaries the way a user does, bounded in time, with readable logs."""

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def env():
  return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")


def run(module, *args, timeout=240):
  """`python -m module args...` from a neutral directory; returns the CompletedProcess."""
  return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                        timeout=timeout, env=env(), cwd="/")


def start(module, *args):
  return subprocess.Popen([sys.executable, "-m", module, *args], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, env=env(), cwd="/")


def error_line(result):
  """The last stderr line, which must be the whole one-line error."""
  lines = result.stderr.strip().splitlines()
  return lines[-1] if lines else ""
