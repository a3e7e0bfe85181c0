"""A binary's command line: its flags, their ranges and subjects, its --help, its errors.

  cli         flags parsed, errors as one line, exit statuses (every binary runs through it)
  options     the trainers' flags, from cifar10.settings' declarations, and back to configs
  flag_ranges the flag definitions: ranges checked while parsing, where a flag applies, its
              --help subject
  usage       --help: the binary's usage, then its flags grouped by subject
  export_options  the exporters' and strategies.predict's flags
  cluster_options  a cluster job's flags: its tasks, the wait for peers, the evaluator task
"""
