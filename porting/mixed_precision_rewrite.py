"""TF1's mixed-precision graph rewrite: `tf.compat.v1.mixed_precision.
enable_mixed_precision_graph_rewrite(opt)` (also `tf.train.experimental.`), which a TF1 fp16
script called in place of casts. It wraps the optimizer in a dynamic loss scale
(porting.loss_scales reads it as any MixedPrecisionLossScaleOptimizer) and turns grappler's
`auto_mixed_precision` pass on for the whole process: for every Session made after it (a
global flag the Session reads: tensorflow/python/client/session.py) and for every TF2 function
(`tf.config.optimizer.set_experimental_options`). That pass rewrites a graph to float16 on
GPUs only (with no GPU it skips itself: measured here, the float16 dense port of
tests/fp16_port.py is EQUAL under it).

The kit runs the team's TF1 code and must not let it change what runs after: its TF2 side
(the port, which runs as its own code says) and any later comparison in the process. kept()
puts both settings back once the TF1 Session holds its own.

  kept()              the process's rewrite settings as they were, around the TF1 side's build
  applied(session)    whether that Session runs the rewrite
  said(on, devices)   the TF1 side's precision fact and note under it
"""

import contextlib

import tensorflow as tf

try:  # TensorFlow 2 and 1.15 both keep the flag here
  from tensorflow.python.training.experimental import mixed_precision_global_state as _state
except ImportError:  # pragma: no cover - a TensorFlow without the rewrite
  _state = None

ON = 1  # RewriterConfig.ON


@contextlib.contextmanager
def kept():
  """Runs the block (the TF1 side's graph and Session), then sets the process's grappler
  options and TensorFlow's rewrite flag back to what they were before it."""
  options = tf.config.optimizer.get_experimental_options()
  flag = _flag()
  try:
    yield
  finally:
    now = tf.config.optimizer.get_experimental_options()
    if now != options:
      # A pass the block set that was not set before goes back to grappler's default (None).
      tf.config.optimizer.set_experimental_options(
          {**{k: None for k in now if k not in options}, **options})
    if flag is not None:
      _set_flag(flag)


def _flag():
  """TensorFlow's global rewrite flag, or None: 2.x reads it through a function, 1.15 keeps
  it as the module's attribute."""
  if _state is None:
    return None
  if hasattr(_state, "is_mixed_precision_graph_rewrite_enabled"):
    return _state.is_mixed_precision_graph_rewrite_enabled()
  return getattr(_state, "mixed_precision_graph_rewrite_is_enabled", None)


def _set_flag(flag):
  if hasattr(_state, "set_mixed_precision_graph_rewrite_enabled"):
    _state.set_mixed_precision_graph_rewrite_enabled(flag)
  else:
    _state.mixed_precision_graph_rewrite_is_enabled = flag


def applied(session):
  """Whether `session` (a tf.compat.v1.Session) runs grappler's auto_mixed_precision."""
  config = getattr(session, "_config", None)
  return bool(config is not None and
              config.graph_options.rewrite_options.auto_mixed_precision == ON)


def said(on, devices):
  """(precision or None, the report's note or None) of a TF1 Session with the rewrite `on`,
  its towers on `devices`: float16 on GPUs; on CPUs the pass does nothing."""
  if not on:
    return None, None
  if any(d.lower().startswith("/gpu") for d in devices):
    return "float16", ("TF1's mixed-precision graph rewrite is on (enable_mixed_precision_"
                       "graph_rewrite): grappler computes its GPU towers in float16 where "
                       "its lists allow, which the graph as built does not show")
  return None, ("TF1's mixed-precision graph rewrite is on (enable_mixed_precision_graph_"
                "rewrite), and does nothing here: grappler's auto_mixed_precision rewrites "
                "on GPUs only, and these towers run on CPUs; the port is compared with the "
                "graph as built")
