"""What the run driver writes to TensorBoard itself, for every loop, on the chief (an events
file of its own in train_dir): the progress lines' rates, and the run's settings where the
Text and HParams tabs show them, as Model Garden writes its params. They describe the run and
the machine, not its numbers: comparisons of two runs' summaries leave TAGS out."""

import hashlib
import json
import posixpath

SPEED_TAGS = ("examples_per_second", "steps_per_second")
SETTINGS_TAG = "run_settings"
HPARAMS_TAG = "_hparams_/session_start_info"  # the HParams plugin's own tag
TAGS = SPEED_TAGS + (SETTINGS_TAG, HPARAMS_TAG)


class Writer:
  """The driver's summary writer of train_dir, opened at its first write."""

  def __init__(self, train_dir):
    self.train_dir, self.writer = train_dir, None

  def _default(self):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    if self.writer is None:
      self.writer = tf.summary.create_file_writer(self.train_dir)
    return self.writer.as_default()

  def rates(self, step, rates):
    """A progress line's (examples/sec, steps/sec) at 0-based `step`."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    with self._default():
      for tag, value in zip(SPEED_TAGS, rates):
        tf.summary.scalar(tag, value, step=step)

  def settings(self, step, record, flagfile, trainer=None):
    """The run record's settings (harness.folders.run_record) and the command's flags, as text, and
    the settings as the HParams plugin's hyper-parameters of this run, with the trainer that
    ran it (`trainer`): a TF2 and a v1 run of the same flags differ only there."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    from tensorboard.plugins.hparams import api as hparams  # pylint: disable=g-import-not-at-top
    values = (record or {}).get("settings", {})
    text = ["Settings of the run (run_config.json):", "",
            "    " + json.dumps(values, indent=1, sort_keys=True).replace("\n", "\n    ")]
    if flagfile:
      text += ["", "Flags of the command (flags.txt):", "",
               "    " + flagfile.strip().replace("\n", "\n    ")]
    with self._default():
      tf.summary.text(SETTINGS_TAG, "\n".join(text), step=step)
      # One trial per run folder: by default the trial is named by a hash of the values, and
      # runs of the same settings (a TF2 and a v1 run, say) became one row of the HParams tab.
      shown = {name: value if isinstance(value, (bool, int, float, str)) else str(value)
               for name, value in values.items()}
      if not shown.get("decay_steps") and "batch_size" in values:  # 0: derived; the value run
        from cifar10 import schedule  # pylint: disable=g-import-not-at-top
        shown["decay_steps"] = schedule.decay_steps(
            values["batch_size"], values.get("replicas", 1),
            values.get("decay_steps_per_global_batch", False))
      if trainer:
        shown["trainer"] = trainer
      hparams.hparams(shown, trial_id=trial_name(self.train_dir))

  def close(self):
    if self.writer is not None:
      self.writer.close()


def trial_name(train_dir):
  """The HParams tab's name of a run: its folder's name, and 4 hex digits of the whole path so
  that two folders of one name stay two rows (the whole path was cut in the tab's column)."""
  path = train_dir.rstrip("/")
  return f"{posixpath.basename(path) or path} ({hashlib.sha1(path.encode()).hexdigest()[:4]})"
