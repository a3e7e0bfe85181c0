r"""Classifies image files with an exported model or a checkpoint.

  python -m strategies.predict --model=/tmp/cifar10_model cat.png dog.jpg

--model is a SavedModel (an export_dir of strategies.export or compat_v1.export:
its newest version; or one version's folder) or a checkpoint (a folder or a
prefix, of either trainer or the original: its moving averages). Each file (PNG
or JPEG, or what else tf.io.decode_image reads, of any size: resized to 32 x 32
as docs/serving.md says) gets one line on standard output, its --top_k classes
with their probabilities:

  cat.png: cat 0.912, dog 0.051, frog 0.012

A file that cannot be read or decoded is one line on standard error; the others
still get their answer, and the exit status is then 2.
"""

from absl import flags

from cifar10.errors import UsageError
from harness.command_line import cli
from harness.command_line import export_options
from tfbits import filesystems


def define_flags(fv):
  export_options.define_predict_flags(fv)


def main(values, files):
  if not (values.model and files):
    raise UsageError("name the model and the images: --model=<export_dir or checkpoint_dir> "
                     "image.png ...")
  if filesystems.absent_locally(values.model):  # before TensorFlow is imported
    raise UsageError(f"--model={values.model}: no such folder or file (an export_dir, a "
                     "version folder of one, or a checkpoint folder or prefix)")
  from strategies import classify  # pylint: disable=g-import-not-at-top
  return classify.run(values.model, files, values.top_k)


def run():
  """The console script (pyproject.toml), as `python -m strategies.predict`."""
  cli.app_run(flags.FLAGS, define_flags, main, takes_args=True)


if __name__ == "__main__":
  run()
