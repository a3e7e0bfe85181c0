r"""Exports a checkpoint as a SavedModel, the TF2 way (tf.Module, tf.saved_model.save).

  python -m strategies.export --checkpoint_dir=/tmp/cifar10_train \
      --export_dir=/tmp/cifar10_model

A checkpoint of either trainer or of the original tutorial; its moving averages
(what the evaluators score), or --weights=raw. Written in TensorFlow Serving's
layout, <export_dir>/<version>/ (the checkpoint's global step unless --version),
whole or not at all. Signatures: serving_default (uint8 images [batch, 32, 32,
3]) and classify_encoded (PNG or JPEG bytes), each returning logits,
probabilities, classes and class_names (docs/serving.md).
"""

from absl import flags

from harness.command_line import cli
from harness.command_line import export_options


def define_flags(fv):
  export_options.define_export_flags(fv)


def main(values):
  config = export_options.export_config(values)
  from harness.folders import export_folder  # pylint: disable=g-import-not-at-top
  from strategies import saved_model  # pylint: disable=g-import-not-at-top
  export_folder.export(config, saved_model.save)


def run():
  """The console script (pyproject.toml), as `python -m strategies.export`."""
  cli.app_run(flags.FLAGS, define_flags, main)


if __name__ == "__main__":
  run()
