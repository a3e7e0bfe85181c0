"""A stop loses nothing when nobody reads the run's stderr any more (issue 63, items 1 and 9):
`... 2>&1 | tee log` whose tee ended at the Ctrl-C, or a killed stderr filter. Before: a line
printed there raised BrokenPipeError; SIGTERM saved, then exited 1 instead of 143, and the
Ctrl-C handler's own line ended the run without its save (exit 1). The lines the screen lost
are in <train_dir>/log.txt.
"""

import glob
import os
import re
import select
import signal
import subprocess
import sys
import time

import pytest

from tests import forked
from tests import helpers

# A long run, a progress line every step, no periodic save: the stop's save is the only one.
FLAGS = ("--num_gpus=1", "--dataset=synthetic", "--batch_size=8", "--max_steps=100000",
         "--log_frequency=1", "--save_checkpoint_steps=100000")
_STOPPED = r"stopped: (SIGTERM|Ctrl-C) after step (\d+); saved (\S+); run the same command"


def _start(trainer, train_dir, popen=subprocess.Popen, **streams):
  return popen([sys.executable, "-m", trainer, *FLAGS, f"--train_dir={train_dir}"],
               env=helpers.env(), cwd=train_dir.parent, **streams)


def _read_until_steps(fd, proc, timeout=120):
  """What the child wrote to `fd` until its third progress line (steps ran, step 2 logged)."""
  text, deadline = b"", time.time() + timeout
  while not re.search(rb"step [2-9]\d*, loss = ", text):
    assert time.time() < deadline and proc.poll() is None, text.decode()[-3000:]
    if select.select([fd], [], [], 1)[0]:
      try:
        chunk = os.read(fd, 65536)
      except OSError:  # a terminal's master after the child closed it
        chunk = b""
      assert chunk, text.decode()[-3000:]
      text += chunk
  return text


def _stderr_filter(pid):
  """The PID of the trainer's stderr filter (tfbits.quiet: `python -S -c`, a child of it)."""
  for folder in glob.glob("/proc/[0-9]*"):
    try:
      with open(f"{folder}/stat", encoding="utf-8", errors="replace") as f:
        parent = int(f.read().rsplit(")", 1)[1].split()[1])  # after the command's name
      with open(f"{folder}/cmdline", "rb") as f:
        args = f.read().split(b"\0")
    except (OSError, IndexError, ValueError):  # a process that ended meanwhile
      continue
    if parent == pid and args[1:3] == [b"-S", b"-c"]:
      return int(os.path.basename(folder))
  raise AssertionError(f"no stderr filter under {pid}")


def _stop_unread(trainer, lost, signum, tmp_path):
  """Runs `trainer` until it logged step 2, takes its stderr's reader away (`lost`: the pipe
  closed, or the filter killed), sends `signum`; returns the exit status, the run folder and
  its log.txt ("" if none)."""
  train_dir = tmp_path / "run"
  train_dir.mkdir()
  # The stderr filter is a fresh binary's (started at TensorFlow's first import): a forked one
  # has none to kill.
  proc = _start(trainer, train_dir, subprocess.Popen if lost == "filter killed" else forked.Popen,
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
  try:
    _read_until_steps(proc.stderr.fileno(), proc)
    if lost == "filter killed":
      os.kill(_stderr_filter(proc.pid), signal.SIGKILL)
    proc.stderr.close()  # a tee ended by the Ctrl-C: no reader left
    proc.send_signal(signum)
    status = proc.wait(timeout=120)  # never a hang
  finally:
    proc.kill()
    proc.wait()
  log = train_dir / "log.txt"
  return status, train_dir, log.read_text(encoding="utf-8") if log.exists() else ""


def _check_stop_saved(log, train_dir, by):
  """The log's stop line names the step and the checkpoint the stop saved, the newest one."""
  from cifar10 import checkpoints  # pylint: disable=g-import-not-at-top
  match = re.search(_STOPPED, log)
  assert match and match[1] == by, log[-3000:]
  step, path = int(match[2]), match[3]
  assert step > 2 and checkpoints.read(path).global_step == step
  assert checkpoints.read(str(train_dir)).global_step == step
  # The progress lines that led there are kept too, with the date.
  assert re.search(rf"^\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d step {step - 1}, loss = ", log,
                   re.MULTILINE), log[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("trainer,lost", [("strategies.train", "pipe closed"),
                                          ("strategies.train", "filter killed"),
                                          ("compat_v1.train", "pipe closed")])
def test_sigterm_with_stderr_unread_saves_and_exits_143(trainer, lost, tmp_path):
  # Before: the checkpoint saved, then `stopped:` raised BrokenPipeError: exit 1.
  status, train_dir, log = _stop_unread(trainer, lost, signal.SIGTERM, tmp_path)
  assert status == 143, log[-3000:]
  _check_stop_saved(log, train_dir, "SIGTERM")


@pytest.mark.slow
@pytest.mark.parametrize("trainer,lost", [("strategies.train", "filter killed"),
                                          ("compat_v1.train", "pipe closed")])
def test_ctrl_c_with_stderr_unread_saves_and_exits_130(trainer, lost, tmp_path):
  # Before: the handler's own line raised where the run was: exit 1, nothing saved.
  status, train_dir, log = _stop_unread(trainer, lost, signal.SIGINT, tmp_path)
  assert status == 130, log[-3000:]
  assert "Ctrl-C: finishing this step and saving a checkpoint" in log
  _check_stop_saved(log, train_dir, "Ctrl-C")


# The child's terminal becomes its controlling one (opened after setsid), as a shell's is:
# then the key's \x03 on the master is the SIGINT of its foreground process group.
_IN_TERMINAL = ("import os, sys; os.close(os.open(os.ttyname(0), os.O_RDWR)); "
                "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])")


@pytest.mark.slow
def test_ctrl_c_at_a_terminal_says_so_on_a_line_of_its_own(tmp_path):
  # Before: `^CCtrl-C: finishing this step ...`, the terminal's echo of the key and the
  # run's answer on one line.
  train_dir = tmp_path / "run"
  master, slave = os.openpty()
  proc = subprocess.Popen([sys.executable, "-c", _IN_TERMINAL, "-m", "strategies.train",
                           *FLAGS, f"--train_dir={train_dir}"], stdin=slave, stdout=slave,
                          stderr=slave, start_new_session=True, env=helpers.env(),
                          cwd=tmp_path)
  os.close(slave)
  try:
    screen = _read_until_steps(master, proc)
    os.write(master, b"\x03")  # Ctrl-C
    deadline = time.time() + 120
    while time.time() < deadline:  # to the end: EIO once the child closed the terminal
      if select.select([master], [], [], 1)[0]:
        try:
          chunk = os.read(master, 65536)
        except OSError:
          break
        if not chunk:
          break
        screen += chunk
    status = proc.wait(timeout=30)
  finally:
    proc.kill()
    proc.wait()
    os.close(master)
  lines = screen.decode(errors="replace").replace("\r\n", "\n").split("\n")
  assert status == 130, lines[-20:]
  assert "^C" in "\n".join(lines), lines[-20:]  # the terminal echoed the key
  answer = [line for line in lines if "Ctrl-C: finishing this step" in line]
  assert len(answer) == 1 and answer[0].startswith("Ctrl-C: "), lines[-20:]
  assert any(re.match(_STOPPED, line) for line in lines), lines[-20:]
