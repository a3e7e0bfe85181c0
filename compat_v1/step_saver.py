"""The chief's Saver in a ps/worker job: a checkpoint holds the global step it is named by.

TF1's `Saver.save(sess, prefix, global_step=tensor)` reads the step in one run, to name the
checkpoint, and saves the variables in the next. In an asynchronous job another worker's update
can land on the ps between the two: the checkpoint named `model.ckpt-7` then held global step 8
(seen in a SIGTERM stop of a 2-worker job: "stopped: SIGTERM after step 7; saved
.../model.ckpt-7", and the job resumed at 8). Here the first run copies the step into a variable
of its own, beside the global step on its ps, and the checkpoint saves that copy under the
global step's name: name, content and the stop's message agree. The weights may still hold an
update of another worker that came after that step: asynchronous training has no step at
which all of the ps tasks' variables are read at once (a synchronous job, or the TF2 trainers,
have one).
"""

import tensorflow as tf

v1 = tf.compat.v1


class StepSaver:
  """Saves `var_list` (the global step among them) with `saver_options` (v1.train.Saver's);
  `saver` is the underlying Saver, for its checkpoint bookkeeping."""

  def __init__(self, global_step, var_list, **saver_options):
    names = {v.op.name: v for v in var_list}
    if len(names) != len(var_list) or global_step.op.name not in names:
      raise ValueError("var_list must hold the global step and distinct variables")
    with v1.colocate_with(global_step):
      # In no collection: no worker's initialization (each runs its own) resets it between
      # the chief's two runs; the copy's assignment is its only initialization.
      copy = v1.Variable(0, dtype=global_step.dtype.base_dtype, trainable=False,
                         collections=[], name="global_step_saved")
      self._take = copy.assign(global_step.read_value())
    names[global_step.op.name] = copy
    self.saver = v1.train.Saver(names, **saver_options)

  def save(self, sess, prefix):
    """The checkpoint's path, `prefix`-N, N the global step it holds."""
    step = int(sess.run(self._take))
    return self.saver.save(sess, prefix, global_step=step)
