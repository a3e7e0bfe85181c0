"""The model taken out of the project: both exporters' SavedModels (TF2: tf.Module and
tf.saved_model.save; TF1: a Session and saved_model.Builder), from a checkpoint of either
trainer or of the original tutorial, give the evaluators' logits to the bit, and the same
outputs as each other; they load where only TensorFlow is; TFLite converts them."""

import json
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from cifar10 import checkpoints
from cifar10 import data_sources
from cifar10 import input_pipeline
from cifar10 import model
from cifar10 import schedule
from cifar10 import serving
from tests import forked
from tests import helpers
from tests import tf1_reference

SEED = 4
pytestmark = pytest.mark.slow  # trainers, exporters and a TFLite conversion in-process
EXPORTERS = ("strategies.export", "compat_v1.export")
BATCH = 128  # the evaluators' batch


@pytest.fixture(name="runs", scope="module")
def fixture_runs(tmp_path_factory):
  """Checkpoints of strategies.train (step 2), compat_v1.train (step 2) and the original
  tutorial (its model.ckpt-1: two steps), and each one's export by both exporters."""
  root = tmp_path_factory.mktemp("export")
  flags = ["--dataset=synthetic", "--batch_size=8", "--max_steps=2", f"--seed={SEED}"]
  for trainer in ("strategies.train", "compat_v1.train"):
    result = helpers.call(trainer, *flags, f"--train_dir={root / trainer}")
    assert result.returncode == 0, result.stderr[-2000:]
  tf1_reference.train(1, SEED, 2, 8, schedule.decay_steps(8), "updated",
                      save_path=str(root / "original" / "model.ckpt"))
  exports = {}
  for origin in ("strategies.train", "compat_v1.train", "original"):
    for exporter in EXPORTERS:
      out = root / "models" / origin / exporter
      result = helpers.call(exporter, f"--checkpoint_dir={root / origin}",
                            f"--export_dir={out}")
      assert result.returncode == 0, result.stderr[-2000:]
      assert result.stdout == f"{out / '2'}\n"  # the global step names the version
      exports[(origin, exporter)] = str(out / "2")
  return root, exports


def _test_images(n=BATCH):
  source = data_sources.load_source("synthetic", "test", seed=SEED)
  return tf.stack([source.fetch(i)[0] for i in range(n)])


def _evaluators_logits(weights):
  """The logits strategies.eval computes for the first BATCH test examples."""
  params = {n: tf.Variable(v) for n, v in weights.items()}
  source = data_sources.load_source("synthetic", "test", seed=SEED)
  images, _ = next(iter(input_pipeline.eval_dataset(source, batch_size=BATCH)))
  return tf.function(lambda x: model.inference(params, x), autograph=False)(images).numpy()


@pytest.mark.parametrize("origin", ["strategies.train", "compat_v1.train", "original"])
def test_both_exports_give_the_evaluators_logits_to_the_bit(runs, origin):
  root, exports = runs
  images = _test_images()
  expected = _evaluators_logits(checkpoints.read(str(root / origin)).averages)
  outputs = {}
  for exporter in EXPORTERS:
    signature = tf.saved_model.load(exports[(origin, exporter)]).signatures["serving_default"]
    outputs[exporter] = {k: v.numpy() for k, v in signature(images=images).items()}
  tf2, v1 = outputs["strategies.export"], outputs["compat_v1.export"]
  assert set(tf2) == set(serving.OUTPUTS) == set(v1)
  for name in serving.OUTPUTS:
    np.testing.assert_array_equal(tf2[name], v1[name], err_msg=name)
  np.testing.assert_array_equal(tf2["logits"], expected)
  np.testing.assert_array_equal(tf2["classes"], np.argmax(expected, axis=1))
  assert [n.decode() for n in tf2["class_names"]] == [serving.CLASS_NAMES[c]
                                                      for c in tf2["classes"]]
  np.testing.assert_allclose(tf2["probabilities"].sum(axis=1), 1.0, rtol=1e-6)


def test_any_batch_size_and_encoded_images(runs):
  _, exports = runs
  loaded = tf.saved_model.load(exports[("strategies.train", "compat_v1.export")])
  images = _test_images(5)
  for n in (1, 5):
    out = loaded.signatures["serving_default"](images=images[:n])
    assert out["logits"].shape == (n, 10) and out["class_names"].shape == (n,)
  whole = loaded.signatures["serving_default"](images=images)["logits"].numpy()
  # PNG of a 32 x 32 image: decoded as it was, the same logits; a JPEG of another size is
  # resized (docs/serving.md) and still classified.
  png = [tf.io.encode_png(image) for image in images]
  big = tf.io.encode_jpeg(tf.cast(tf.image.resize(images[0][None], [96, 120])[0], tf.uint8))
  out = loaded.signatures["classify_encoded"](image_bytes=tf.stack(png + [big]))
  np.testing.assert_array_equal(out["logits"].numpy()[:5], whole)
  assert out["logits"].shape == (6, 10)


def test_raw_weights_on_request(runs, tmp_path):
  root, _ = runs
  for exporter in EXPORTERS:
    result = helpers.call(exporter, f"--checkpoint_dir={root / 'strategies.train'}",
                          f"--export_dir={tmp_path / exporter}", "--weights=raw",
                          "--version=7")
    assert result.returncode == 0, result.stderr[-2000:]
  state = checkpoints.read(str(root / "strategies.train"))
  expected = _evaluators_logits(state.weights)  # what the raw weights compute
  images = _test_images()
  for exporter in EXPORTERS:
    signature = tf.saved_model.load(str(tmp_path / exporter / "7")).signatures[
        "serving_default"]
    np.testing.assert_array_equal(signature(images=images)["logits"].numpy(), expected)
  assert not np.array_equal(expected, _evaluators_logits(state.averages))


def _signatures(text):
  """{signature: {("input"|"output", key): (dtype, shape)}} of `saved_model_cli show --all`."""
  found, current, kind, key = {}, None, None, None
  for line in text.splitlines():
    line = line.strip()
    if line.startswith("signature_def['"):
      current = found.setdefault(line.split("'")[1], {})
    elif line.startswith(("inputs['", "outputs['")):
      kind, key = line.split("[")[0][:-1], line.split("'")[1]
    elif line.startswith("dtype: ") and current is not None:
      dtype = line.split(": ")[1]
    elif line.startswith("shape: ") and current is not None and key:
      current[(kind, key)] = (dtype, line.split(": ")[1])
      key = None
  return found


def _documented():
  """The signatures' table in docs/serving.md, in _signatures' form."""
  with open(os.path.join(helpers.REPO, "docs", "serving.md"), encoding="utf-8") as f:
    rows = [[c.strip(" `") for c in line.split("|")[1:-1]] for line in f
            if line.startswith("| `")]
  inputs = {r[0]: (r[1], r[2], r[3]) for r in rows if len(r) == 4 and r[2].startswith("DT_")}
  outputs = {r[0]: (r[1], r[2]) for r in rows if len(r) == 4 and r[1].startswith("DT_")}
  return {name: {("input", key): (dtype, shape), **{("output", k): v for k, v in
                                                      outputs.items()}}
          for name, (key, dtype, shape) in inputs.items()}


def test_the_exports_load_where_only_tensorflow_is_and_show_as_documented(runs):
  _, exports = runs
  # Both exports in one process: what it imports after loading them is checked, then
  # `saved_model_cli show --dir EXPORT --all` as documented, for each, in the same process:
  # the installed command is TensorFlow's saved_model_cli.main under that argv (two
  # processes of `import tensorflow` less).
  code = ("import contextlib, io, json, sys, tensorflow as tf\n"
          "for path in sys.argv[1:3]:\n"
          "  m = tf.saved_model.load(path)\n"
          "  out = m.signatures['serving_default'](images=tf.zeros([3, 32, 32, 3], tf.uint8))\n"
          "  print(sorted(out), out['logits'].shape)\n"
          "print(sorted({n.split('.')[0] for n in sys.modules} & set(sys.argv[3:])))\n"
          "from tensorflow.python.tools import saved_model_cli\n"
          "shown = []\n"
          "for path in sys.argv[1:3]:\n"
          "  sys.argv = ['saved_model_cli', 'show', '--dir', path, '--all']\n"
          "  printed = io.StringIO()\n"
          "  with contextlib.redirect_stdout(printed):\n"
          "    try:\n"
          "      status = saved_model_cli.main()\n"
          "    except SystemExit as exit:\n"
          "      status = exit.code\n"
          "  shown.append([status, printed.getvalue()])\n"
          "print(json.dumps(shown))\n")
  ours = ["cifar10", "harness", "strategies", "compat_v1", "porting", "equivalence", "tests"]
  documented = _documented()
  assert set(documented) == {"serving_default", "classify_encoded"}
  paths = [exports[("strategies.train", exporter)] for exporter in EXPORTERS]
  assert len(paths) == 2
  result = forked.run([sys.executable, "-c", code, *paths, *ours], capture_output=True,
                      text=True, env=helpers.env(), cwd="/", timeout=240)
  assert result.returncode == 0, result.stderr[-2000:]
  loaded, shown = result.stdout.rsplit("\n", 2)[:2]
  assert loaded + "\n" == f"{sorted(serving.OUTPUTS)} (3, 10)\n" * 2 + "[]\n"
  for exporter, (status, printed) in zip(EXPORTERS, json.loads(shown)):
    assert status in (None, 0), (exporter, status)
    listed = {k: v for k, v in _signatures(printed).items() if not k.startswith("__")}
    assert listed == documented, exporter
    assert printed.count("Method name is: tensorflow/serving/predict") == 2


@pytest.mark.filterwarnings("ignore:.*tf.lite.Interpreter is deprecated:UserWarning")
def test_tflite_converts_serving_default_within_the_stated_bound(runs):
  _, exports = runs
  images = _test_images(64).numpy()
  for exporter in EXPORTERS:
    path = exports[("strategies.train", exporter)]
    blob = tf.lite.TFLiteConverter.from_saved_model(
        path, signature_keys=["serving_default"]).convert()
    runner = tf.lite.Interpreter(model_content=blob).get_signature_runner("serving_default")
    lite = runner(images=images)
    saved = tf.saved_model.load(path).signatures["serving_default"](images=images)
    logits = saved["logits"].numpy()
    # docs/serving.md: measured 3.0e-7 of the largest logit; held to 1e-5 of it.
    assert np.abs(lite["logits"] - logits).max() <= 1e-5 * np.abs(logits).max()
    np.testing.assert_array_equal(lite["classes"], saved["classes"].numpy())
