"""Every numeric flag of every binary has a range, checked while the command line is parsed:
values at and past each bound, 0, negatives, 2**31, 2**63, NaN and infinity are each one line
and exit status 2 before the binary's main runs (so nothing is written), or are accepted as
the value given; --help shows each range."""

import glob
import importlib
import inspect
import math
import os
import re

from absl import flags
import pytest

from harness.command_line import cli
from harness.command_line import flag_ranges
from tests import helpers

# Every module a user runs with `python -m` (each ends in cli.app_run; the porting kit's has a
# runner of its own): found, not listed, so a new binary is walked too.
BINARIES = sorted(
    os.path.relpath(path, helpers.REPO)[:-3].replace(os.sep, ".")
    for path in glob.glob(os.path.join(helpers.REPO, "*", "*.py"))
    if "/tests/" not in path and ("cli.app_run(" in open(path, encoding="utf-8").read()
                                  or path.endswith("porting/__main__.py")))
SPECIALS = (0, -1, 2 ** 31, 2 ** 63, -2 ** 63, "nan", "inf", "-inf", "", "x")


def _binary(name):
  return importlib.import_module(name)


def _numeric_flags(module):
  fv = flags.FlagValues()
  module.define_flags(fv)
  return [fv[name] for name in sorted(fv) if flag_ranges.is_numeric(fv[name])
            or isinstance(fv[name].parser, (flags.IntegerParser, flags.FloatParser))]


def _bounds(parser):
  """(low, high, low_open, is_float) of a numeric flag's parser; element's for a list."""
  parser = getattr(parser, "element", parser)
  return (parser.lower_bound, parser.upper_bound, getattr(parser, "low_open", False),
          isinstance(parser, flags.FloatParser))


def _inside(value, bounds):
  low, high, low_open, is_float = bounds
  try:
    number = float(value) if is_float else int(value)
  except (TypeError, ValueError):
    return False
  if is_float and not math.isfinite(number):
    return False
  return (low < number if low_open else low <= number) and number <= high


def _values(bounds):
  low, high, _, is_float = bounds
  step = 1e-9 if is_float else 1
  edges = [low, high, low - step * max(1, abs(low)), high + step * max(1, abs(high))]
  if is_float:
    edges += [high * 2, -high]
  return [*edges, *SPECIALS]


def _run(module, name, value, capsys):
  """The binary on --name=value alone: (exit status, stderr, the value main saw or None)."""
  seen = []

  def main(values, args=None):
    del args
    seen.append(values[name].value)

  takes_args = len(inspect.signature(module.main).parameters) == 2  # main(values, args)
  status = cli.call(module.define_flags, main, [f"--{name}={value}"], takes_args=takes_args)
  return status, capsys.readouterr().err, (seen or [None])[0]


def test_every_binary_is_found():
  assert {"strategies.train", "compat_v1.train", "strategies.eval", "compat_v1.eval",
          "strategies.launch", "compat_v1.launch", "porting.__main__",
          "benchmarks.throughput", "benchmarks.input_pipeline", "examples.keras_fit",
          "equivalence.__main__"} <= set(BINARIES), BINARIES


@pytest.mark.parametrize("binary", BINARIES)
def test_every_numeric_flag_has_both_bounds_and_help_shows_them(binary):
  module = _binary(binary)
  fv = flags.FlagValues()
  module.define_flags(fv)
  numeric = _numeric_flags(module)
  for flag in numeric:
    low, high, _, _ = _bounds(flag.parser)
    assert low is not None and high is not None, f"{binary} --{flag.name} has no range"
    assert flag.parser.syntactic_help in fv.get_help(), flag.name
    assert str(high) in flag.parser.syntactic_help or f"{high:g}" in flag.parser.syntactic_help


@pytest.mark.parametrize("binary", BINARIES)
def test_each_value_is_refused_in_one_line_or_taken_as_given(binary, capsys):
  module = _binary(binary)
  for flag in _numeric_flags(module):
    bounds = _bounds(flag.parser)
    is_list = hasattr(flag.parser, "element")
    for value in _values(bounds):
      status, err, seen = _run(module, flag.name, value, capsys)
      if _inside(value, bounds):
        assert status == 0 and seen is not None, (binary, flag.name, value, err)
        expected = (float if bounds[3] else int)(value)
        assert (seen == [expected] if is_list else seen == expected), (flag.name, value, seen)
      else:
        lines = err.strip().splitlines()
        assert status == 2 and seen is None, (binary, flag.name, value, status)
        assert len(lines) == 1 and lines[0].startswith(f"error: flag --{flag.name}="), lines


def test_list_flags_refuse_empty_and_bad_items(capsys):
  throughput = _binary("benchmarks.throughput")
  for name, value in (("num_gpus", ""), ("num_gpus", "x"), ("num_gpus", "1,65"),
                      ("kinds", ""), ("kinds", "tf2,nope"), ("precisions", "")):
    status, err, seen = _run(throughput, name, value, capsys)
    assert status == 2 and seen is None and err.count("\n") == 1, (name, value, err)
  assert _run(throughput, "num_gpus", "1,4", capsys)[2] == [1, 4]


def test_internal_child_flags_are_checked(capsys):
  """benchmarks' internal --child flags: garbage, a negative or a huge count were a
  traceback, an abort and minutes of work."""
  throughput = _binary("benchmarks.throughput")
  for spec in ("garbage", "tf2:x:fp32", "tf2:65:fp32", "tf2:1:fp64", "tf2:1:fp32:extra"):
    assert cli.call(throughput.define_flags, throughput.main, [f"--child={spec}"]) == 2
    assert capsys.readouterr().err.startswith(f"error: --child={spec}: it is internal")
  pipeline = _binary("benchmarks.input_pipeline")
  for count in ("-1", "100000"):
    assert cli.call(pipeline.define_flags, pipeline.main, [f"--child_threads={count}"]) == 2
    assert "not an integer in the range [0, 1024]" in capsys.readouterr().err
  too_many = str(len(os.sched_getaffinity(0)) + 1)
  assert cli.call(pipeline.define_flags, pipeline.main, [f"--child_threads={too_many}"]) == 2
  assert "this machine's cores" in capsys.readouterr().err


@pytest.mark.parametrize("binary, flag", [
    ("strategies.train", "--intra_op_threads=1000000"),
    ("compat_v1.train", "--max_checkpoints_to_keep=9223372036854775807"),
    ("strategies.eval", "--batch_size=9223372036854775807"),
    ("compat_v1.train", "--task_index=-1"),
    ("strategies.train", "--slurm_ps_tasks=-1"),
    ("strategies.train", "--slurm_port_base=70000"),
    ("strategies.train", "--evaluator_num_examples=-1"),
])
def test_a_refusal_from_the_command_line_writes_nothing(tmp_path, binary, flag):
  """The issue's cases, as a user runs them: one line, exit 2, no run folder."""
  folder = tmp_path / "run"
  where = (f"--checkpoint_dir={folder}" if binary.endswith("eval")
           else f"--train_dir={folder}")
  result = helpers.run(binary, "--dataset=synthetic", where, flag, timeout=60)
  helpers.check_one_line(result, f"flag {flag}")
  assert not folder.exists() and list(tmp_path.iterdir()) == []


def test_docs_flags_md_is_the_table():
  """docs/flags.md, one table per binary, is what the definitions say (FLAGS_MD=write
  rewrites it after a change)."""
  binaries = {}
  for name in BINARIES:
    binaries[name] = flags.FlagValues()
    _binary(name).define_flags(binaries[name])
  text = flag_ranges.markdown(binaries)
  path = os.path.join(helpers.REPO, "docs", "flags.md")
  if os.environ.get("FLAGS_MD") == "write":
    with open(path, "w", encoding="utf-8") as f:
      f.write(text)
  with open(path, encoding="utf-8") as f:
    assert f.read() == text, "docs/flags.md is stale: FLAGS_MD=write python -m pytest " \
        "tests/test_flag_ranges.py"
  assert "| `--max_steps` | int | an integer in the range [1, 1099511627776] | 1000000 |" in text


@pytest.mark.parametrize("binary", BINARIES)
def test_the_usage_in_help_is_a_command_that_can_be_pasted(binary):
  """--help prints the module's docstring: a `\\` line continuation in a plain string was
  joined away, leaving the example's lines glued with a run of spaces (seven in
  strategies.train's); raw docstrings keep the shell's continuation."""
  doc = _binary(binary).__doc__ or ""
  for line in doc.splitlines():
    assert not ("python -m" in line and re.search(r"\S {3,}\S", line)), (binary, line)
