"""The kit's one error: a port it cannot compare or convert, said in one line."""

from tfbits.errors import OneLineError


class PortError(OneLineError):
  """The message names what is wrong and, where there is one, the way out (the command lines
  print it as one line and exit 2)."""
