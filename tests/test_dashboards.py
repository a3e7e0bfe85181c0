"""What TensorBoard shows of the two trainers and evaluators, read with TensorBoard's own
reader: the same tags for training and evaluation, so that `tensorboard --logdir` over a TF2
and a v1 run overlays them, and each run's settings in the Text and HParams tabs."""

import glob

import pytest
import tensorflow as tf
from tensorboard.backend.event_processing import plugin_event_accumulator
from tensorboard.plugins.hparams import metadata as hparams_metadata
from tensorboard.util import tensor_util

from cifar10 import checkpoints
from cifar10 import data_sources
from cifar10 import input_pipeline
from cifar10 import losses
from cifar10 import model
from cifar10 import scores
from harness.control import run_summaries
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


def _graph_bytes(folder):
  """Size of the serialized graph(s) in `folder`'s events."""
  size = 0
  for path in glob.glob(f"{folder}/events.out.tfevents.*"):
    for event in tf.compat.v1.train.summary_iterator(path):
      size += len(event.graph_def)
  return size


@pytest.mark.slow
def test_training_and_evaluation_of_both_trainers_overlay_under_shared_tags(tmp_path):
  """Both trainers' runs and both evaluators' write `loss` and `Precision @ 1`, so that
  TensorBoard draws training and evaluation (and TF2 and v1) on one chart each, as Keras's
  train/ and validation/ runs. Before: the v1 evaluator wrote `Precision___1`
  (tf.compat.v1.summary.scalar rewrites the name); training had no precision and evaluation
  no loss; the v1 events carried the initial weights as graph constants (9.2 MB)."""
  flags = ["--num_gpus=2", "--dataset=synthetic", "--batch_size=4", "--max_steps=2",
           "--save_summaries_steps=1", "--seed=5"]
  runs = {}
  for trainer in ("strategies.train", "compat_v1.train"):
    runs[trainer] = tmp_path / trainer
    result = helpers.call(trainer, *flags, f"--train_dir={runs[trainer]}")
    assert result.returncode == 0, result.stderr[-2000:]
  trained = {t: _scalars(d) for t, d in runs.items()}
  shared = {scores.LOSS_TAG, scores.PRECISION_TAG}
  for tag in shared:  # the same points, to the bit: steps 0 and 1
    assert trained["strategies.train"][tag] == trained["compat_v1.train"][tag], tag
    assert [s for s, _ in trained["strategies.train"][tag]] == [0, 1]
  # The global batch is 8: a precision is a whole number of eighths.
  assert all((8 * p).is_integer() for _, p in trained["strategies.train"][scores.PRECISION_TAG])
  scored = {}
  for evaluator in ("strategies.eval", "compat_v1.eval"):
    eval_dir = tmp_path / evaluator / "eval"
    result = helpers.call(evaluator, "--dataset=synthetic", "--run_once", "--num_examples=64",
                          "--seed=5", f"--checkpoint_dir={runs['strategies.train']}",
                          f"--eval_dir={eval_dir}")
    assert result.returncode == 0, result.stderr[-2000:]
    scored[evaluator] = _scalars(eval_dir)
    assert _graph_bytes(eval_dir) < 100_000, evaluator  # before: 8.6 MB for the v1 one
  assert scored["strategies.eval"].keys() == shared == scored["compat_v1.eval"].keys()
  # The same checkpoint, the same examples: the same points on the chart.
  assert scored["strategies.eval"] == scored["compat_v1.eval"]
  (step, precision), = scored["strategies.eval"][scores.PRECISION_TAG]
  (_, loss), = scored["strategies.eval"][scores.LOSS_TAG]
  assert step == 2 and (64 * precision) == pytest.approx(round(64 * precision), abs=1e-4)
  # The loss is the training loss's quantity over the split: mean cross-entropy of the moving
  # averages' logits + their weight decay (another summation order here: float32 rounding).
  averages = checkpoints.read(str(runs["strategies.train"])).averages
  source = data_sources.load_source("synthetic", "test", seed=5)
  images, labels = next(iter(input_pipeline.eval_dataset(source, batch_size=64,
                                                         num_examples=64)))
  logits = model.inference(averages, images)
  expected = (float(tf.reduce_mean(losses.cross_entropy(logits, labels)))
              + sum(s.wd * float(tf.nn.l2_loss(averages[s.name])) for s in model.SPECS if s.wd))
  assert loss == pytest.approx(expected, rel=1e-5)
  # The v1 graph holds no initial values (fed to the initializer): before, 9.2 MB.
  assert _graph_bytes(runs["compat_v1.train"]) < 1_000_000


@pytest.mark.slow
def test_a_stopped_and_resumed_run_charts_as_the_uninterrupted_one(tmp_path):
  """Before: the first leg's last step (1 of --max_steps=2) wrote summaries the uninterrupted
  run had not (its points 0, 2, 3 against 0, 1, 2, 3), and TensorBoard's smoothing parted the
  curves from there (README's run: 0.9689 against 0.9464 at step 399)."""
  flags = ["--dataset=synthetic", "--batch_size=4", "--save_summaries_steps=2", "--seed=5"]
  for train_dir, legs in (("whole", [4]), ("resumed", [2, 4])):
    for max_steps in legs:
      result = helpers.call("strategies.train", *flags, f"--max_steps={max_steps}",
                            f"--train_dir={tmp_path / train_dir}")
      assert result.returncode == 0, result.stderr[-2000:]
  whole, resumed = _scalars(tmp_path / "whole"), _scalars(tmp_path / "resumed")
  assert [s for s, _ in whole[scores.LOSS_TAG]] == [0, 2]
  for tag in (scores.LOSS_TAG, scores.PRECISION_TAG, "learning_rate"):
    assert sorted(resumed[tag]) == sorted(whole[tag]), tag


@pytest.mark.parametrize("trainer", ["strategies.train", "compat_v1.train"])
@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_the_runs_settings_and_graph_are_on_the_dashboard(trainer, tmp_path):
  """Before: TensorBoard's Text and HParams tabs said "No data" (the settings were only in
  run_config.json and flags.txt), and a TF2 run had no graph: "No graph definition files
  were found" (the v1 trainer's FileWriter writes its Session's)."""
  result = helpers.call(trainer, "--dataset=synthetic", "--batch_size=2", "--max_steps=1",
                        "--seed=7", f"--train_dir={tmp_path}")
  assert result.returncode == 0, result.stderr[-2000:]
  plugins, texts, graphs, trials = {}, [], 0, []
  for path in glob.glob(f"{tmp_path}/events.out.tfevents.*"):
    reader = plugin_event_accumulator.EventAccumulator(path)
    reader.Reload()
    graphs += reader.Tags()["graph"]
    for tag in reader.Tags()["tensors"]:
      plugins[tag] = reader.SummaryMetadata(tag).plugin_data.plugin_name
      if tag == run_summaries.SETTINGS_TAG:
        texts += [tensor_util.make_ndarray(e.tensor_proto).item().decode()
                  for e in reader.Tensors(tag)]
      if tag == run_summaries.HPARAMS_TAG:
        info = hparams_metadata.parse_session_start_info_plugin_data(
            reader.SummaryMetadata(tag).plugin_data.content)
        trials.append(info.group_name)
        shown_trainer = info.hparams["trainer"].string_value
        shown_decay = info.hparams["decay_steps"].number_value
  assert plugins[run_summaries.SETTINGS_TAG] == "text"
  assert plugins[run_summaries.HPARAMS_TAG] == "hparams"
  assert len(texts) == 1 and '"seed": 7' in texts[0] and "--seed=7" in texts[0]
  # A row of its own in the HParams tab: before, the trial was named by a hash of the
  # settings, and a TF2 and a v1 run of the same flags shared one row.
  # Named short, its folder's name (a whole absolute path was cut in the tab's column), with
  # 4 hex digits of the path so that two folders of one name stay two rows.
  assert trials == [run_summaries.trial_name(str(tmp_path))]
  assert trials[0].startswith(f"{tmp_path.name} (") and len(trials[0]) == len(tmp_path.name) + 7
  assert run_summaries.trial_name("/a/run") != run_summaries.trial_name("/b/run")
  # decay_steps as the run used it (the record keeps 0, "derived"; the tab read 0.0000):
  # 50,000 examples / batch 2 x 350 epochs.
  assert shown_decay == 50000 / 2 * 350
  # A column that says which trainer each row is (before: the rows of a TF2 and a v1 run
  # showed the same truncated path and nothing else to tell them apart).
  assert shown_trainer == trainer
  if trainer == "strategies.train":  # the step's function graph, once, from the first call
    assert plugins["train_step"] == "graph_run_metadata_graph"
  else:  # its Session's graph
    assert graphs == 1


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_a_runs_graph_is_its_own_step_after_another_run_in_the_process(tmp_path):
  """TensorBoard's Graphs tab of a run that shares its process (a notebook, cli.call,
  equivalence.runs). TensorFlow's trace_off leaves graph collection on, and the eager context
  hands a trace export all it collected since the last one: before, a one-device run after a
  MirroredStrategy run wrote 52-76 function graphs as its step's, the other run's step (its
  replica_1 nodes) among them, and every later function's graph was kept for the process's
  life."""
  from tensorflow.core.protobuf import config_pb2  # pylint: disable=g-import-not-at-top
  from tensorflow.python.eager import context  # pylint: disable=g-import-not-at-top
  # A collection left on, as trace_off leaves it: what it holds is not the run's graph. Off
  # again whatever happens: the worker's later tests run without it.
  context.context().enable_graph_collection()
  try:
    tf.function(lambda x: x + 1)(tf.constant(1.0))
    flags = ["--dataset=synthetic", "--batch_size=2", "--max_steps=2", "--seed=7"]
    for name, gpus in (("mirrored", 2), ("one", 1)):
      result = helpers.call("strategies.train", *flags, f"--num_gpus={gpus}",
                            f"--train_dir={tmp_path / name}")
      assert result.returncode == 0, result.stderr[-2000:]
      # After the run the process collects nothing: a function instantiated now is not kept.
      tf.function(lambda x: x * 3)(tf.constant(float(gpus)))
      assert not context.context().export_run_metadata().function_graphs
  finally:
    context.context().disable_graph_collection()
    context.context().export_run_metadata()
  for name, replicas in (("mirrored", 2), ("one", 1)):
    exported = [config_pb2.RunMetadata.FromString(tf.make_ndarray(v.tensor).item())
                for path in glob.glob(f"{tmp_path / name}/events.out.tfevents.*")
                for event in tf.compat.v1.train.summary_iterator(path)
                for v in event.summary.value if v.tag == "train_step"]
    assert len(exported) == 1 and len(exported[0].function_graphs) == 1, name
    nodes = [n.name for n in exported[0].function_graphs[0].pre_optimization_graph.node]
    assert any("replica_1" in n for n in nodes) == (replicas == 2), name
