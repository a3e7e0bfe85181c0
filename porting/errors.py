"""The kit's one error: a port it cannot compare or convert, said in one line."""


class PortError(Exception):
  """The message names what is wrong and, where there is one, the way out (the command lines
  print it as one line and exit 2)."""
