r"""Exports a checkpoint as a SavedModel the TF1 way: a graph, a Session, Builder.

  python -m compat_v1.export --checkpoint_dir=/tmp/cifar10_train_v1 \
      --export_dir=/tmp/cifar10_model_v1

What a TF1 team's SavedModelBuilder / simple_save code wrote, with the flags and
the folder of strategies.export: the same two signatures, whose outputs equal
the TF2 export's to the bit (docs/serving.md).
"""

from absl import flags

from harness.command_line import cli
from harness.command_line import export_options


def define_flags(fv):
  export_options.define_export_flags(fv)


def main(values):
  config = export_options.export_config(values)
  from harness.folders import export_folder  # pylint: disable=g-import-not-at-top
  from compat_v1 import saved_model  # pylint: disable=g-import-not-at-top
  export_folder.export(config, saved_model.save)


def run():
  """The console script (pyproject.toml), as `python -m compat_v1.export`."""
  cli.app_run(flags.FLAGS, define_flags, main)


if __name__ == "__main__":
  run()
