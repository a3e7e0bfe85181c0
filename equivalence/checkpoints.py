r"""Two checkpoints of any origin, tensor by tensor: weights, moving averages, global step,
and the loss averages (for summaries) where both hold them.

  python -m equivalence.checkpoints /tmp/cifar10_train/ckpt-400 \
      /tmp/cifar10_train_v1/model.ckpt-400

Either may be a folder (its newest checkpoint) or a prefix, written by strategies.train,
compat_v1.train, examples.keras_fit or the original tutorial (cifar10.checkpoints reads all
of them). Prints the table of equivalence.compare and EQUIVALENT (exit 0) when every tensor
is bit-identical, NOT EQUIVALENT (exit 1) otherwise. Checkpoints written before the loss
averages were checkpointed (and the original's, and examples.keras_fit's) hold none: a line
says they were not compared.
"""

from absl import flags

from cifar10.errors import UsageError
from harness.command_line import cli
from harness.command_line import flag_ranges


def define_flags(fv):
  flag_ranges.number("rel_tolerance", 0.0, "Largest max |diff| / max |value| per tensor that "
                     "still counts as equal (0: bit-identical).", flag_values=fv,
                     bounds=(0.0, 1.0, False))


def main(values, args):
  if len(args) != 2:
    raise UsageError("give two checkpoints (prefixes or folders) to compare")
  cli.check_paths(("checkpoint", path) for path in args)
  from cifar10 import checkpoints  # pylint: disable=g-import-not-at-top  # imports TensorFlow
  from equivalence import compare  # pylint: disable=g-import-not-at-top
  first, second = (checkpoints.read(path) for path in args)
  tables, same = [], first.global_step == second.global_step
  parts = [("weights", first.weights, second.weights),
           ("moving averages", first.averages, second.averages)]
  if first.loss_averages and second.loss_averages:
    parts.append(("loss averages", first.loss_averages, second.loss_averages))
  for title, a, b in parts:
    rows = compare.compare(a, b, values.rel_tolerance)
    same = same and all(r.ok for r in rows)
    tables.append(compare.table(title, rows, values.rel_tolerance))
  if bool(first.loss_averages) != bool(second.loss_averages):
    held = "the first" if first.loss_averages else "the second"
    tables.append(f"loss averages: only {held} holds them, not compared")
  print("\n".join(tables))
  print(f"global step: {first.global_step} and {second.global_step}")
  print("EQUIVALENT" if same else "NOT EQUIVALENT")
  if not same:
    raise cli.Exit(1)


def run():
  """The console script (pyproject.toml), as `python -m equivalence.checkpoints`."""
  cli.app_run(flags.FLAGS, define_flags, main, takes_args=True)


if __name__ == "__main__":
  run()
