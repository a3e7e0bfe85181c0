"""`--help`, as a user reads it: the binary's usage, then its own flags grouped by subject
(harness.command_line.usage), each once, within 80 columns where the project wrote the text. Before:
one alphabetical block of 155 lines under the module's path, with a preamble written for
the project's developers, ending with exit status 1."""

import importlib

from absl import flags
import pytest

from cifar10 import settings
from harness.command_line import usage
from tests import helpers
from tests.test_flag_ranges import BINARIES

# The binaries a user runs first; their usage is written for 80 columns.
MAIN = ("strategies.train", "compat_v1.train", "strategies.eval", "compat_v1.eval",
        "strategies.launch", "compat_v1.launch")


def _help(binary):
  module = importlib.import_module(binary)
  fv = flags.FlagValues()
  module.define_flags(fv)
  names = {fv[n].name for n in fv}
  return usage.text(module.__doc__, fv, names), names


@pytest.mark.parametrize("binary", BINARIES)
def test_each_flag_is_listed_once_under_its_subject(binary):
  text, names = _help(binary)
  for name in names:
    entries = [line for line in text.splitlines()
               if line.split("=")[0].split(" ")[2:3] in (["--" + name], ["--[no]" + name])]
    assert len(entries) == 1, (binary, name, entries)
  lines = text.splitlines()
  headings = [line[:-1] for line, after in zip(lines, lines[1:])
              if line.endswith(":") and after.startswith("  --")]
  assert headings or not names, text  # a binary of arguments only has no flag groups
  order = list(settings.SUBJECTS) + ["Other flags"]
  assert headings == sorted(headings, key=order.index), headings
  if binary in MAIN:  # every flag of theirs has a subject
    assert "Other flags" not in headings, binary


@pytest.mark.parametrize("binary", MAIN)
def test_the_main_binaries_help_fits_in_80_columns(binary):
  text, _ = _help(binary)
  wide = [line for line in text.splitlines() if len(line) > usage.WIDTH]
  assert not wide, wide


def test_help_exits_0_with_the_subjects_in_order_on_stdout():
  result = helpers.run("compat_v1.train", "--help")  # status 0 (absl's own: 1)
  assert result.returncode == 0 and result.stderr == ""
  places = [result.stdout.index(f"\n{s}:\n") for s in settings.SUBJECTS
            if s != "Export and prediction"]
  assert places == sorted(places)
  data, schedule = places[0], places[1]
  assert data < result.stdout.index("  --dataset=cifar10\n") < schedule
  assert result.stdout.index("  --job_name") > places[-1]  # a cluster flag, under Clusters
  full = helpers.run("compat_v1.train", "--helpfull")  # absl's, every module's flags
  assert full.returncode == 0 and "absl.flags:" in full.stdout


def _scripts():
  """{console script: module} of pyproject.toml's [project.scripts]."""
  import re  # pylint: disable=g-import-not-at-top
  with open(f"{helpers.REPO}/pyproject.toml", encoding="utf-8") as f:
    block = f.read().split("[project.scripts]")[1].split("\n[")[0]
  return dict(re.findall(r'^(cifar10-[\w-]+) = "([\w.]+):\w+"', block, re.M))


@pytest.mark.slow
# One of each kind of entry point (harness.command_line.cli's app_run with flags only, with
# arguments, and the kit's own command line); every script is one of them (pyproject.toml), and a
# process each costs the suite ~2.5 s.
@pytest.mark.parametrize("script", ["cifar10-train", "cifar10-predict", "cifar10-porting"])
def test_every_console_script_answers_helpfull_with_its_own_text(script):
  # Before: --helpfull started at the flags (absl printed __main__'s docstring: pip's
  # wrapper's, none), the usage said `python -m ...`, and cifar10-porting printed only
  # `USAGE: ... [flags]`.
  import os  # pylint: disable=g-import-not-at-top
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  module = _scripts()[script]
  path = os.path.join(os.path.dirname(sys.executable), script)
  assert os.path.exists(path), f"{script} is not installed: pip install -e '.[test]'"
  doc = importlib.import_module(module).__doc__
  first = doc.strip().splitlines()[0].replace(f"python -m {module.rsplit('.__main__', 1)[0]}",
                                              script)
  result = subprocess.run([path, "--helpfull"], capture_output=True, text=True, timeout=120,
                          cwd="/", env=helpers.env())
  assert result.returncode == 0, result.stderr[-1000:]
  assert result.stdout.splitlines()[0] == first, result.stdout[:300]
  assert "--flagfile" in result.stdout or "--port" in result.stdout
