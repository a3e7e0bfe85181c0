"""The docs cannot drift from the code: every command they show is checked against the binary.

- Every `python -m <module> ...` in README.md, BUILD.md, MIGRATION.md and docs/*.md names a
  module of this project whose flags include each `--flag` it passes (after a launcher's `--`,
  the trainer's flags), and every flag in docs/training.md's table exists in a trainer.
- README's first command and the commands after it run in the order shown, in this process
  with fewer steps and a temporary folder: the quickstart's run, the table's continuation of
  it and the v1 run, then the checkpoint comparison the README gives, which must say
  EQUIVALENT. (Before, the table's second command was refused: another batch size.)
"""

import glob
import importlib
import os
import re
import shlex

from absl import flags
import pytest

from cifar10 import serving
from tests import helpers

DOCS = ["README.md", "BUILD.md", "MIGRATION.md"] + sorted(
    os.path.relpath(p, helpers.REPO) for p in glob.glob(f"{helpers.REPO}/docs/*.md"))
COMMAND = re.compile(r"python3? -m ([\w.]+)((?:[ \t]+(?:\\\n)?(?!&&)[^\s`|]+)*)")
# What follows `--` on a launcher's command line goes to this binary.
LAUNCHED = {"strategies.launch": "strategies.train", "compat_v1.launch": "compat_v1.train"}
NOT_OURS = {"venv", "pip", "pytest"}


def _commands():
  for doc in DOCS:
    with open(os.path.join(helpers.REPO, doc), encoding="utf-8") as f:
      text = f.read()
    for module, rest in COMMAND.findall(text):
      if module.split(".")[0] not in NOT_OURS:
        yield doc, module, rest.replace("\\\n", " ").split()


def _flags(module):
  binary = importlib.import_module(module if module not in ("equivalence", "porting") else
                                   f"{module}.__main__")
  fv = flags.FlagValues()
  binary.define_flags(fv)
  names = set(fv)
  return names | {"no" + n for n in names if isinstance(fv[n], flags.BooleanFlag)} | {
      "help", "flagfile", "verbosity"}


def test_every_flag_a_doc_passes_is_a_flag_of_that_binary():
  checked = 0
  for doc, module, args in _commands():
    binary = module
    for arg in args:
      if arg == "--" and module in LAUNCHED:
        binary = LAUNCHED[module]
        continue
      match = re.match(r"\[?--(\w+)", arg)
      if match:
        assert match[1] in _flags(binary), f"{doc}: python -m {module}: no flag --{match[1]}"
        checked += 1
  assert checked > 60, checked


def test_the_flag_table_lists_flags_that_exist():
  with open(os.path.join(helpers.REPO, "docs/training.md"), encoding="utf-8") as f:
    listed = re.findall(r"^\| `--(\w+)`", f.read(), re.MULTILINE)
  known = _flags("strategies.train") | _flags("compat_v1.train")
  assert len(listed) > 30 and not set(listed) - known, set(listed) - known
  # And every trainer flag is in the table (absl's own flags aside).
  missing = (_flags("strategies.train") | _flags("compat_v1.train")) - set(listed) - {
      "help", "flagfile", "verbosity"}
  missing = {m for m in missing if not (m.startswith("no") and m[2:] in listed)}
  assert not missing, f"docs/training.md lacks {sorted(missing)}"


def _readme_commands():
  with open(os.path.join(helpers.REPO, "README.md"), encoding="utf-8") as f:
    text = f.read()
  return [(m, shlex.split(rest)) for m, rest in COMMAND.findall(text)]


@pytest.mark.slow
def test_readme_runs_in_the_order_shown(tmp_path, capsys):
  commands = _readme_commands()
  wanted = ["strategies.train", "strategies.train", "compat_v1.train"]
  trainers = [(m, a) for m, a in commands if m in ("strategies.train", "compat_v1.train")]
  assert [m for m, _ in trainers[:3]] == wanted
  folders = {}
  for module, args in trainers[:3]:
    run = []
    for arg in args:
      name, _, value = arg.partition("=")
      if name == "--max_steps":  # 200 -> 2, 400 -> 4: the same story, shorter
        arg = f"--max_steps={int(value) // 100}"
      elif name == "--train_dir":
        folders.setdefault(value, str(tmp_path / os.path.basename(value)))
        arg = f"--train_dir={folders[value]}"
      run.append(arg)
    result = helpers.call(module, *run)
    assert result.returncode == 0, f"{module} {run}: {result.stderr[-2000:]}"
  compare = [a for m, a in commands if m == "equivalence.checkpoints"]
  assert compare, "README shows no checkpoint comparison"
  paths = [re.sub(r"-400$", "-4", p) for p in compare[0]]
  for local, real in ((v, k) for k, v in folders.items()):
    paths = [p.replace(real, local) for p in paths]
  capsys.readouterr()
  result = helpers.call("equivalence.checkpoints", *paths)
  printed = capsys.readouterr().out
  assert result.returncode == 0 and printed.endswith("\nEQUIVALENT\n"), printed[-3000:]
  assert "global step: 4 and 4" in printed
  # And it can tell: the quickstart's own step-2 checkpoint is another state.
  result = helpers.call("equivalence.checkpoints", paths[0], re.sub(r"-4$", "-2", paths[0]))
  printed = capsys.readouterr().out
  assert result.returncode == 1 and printed.endswith("\nNOT EQUIVALENT\n"), printed[-3000:]
  assert "global step: 4 and 2" in printed and " FAIL" in printed
  # The exports of the two runs, an image, and its classes.

  def here(arg):
    name, _, value = arg.partition("=")
    if value in folders:
      return f"{name}={folders[value]}"
    return re.sub(r"^(--export_dir=|--model=|)/tmp/", rf"\g<1>{tmp_path}/", arg)

  exports = [(m, a) for m, a in commands if m in ("strategies.export", "compat_v1.export")]
  assert [m for m, _ in exports] == ["strategies.export", "compat_v1.export"]
  for module, args in exports:
    result = helpers.call(module, *map(here, args))
    assert result.returncode == 0 and result.stdout.endswith("/4\n"), result.stderr[-2000:]
  (_, sample), = [(m, a) for m, a in commands if m == "strategies.sample_images"]
  result = helpers.call("strategies.sample_images",
                        *(str(tmp_path) if a == "/tmp" else a for a in sample))
  names = "|".join(serving.CLASS_NAMES)
  assert result.returncode == 0 and re.fullmatch(
      rf"{tmp_path}/test0.png: ({names}) \(label \d\)\n", result.stdout), result
  (_, predict), = [(m, a) for m, a in commands if m == "strategies.predict"]
  result = helpers.call("strategies.predict", *map(here, predict))
  assert result.returncode == 0 and re.fullmatch(
      rf"{tmp_path}/test0.png: (?:({names}) \d\.\d{{3}}(?:, |\n)){{3}}", result.stdout), \
      result.stdout + result.stderr[-2000:]


@pytest.mark.parametrize("package", ["cifar10", "strategies", "compat_v1", "harness",
                                     "examples", "equivalence", "benchmarks", "porting"])
def test_every_module_is_named_in_readme_and_its_package_docstring(package):
  # A package laid out in folders (harness) names the modules of each folder.
  paths = glob.glob(f"{helpers.REPO}/{package}/*.py") + (
      glob.glob(f"{helpers.REPO}/{package}/*/*.py") if package == "harness" else [])
  modules = sorted(os.path.basename(p)[:-3] for p in paths
                   if not os.path.basename(p).startswith("__"))
  with open(os.path.join(helpers.REPO, "README.md"), encoding="utf-8") as f:
    row = next(line for line in f if line.startswith(f"| `{package}/` |"))
  missing = [m for m in modules if f"`{m}`" not in row]
  assert not missing, f"README's package table lacks {package}: {missing}"
  if package in ("cifar10", "strategies", "compat_v1", "harness", "porting"):
    folders = {os.path.basename(os.path.dirname(p)) for p in paths} - {package}
    doc = "".join(importlib.import_module(name).__doc__ for name in
                  [package] + [f"{package}.{folder}" for folder in sorted(folders)])
    missing = [m for m in modules if not re.search(rf"\b{m}\b", doc)]
    assert not missing, f"{package}/__init__.py's docstring lacks {missing}"


# A test file, optionally with a test of it, as docs, deploy files, docstrings and comments
# name them; each must exist. (The deploy files still named the deployment tests' file after
# it was split in two.)
TEST_PATH = re.compile(r"\btests/(\w+\.py)(?:::(\w+))?")


def test_every_test_file_named_anywhere_exists():
  named = set()
  patterns = ("*.md", "docs/*.md", "deploy/*", "*/*.py", ".ci/*")
  for pattern in patterns:
    for path in glob.glob(os.path.join(helpers.REPO, pattern)):
      if ".venv" in path or not os.path.isfile(path):
        continue
      with open(path, encoding="utf-8") as f:
        named |= {(os.path.relpath(path, helpers.REPO), *ref) for ref in TEST_PATH.findall(f.read())}
  assert len({(file, test) for _, file, test in named}) >= 20, named
  for where, file, test in sorted(named):
    source = os.path.join(helpers.REPO, "tests", file)
    assert os.path.isfile(source), f"{where} names tests/{file}, which does not exist"
    if test:
      with open(source, encoding="utf-8") as f:
        assert re.search(rf"^def {test}\(", f.read(), re.MULTILINE), (
            f"{where} names tests/{file}::{test}, which does not exist")
