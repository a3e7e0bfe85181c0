r"""Writes examples of a dataset as PNG files: images to try `strategies.predict` on.

  python -m strategies.sample_images --dataset=synthetic --count=1 /tmp

writes /tmp/test0.png, the first example of the test split as the trainers and evaluators
read it (32 x 32, uncropped), and says on standard output what each file holds:

  /tmp/test0.png: airplane (label 0)

--count=N writes test0.png .. test<N-1>.png; --split=train the training split's (train0.png
...). The folder may be any filesystem TensorFlow has (gs://, ram://); each file is written
under a temporary name and renamed, so a file of that name is always a whole image.
"""

from absl import flags

from cifar10.errors import UsageError
from harness.command_line import cli
from harness.command_line import flag_ranges
from harness.command_line import options
from tfbits import filesystems

SPLITS = ("test", "train")
MAX_COUNT = 10000  # the test split's size: every example of it


def define_flags(fv):
  options.define_data_flags(fv)
  flag_ranges.enum("split", "test", SPLITS, "Which split's examples to write.",
                   flag_values=fv)
  flag_ranges.integer("count", 1, "How many examples to write, from the split's first.",
                      flag_values=fv, bounds=(1, MAX_COUNT))


def main(values, folders):
  if len(folders) != 1:
    raise UsageError("name one folder to write the images in: python -m "
                     "strategies.sample_images --dataset=synthetic /tmp")
  folder = folders[0].rstrip("/") or "/"
  if filesystems.absent_locally(folder):
    raise UsageError(f"{folder}: no such folder")
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from cifar10 import data_sources  # pylint: disable=g-import-not-at-top
  from cifar10 import serving  # pylint: disable=g-import-not-at-top
  source = data_sources.load_source(values.dataset, values.split, seed=values.seed,
                                    data_dir=values.data_dir, download=values.download)
  if values.count > source.num_examples:
    raise UsageError(f"--count={values.count}: the {values.split} split of {values.dataset} "
                     f"has {source.num_examples} examples")
  for index in range(values.count):
    image, label = source.fetch(index)
    path = f"{folder}/{values.split}{index}.png"
    partial = f"{folder}/.{values.split}{index}.png.partial"
    tf.io.write_file(partial, tf.io.encode_png(image))
    tf.io.gfile.rename(partial, path, overwrite=True)
    label = int(label)
    print(f"{path}: {serving.CLASS_NAMES[label]} (label {label})", flush=True)


def run():
  cli.app_run(flags.FLAGS, define_flags, main, takes_args=True)


if __name__ == "__main__":
  run()
