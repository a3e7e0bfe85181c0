"""Flags that cannot work are refused in one line before TensorFlow starts and before a run
folder is made: a --train_dir that is a file, --jit_compile under central_storage."""

import pytest

from tests import helpers


@pytest.mark.parametrize("trainer", ["strategies.train", "compat_v1.train"])
def test_a_train_dir_that_is_a_file_is_named_as_such(trainer, tmp_path):
  """Before: `cannot use --train_dir=...: File exists` (the OS's EEXIST, read as the opposite
  problem), after TensorFlow had started (a minute under load)."""
  path = tmp_path / "notes.txt"
  path.write_text("mine\n")
  result = helpers.run(trainer, "--dataset=synthetic", f"--train_dir={path}", timeout=60)
  line = helpers.check_one_line(result, f"--train_dir={path} is a file, not a folder")
  assert "File exists" not in line
  assert "tensorflow" not in result.stderr.lower()  # refused as the flags were read
  assert path.read_text() == "mine\n"


def test_jit_compile_under_central_storage_is_refused_before_a_folder_is_made(tmp_path):
  """Before: a ~90-line traceback (XLA cannot reach a variable kept on /cpu:0 from replica 1's
  device), exit 1, and run_config.json, flags.txt and events in a new run folder."""
  folder = tmp_path / "run"
  result = helpers.run("strategies.train", "--strategy=central_storage", "--jit_compile",
                       "--num_gpus=2", "--dataset=synthetic", f"--train_dir={folder}",
                       timeout=60)
  helpers.check_one_line(
      result, "--jit_compile applies to mirrored, one_device and multi_worker_mirrored")
  assert not folder.exists()
