"""What TensorBoard shows of the two trainers and evaluators, read with TensorBoard's own
reader: the same precision tag, so that `tensorboard --logdir` over a TF2 and a v1 run
overlays them, and each run's settings in the Text and HParams tabs."""

import glob

import pytest
from tensorboard.backend.event_processing import plugin_event_accumulator
from tensorboard.util import tensor_util

from cifar10 import summaries
from harness import run_summaries
from tests import helpers


def _scalars(folder):
  """{tag: [(step, value)]} of the scalar-plugin data in `folder`, as TensorBoard reads it
  (a v1 simple_value and a TF2 tf.summary.scalar become the same kind of tensor)."""
  found = {}
  for path in glob.glob(f"{folder}/events.out.tfevents.*"):
    reader = plugin_event_accumulator.EventAccumulator(path)
    reader.Reload()
    for tag in reader.Tags()["tensors"]:
      if reader.SummaryMetadata(tag).plugin_data.plugin_name == "scalars":
        found.setdefault(tag, []).extend(
            (e.step, tensor_util.make_ndarray(e.tensor_proto).item())
            for e in reader.Tensors(tag))
  return found


def test_both_evaluators_write_the_originals_precision_tag(tmp_path):
  """Before: the v1 evaluator wrote `Precision___1` (tf.compat.v1.summary.scalar rewrites
  the name), the TF2 one `Precision @ 1`: the two charts never overlaid."""
  train_dir = tmp_path / "run"
  assert helpers.call("strategies.train", "--dataset=synthetic", "--batch_size=2",
                      "--max_steps=1", f"--train_dir={train_dir}").returncode == 0
  scored = {}
  for evaluator in ("strategies.eval", "compat_v1.eval"):
    eval_dir = tmp_path / evaluator
    result = helpers.call(evaluator, "--dataset=synthetic", "--run_once", "--num_examples=64",
                          f"--checkpoint_dir={train_dir}", f"--eval_dir={eval_dir}")
    assert result.returncode == 0, result.stderr[-2000:]
    scored[evaluator] = _scalars(eval_dir)
  assert scored["strategies.eval"].keys() == {summaries.PRECISION_TAG} == \
      scored["compat_v1.eval"].keys()
  # The same checkpoint, the same examples: the same point on the chart.
  assert scored["strategies.eval"] == scored["compat_v1.eval"]
  assert scored["strategies.eval"][summaries.PRECISION_TAG][0][0] == 1


@pytest.mark.parametrize("trainer", ["strategies.train", "compat_v1.train"])
def test_the_runs_settings_and_graph_are_on_the_dashboard(trainer, tmp_path):
  """Before: TensorBoard's Text and HParams tabs said "No data" (the settings were only in
  run_config.json and flags.txt), and a TF2 run had no graph: "No graph definition files
  were found" (the v1 trainer's FileWriter writes its Session's)."""
  result = helpers.call(trainer, "--dataset=synthetic", "--batch_size=2", "--max_steps=1",
                        "--seed=7", f"--train_dir={tmp_path}")
  assert result.returncode == 0, result.stderr[-2000:]
  plugins, texts, graphs = {}, [], 0
  for path in glob.glob(f"{tmp_path}/events.out.tfevents.*"):
    reader = plugin_event_accumulator.EventAccumulator(path)
    reader.Reload()
    graphs += reader.Tags()["graph"]
    for tag in reader.Tags()["tensors"]:
      plugins[tag] = reader.SummaryMetadata(tag).plugin_data.plugin_name
      if tag == run_summaries.SETTINGS_TAG:
        texts += [tensor_util.make_ndarray(e.tensor_proto).item().decode()
                  for e in reader.Tensors(tag)]
  assert plugins[run_summaries.SETTINGS_TAG] == "text"
  assert plugins[run_summaries.HPARAMS_TAG] == "hparams"
  assert len(texts) == 1 and '"seed": 7' in texts[0] and "--seed=7" in texts[0]
  if trainer == "strategies.train":  # the step's function graph, once, from the first call
    assert plugins["train_step"] == "graph_run_metadata_graph"
  else:  # its Session's graph
    assert graphs == 1
