"""Run plumbing shared by both trainers' binaries, none of it about CIFAR-10.

  cli       flags parsed, errors as one line, exit statuses (every binary runs through it)
  options   the flags of every binary, defined once, mapped to cifar10.config objects
  cluster   TF_CONFIG read and written in one place
  launcher  a local cluster: one process per task on 127.0.0.1, nothing left behind
  signals   SIGTERM as a request to stop at the next step boundary
  progress  the original's step and precision lines
  polling   the evaluators' wait for new checkpoints
  ownership one run per train_dir (an OS lock naming its owner); usable output folders
  watchdog  bounded waits for peers that TensorFlow would wait for forever
"""
