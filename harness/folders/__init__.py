"""A run folder's files, on any tf.io.gfile filesystem, whatever killed the run before.

  run_folder  a run folder's files: written whole, never through links
  recovery    its checkpoints after any kill: the newest complete one, the index, the count
              --max_checkpoints_to_keep allows, the debris of interrupted saves
  run_record  the settings a run's numbers depend on, kept in train_dir and checked on restart
  ownership   one run per train_dir (an OS lock naming its owner); usable output folders
  export_folder   TensorFlow Serving's <export_dir>/<version>/, whole or absent
  polling     the evaluators' wait for new checkpoints
"""
