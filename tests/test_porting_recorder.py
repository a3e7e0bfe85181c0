"""The recorder as its own distribution (recorder/setup.py): built here with this venv's
setuptools, offline, it holds the porting package and tfbits alone, asks for Python 3.7 and
nothing else, and records with none of this project's other packages importable
(MIGRATION.md: the TF1 code's environment has the recorder and its own TensorFlow, nothing
more)."""

import os
import shutil
import subprocess
import sys
import zipfile

import pytest

import porting
from tests import helpers
from tests import tf115_model

pytestmark = pytest.mark.slow
# Importing any of these fails in the recorder's process: it must not need them.
PROJECT = ("cifar10", "harness", "strategies", "compat_v1", "equivalence", "examples",
           "benchmarks")
RUN = ("import runpy, sys\n"
       f"for name in {PROJECT!r}:\n"
       "  sys.modules[name] = None\n"
       "sys.argv[0] = 'porting'\n"
       "runpy.run_module('porting', run_name='__main__', alter_sys=True)\n")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
  out = tmp_path_factory.mktemp("wheel")
  with helpers.recorder_build_lock():
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(out), "./recorder"], cwd=helpers.REPO, capture_output=True, text=True,
        timeout=180)
  assert built.returncode == 0, built.stderr[-2000:]
  (name,) = os.listdir(out)
  return out / name


def test_the_wheel_is_the_porting_package_alone_for_python_3_7(wheel):
  with zipfile.ZipFile(wheel) as z:
    names = z.namelist()
    (metadata,) = [n for n in names if n.endswith("METADATA")]
    text = z.read(metadata).decode()
  assert "Requires-Python: >=3.7" in text
  assert "Requires-Dist" not in text  # the environment's TensorFlow is left as it is
  packages = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
  assert packages == {"porting", "tfbits"}  # the kit and the one package of ours it imports
  # Every module of the kit, its causes/ included.
  here = {os.path.relpath(os.path.join(d, f), helpers.REPO)
          for package in packages
          for d, _, files in os.walk(os.path.join(helpers.REPO, package))
          for f in files if f.endswith(".py")}
  assert here == {n for n in names if n.endswith(".py")}


def test_the_installed_recorder_alone_records_what_compare_replays(wheel, tmp_path):
  site = tmp_path / "site"
  with zipfile.ZipFile(wheel) as z:
    z.extractall(site)
  code = tmp_path / "code"
  (code / "tests").mkdir(parents=True)
  (code / "tests" / "__init__.py").write_text("")
  shutil.copy(tf115_model.__file__, code / "tests")
  env = dict(helpers.env(), PYTHONPATH=str(site))

  def run(*args):
    return subprocess.run([sys.executable, "-c", RUN, *args], cwd=str(code), env=env,
                          capture_output=True, text=True, timeout=240)

  shown = run("record", "--help")
  assert shown.returncode == 0, shown.stderr[-2000:]
  assert "--port" in shown.stdout
  folder = str(tmp_path / "record")
  recorded = run("record", "--port=tests.tf115_model:port",
                 "--batches=tests.tf115_model:batches", "--replicas=1", "--steps=2", folder)
  assert recorded.returncode == 0, recorded.stderr[-2000:]
  assert recorded.stdout.strip().splitlines()[-1] == f"wrote {folder}/record.json"
  # Recorded by the same TensorFlow and kernels as this side's: the same bits.
  report = porting.compare(tf115_model.port(), record=folder, steps=2)
  assert report.equal and report.tolerance == 0.0, report.text()
  assert len([r for r in report.rows if r.kind == "gradient"]) == 2 * 2  # 2 weights, 2 steps
