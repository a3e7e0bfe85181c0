"""The kit's one error: a port it cannot compare or convert, said in one line; and the line
for an exception the port's own code (or the kit) raised."""

import os
import re
import traceback

from tfbits.errors import OneLineError


class PortError(OneLineError):
  """The message names what is wrong and, where there is one, the way out (the command lines
  print it as one line and exit 2)."""


# TensorFlow 1.15's Python lives in tensorflow_core.
_LIBRARIES = tuple(os.sep + p + os.sep for p in ("tensorflow", "tensorflow_core", "keras",
                                                    "tf_keras", "absl"))
_KIT = os.path.dirname(os.path.abspath(__file__)) + os.sep  # this package's folder


# Lines that wrap a message rather than say it: TensorFlow's graph errors and Keras 3's layer
# call errors put the op's or the layer's own words after them.
_WRAPPERS = ("Graph execution error", "Detected at node", "File \"",
             "Exception encountered when calling", "Arguments received by", "\u2022")


def one_line(error, did=None):
  """One line for an exception the port's own code raised: what, and the innermost line of
  the team's code (outside TensorFlow, Keras and this kit). Inside a tf.function, autograph
  puts the original frames into the message ('in user code: File "...", line N ...')."""
  text = re.sub(r"\x1b\[[0-9;]*m", "", str(error))  # Keras 3 prints its message in bold
  frames = [(f.filename, f.lineno) for f in traceback.extract_tb(error.__traceback__)]
  frames += [(f, int(n)) for f, n in re.findall(r'File "([^"]+)", line (\d+)', text)]
  outside = [(f, n) for f, n in frames
             if not any(p in f for p in _LIBRARIES) and "__autograph_generated" not in f]
  ours = [(f, n) for f, n in outside if not os.path.abspath(f).startswith(_KIT)]
  at = f" at {ours[-1][0]}:{ours[-1][1]}" if ours else ""
  lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
  # The line that says what: autograph's wrapper ends with the original "XError: ..." (its
  # last such line); a message of several lines (Keras's, a bullet list after it) begins
  # with it.
  typed = [line for line in lines if re.match(r"\w+(Error|Exception): ", line)]
  said = [line for line in lines if not line.startswith(_WRAPPERS)]
  if text.startswith("Graph execution error"):  # the op's own words follow its node's frames
    said = [line for line in said if not line.startswith("[[")][-1:]
  message = (typed[-1] if typed else lines[-1] if "in user code:" in text else
             said[0] if said else lines[0] if lines else "")[:300]
  # Keras's deserialization wraps the reason: "... could not be deserialized properly. ...
  # Exception encountered: Could not locate class 'TF1GRUCell'. Make sure ..."
  inner = [line.split("Exception encountered: ", 1)[1] for line in lines
           if "Exception encountered: " in line]
  if inner and not typed:
    message = inner[-1].split(" Full object config:", 1)[0][:300]
  name = type(error).__name__
  if did is not None:
    return f"the port {did}{at}"
  if message.startswith(name + ": ") or re.match(r"\w+Error: ", message):
    name, message = message.split(": ", 1)
  if outside and outside[-1] not in ours:  # raised in the kit's own code, not the team's
    kit_file, line = outside[-1]
    import tensorflow as tf  # pylint: disable=g-import-not-at-top  # imported by now
    return (f"the kit failed: {name} at {os.path.relpath(kit_file, os.path.dirname(_KIT[:-1]))}:"
            f"{line}: {message} (a fault of porting on TensorFlow {tf.__version__}, not of "
            "the port)")
  return f"the port raised {name}{at}: {message}"


def keras_for(module):
  """Keras 3, for a kit module that holds TF2-side layers or optimizers (`module`: its name);
  where it is not installed (TensorFlow 1.15, where the recorder runs), a PortError that says
  to import that module where the TF2 side is built, which the recorder never calls."""
  try:
    import keras  # pylint: disable=g-import-not-at-top
  except ImportError:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    raise PortError(
        f"{module} holds Keras 3 code for the TF2 side, and this Python (TensorFlow "
        f"{tf.__version__}) has no Keras 3: import it inside build_model or tf2_optimizer "
        "(the recorder never calls them), not where the port's module or Port is made"
    ) from None
  return keras

