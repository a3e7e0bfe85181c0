"""Bad input to the exporters and to strategies.predict: one line, exit 2, nothing written;
a version folder is whole or absent, on a full or read-only disk too; ram:// works."""

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from cifar10 import data_sources
from tests import helpers

pytestmark = pytest.mark.slow  # trainers, exporters and a TFLite conversion in-process
EXPORTERS = ("strategies.export", "compat_v1.export")


@pytest.fixture(name="run", scope="module")
def fixture_run(tmp_path_factory):
  root = tmp_path_factory.mktemp("run")
  result = helpers.call("strategies.train", "--dataset=synthetic", "--batch_size=4",
                        "--max_steps=1", "--seed=2", f"--train_dir={root}")
  assert result.returncode == 0, result.stderr[-2000:]
  return root


def _export(exporter, run, export_dir, *flags):
  return helpers.call(exporter, f"--checkpoint_dir={run}", f"--export_dir={export_dir}", *flags)


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_a_taken_version_a_link_or_no_checkpoint_is_one_line(exporter, run, tmp_path):
  out = tmp_path / "models"
  assert _export(exporter, run, out).returncode == 0
  before = os.stat(out / "1" / "saved_model.pb").st_mtime_ns
  helpers.check_one_line(_export(exporter, run, out), f"{out}/1 exists: pass --overwrite")
  assert os.stat(out / "1" / "saved_model.pb").st_mtime_ns == before
  assert _export(exporter, run, out, "--overwrite").returncode == 0
  assert os.stat(out / "1" / "saved_model.pb").st_mtime_ns != before
  assert sorted(os.listdir(out)) == ["1"]  # no temporary folder left
  (tmp_path / "elsewhere").mkdir()
  os.symlink(tmp_path / "elsewhere", out / "5")
  helpers.check_one_line(_export(exporter, run, out, "--version=5"), "is a symbolic link")
  assert os.listdir(tmp_path / "elsewhere") == []
  (tmp_path / "empty").mkdir()
  helpers.check_one_line(_export(exporter, tmp_path / "empty", tmp_path / "none"),
                         "no checkpoint found in")
  assert not os.path.exists(tmp_path / "none")


def test_a_damaged_checkpoint_is_one_line_and_writes_nothing(run, tmp_path):
  copy = tmp_path / "run"
  shutil.copytree(run, copy)
  data = next(p for p in os.listdir(copy) if ".data-" in p)
  with open(copy / data, "r+b") as f:  # flip bits in the middle of the weights
    f.seek(os.path.getsize(copy / data) // 2)
    byte = f.read(1)
    f.seek(-1, 1)
    f.write(bytes([byte[0] ^ 0xFF]))
  for exporter in EXPORTERS:
    helpers.check_one_line(_export(exporter, copy, tmp_path / exporter),
                           "does not read back whole")
    assert not os.path.exists(tmp_path / exporter / "1")


def test_export_to_ram_and_predict_from_it(run, tmp_path, capsys):
  result = _export("strategies.export", run, "ram://exports/m", "--version=3")
  assert result.returncode == 0 and result.stdout == "ram://exports/m/3\n"
  source = data_sources.load_source("synthetic", "test", seed=2)
  images = [source.fetch(i)[0] for i in range(2)]
  paths = []
  for i, image in enumerate(images):
    paths.append(str(tmp_path / f"{i}.png"))
    tf.io.write_file(paths[-1], tf.io.encode_png(image))
  (tmp_path / "notes.txt").write_text("not an image")
  capsys.readouterr()
  result = helpers.call("strategies.predict", "--model=ram://exports/m", "--top_k=2",
                        paths[0], str(tmp_path / "notes.txt"), paths[1])
  assert result.returncode == 2
  lines = result.stdout.splitlines()
  assert [line.split(":")[0] for line in lines] == paths
  assert f"error: {tmp_path}/notes.txt: not a JPEG, PNG, GIF, BMP or WebP file" in result.stderr
  # The answer is the model's: its two most probable classes, from the SavedModel itself.
  served = tf.saved_model.load("ram://exports/m/3").signatures["serving_default"](
      images=tf.stack(images))["probabilities"].numpy()
  for line, probabilities in zip(lines, served):
    best = np.argsort(-probabilities, kind="stable")[:2]
    names = re.findall(r"(\w+) (\d\.\d{3})", line.split(": ", 1)[1])
    assert [n for n, _ in names] == [
        ("airplane automobile bird cat deer dog frog horse ship truck".split())[i] for i in best]
    assert [float(p) for _, p in names] == [round(float(probabilities[i]), 3) for i in best]
  # A checkpoint folder answers as its export does.
  from_checkpoint = helpers.call("strategies.predict", f"--model={run}", "--top_k=2", *paths)
  assert from_checkpoint.returncode == 0 and from_checkpoint.stdout == result.stdout
  # A mistyped model folder is named as what it is, not as "no checkpoint" (before).
  helpers.check_one_line(
      helpers.call("strategies.predict", "--model=ram://exports/mm", paths[0]),
      "--model=ram://exports/mm: no such folder or file")
  (tmp_path / "empty").mkdir()
  helpers.check_one_line(
      helpers.call("strategies.predict", f"--model={tmp_path}/empty", paths[0]),
      f"--model={tmp_path}/empty holds neither a SavedModel")


def _can_mount():
  if not shutil.which("unshare"):
    return False
  return subprocess.run(["unshare", "-m", "mount", "-t", "tmpfs", "tmpfs", "/mnt"],
                        capture_output=True, timeout=30).returncode == 0


def test_a_full_or_read_only_disk_leaves_no_version_folder(run, tmp_path):
  if not _can_mount():
    pytest.skip("needs `unshare -m` and tmpfs mounts (root with CAP_SYS_ADMIN)")
  full, read_only = tmp_path / "full", tmp_path / "ro"
  full.mkdir()
  read_only.mkdir()
  # A 1 MiB disk (the SavedModel's variables are 4.3 MB) and a read-only one, in a private
  # mount namespace: both vanish with the process, so it lists what is left before it ends.
  # The four exports run in that one process, each as the binary does (helpers.call: its
  # flags, its one-line error, its exit status), as tests/storage_faults.py runs the trainers.
  script = (f"mount -t tmpfs -o size=1m tmpfs {full} && mount -t tmpfs -o ro tmpfs {read_only}"
            f" && exec {sys.executable} -c '{_EXPORTS_ON_DISKS}' {run} {full} {read_only} "
            + " ".join(EXPORTERS))
  result = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True,
                          text=True, env=helpers.env(), cwd=helpers.REPO, timeout=300)
  assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
  seen = json.loads(result.stdout.strip().splitlines()[-1])
  assert [(e, disk) for e, disk, _, _, _ in seen] == [
      (e, disk) for e in EXPORTERS for disk in ("full", "read_only")]
  for exporter, disk, status, stderr, left in seen:
    assert status == 2 and "Traceback" not in stderr, (exporter, disk, stderr[-3000:])
    line = stderr.strip().splitlines()[-1]
    cause = "No space left on device" if disk == "full" else "Read-only file system"
    assert line.startswith("error: ") and cause in line, (exporter, line)
    # Nothing left in the full disk's export folder; the read-only one could not be made.
    assert left == ([] if disk == "full" else None), (exporter, disk, left)


_EXPORTS_ON_DISKS = """
import json, os, sys
from tests import helpers
run, full, read_only, *exporters = sys.argv[1:]
seen = []
for exporter in exporters:
  for disk, root in (("full", full), ("read_only", read_only)):
    out = os.path.join(root, "m")
    result = helpers.call(exporter, "--checkpoint_dir=" + run, "--export_dir=" + out)
    left = sorted(os.listdir(out)) if os.path.isdir(out) else None
    seen.append([exporter, disk, result.returncode, result.stderr, left])
print(json.dumps(seen))
"""


def test_sample_images_writes_whole_pngs_and_refuses_bad_folders_in_one_line(tmp_path):
  result = helpers.call("strategies.sample_images", "--dataset=synthetic", "--count=2",
                        str(tmp_path))
  assert result.returncode == 0, result.stderr[-2000:]
  assert sorted(os.listdir(tmp_path)) == ["test0.png", "test1.png"]  # no partial file left
  image, label = data_sources.load_source("synthetic", "test", seed=0).fetch(1)
  written = tf.io.decode_png(tf.io.read_file(str(tmp_path / "test1.png")))
  assert np.array_equal(written.numpy(), image.numpy())  # the example's exact pixels
  assert result.stdout.splitlines()[1].endswith(f"(label {int(label)})")
  helpers.check_one_line(helpers.call("strategies.sample_images", "--dataset=synthetic",
                                      str(tmp_path / "absent")), "absent: no such folder")
  helpers.check_one_line(helpers.call("strategies.sample_images", "--dataset=synthetic"),
                         "name one folder")
