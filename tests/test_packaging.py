"""What `pip install .` gives a user: the wheel's top-level names, its licence and metadata,
its console scripts, and commands that work from the installed files alone (not from this
checkout). Before: eight generic top-level packages (`examples` and `benchmarks` among them,
names PyPI projects and stray folders of other packages use), no console scripts, no
licence; BUILD.md, "What pip installs"."""

import email
import glob
import os
import re
import subprocess
import sys
import zipfile

import pytest

from tests import helpers

pytestmark = pytest.mark.slow

INSTALLED = {"cifar10", "compat_v1", "equivalence", "harness", "porting", "strategies", "tfbits"}
SCRIPTS = {"cifar10-train": "strategies.train:run", "cifar10-train-v1": "compat_v1.train:run",
           "cifar10-eval": "strategies.eval:run", "cifar10-eval-v1": "compat_v1.eval:run",
           "cifar10-launch": "strategies.launch:run",
           "cifar10-launch-v1": "compat_v1.launch:run",
           "cifar10-equivalence": "equivalence.__main__:run",
           "cifar10-compare-checkpoints": "equivalence.checkpoints:run",
           "cifar10-export": "strategies.export:run", "cifar10-export-v1": "compat_v1.export:run",
           "cifar10-predict": "strategies.predict:run",
           "cifar10-porting": "porting.__main__:command_line"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
  """The wheel, built offline with this environment's setuptools (the test extra's)."""
  out = tmp_path_factory.mktemp("wheel")
  subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-index",
                  "--no-build-isolation", "-w", str(out), helpers.REPO], check=True,
                 capture_output=True, timeout=300, env=helpers.env())
  path, = glob.glob(f"{out}/*.whl")
  return path


def test_the_wheel_holds_only_the_packages_the_commands_import(wheel):
  names = zipfile.ZipFile(wheel).namelist()
  top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
  assert top == INSTALLED
  dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
  metadata = email.message_from_bytes(zipfile.ZipFile(wheel).read(f"{dist_info}/METADATA"))
  assert metadata["License-Expression"] == "Apache-2.0"
  assert set(metadata.get_all("License-File")) == {"LICENSE", "NOTICE"}
  assert {f"{dist_info}/licenses/LICENSE", f"{dist_info}/licenses/NOTICE"} <= set(names)
  assert metadata.get_all("Classifier") and metadata["Author"]
  entry_points = zipfile.ZipFile(wheel).read(f"{dist_info}/entry_points.txt").decode()
  scripts = dict(re.findall(r"^(\S+) = (\S+)$", entry_points.split("[console_scripts]")[1],
                            re.M))
  assert scripts == SCRIPTS


def test_the_installed_scripts_train_and_evaluate_without_the_checkout(wheel, tmp_path):
  target = tmp_path / "site"
  subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                  "--target", str(target), wheel], check=True, capture_output=True,
                 timeout=300)
  # The installed files first on the path, and no checkout: run from / with this
  # environment's dependencies, as a user's fresh venv with `pip install .` would be.
  env = {**helpers.env(), "PYTHONPATH": str(target)}
  where = subprocess.run([sys.executable, "-c", "import strategies, harness, cifar10; "
                          "print(strategies.__file__, harness.__file__, cifar10.__file__)"],
                         capture_output=True, text=True, env=env, cwd="/", check=True)
  assert all(p.startswith(str(target)) for p in where.stdout.split()), where.stdout

  def script(name, *args):
    return subprocess.run([str(target / "bin" / name), *args], capture_output=True,
                          text=True, env=env, cwd="/", timeout=240)

  shown = script("cifar10-train-v1", "--help")
  assert shown.returncode == 0 and "\nData:\n" in shown.stdout
  assert shown.stdout.startswith("Trains the CIFAR-10 model the TF1 way")
  train_dir = tmp_path / "run"
  trained = script("cifar10-train", "--dataset=synthetic", "--batch_size=2", "--max_steps=2",
                   f"--train_dir={train_dir}")
  assert trained.returncode == 0, trained.stderr[-2000:]
  assert f"Done: step 2, checkpoint {train_dir}/ckpt-2" in trained.stderr
  scored = script("cifar10-eval-v1", f"--checkpoint_dir={train_dir}", "--dataset=synthetic",
                  "--run_once", "--num_examples=16")
  assert scored.returncode == 0, scored.stderr[-2000:]
  assert re.fullmatch(r"step 2: precision @ 1 = \d\.\d{3}, loss = \d+\.\d{3} \(16 examples, "
                      + re.escape(f"{train_dir}/ckpt-2") + r"\)\n", scored.stdout), scored.stdout
  assert os.path.isdir(train_dir / "eval")
