"""The one kind of error every binary of this project shows as a line and exit status 2.

`OneLineError`'s message says the whole matter to a person: what is wrong and, where there
is one, the way out. cifar10's UsageError (the trainers' refusals) and porting's PortError
(the kit's) are both; the command lines (harness.command_line.cli, porting's own) print `error:
<message>` with no traceback. Pure Python: a binary refuses a bad flag before TensorFlow is
imported.
"""


class OneLineError(Exception):
  """An error shown as `error: <message>`, exit 2, no traceback."""
