"""Run plumbing shared by every binary, no model or data of its own: it imports `cifar10` (its
configs, errors, checkpoints and data checks) and `tfbits` (the machine line, URL schemes),
nothing of `porting` (tests/test_layers.py).

  driver      the run driver: every training loop's control (resume or --init_from, the
              schedule of logs, summaries, saves and profiles, stops), the loops its backends
  backend     what a loop is to the driver: the Backend base class, a Call and its Steps
  cadence     when a thing counted in steps is due (`due`), how long a call may run
  run_summaries what the driver writes to TensorBoard itself: the progress rates, the run's
              settings (Text and HParams tabs)
  run_errors  a run's control errors: a stop after saving (exit 143, 130), a NaN or Inf loss
              or state, a checkpoint that does not restore
  run_folder  a run folder's files on any tf.io.gfile filesystem: whole, never through links
  recovery    its checkpoints after any kill: the newest complete one, the index, the count
              --max_checkpoints_to_keep allows, the debris of interrupted saves
  run_record  the settings a run's numbers depend on, kept in train_dir and checked on restart
  ownership   one run per train_dir (an OS lock naming its owner); usable output folders
  cli         flags parsed, errors as one line, exit statuses (every binary runs through it)
  options     the flags of every binary, defined once, mapped to cifar10.config objects
  flag_ranges the range of every numeric flag of every binary, checked while parsing
  usage       --help: the binary's usage, then its flags grouped by subject
  export_options  the exporters' and strategies.predict's flags
  export_folder   TensorFlow Serving's <export_dir>/<version>/, whole or absent
  cluster_options  a cluster job's flags: its tasks, the wait for peers, the evaluator task
  cluster     TF_CONFIG read and written in one place
  slurm       --cluster_resolver: TF_CONFIG or a Slurm job step, checked
  launcher    a local cluster: one process per task on 127.0.0.1, nothing left behind
  gpu_split   each task of a local cluster its own GPUs (CUDA_VISIBLE_DEVICES)
  signals     SIGTERM and Ctrl-C as requests to stop at the next step boundary
  progress    the original's step lines; the evaluators' results, on standard output
  profiling   --profile_steps: a TensorBoard profile of a window of steps
  polling     the evaluators' wait for new checkpoints
  watchdog    bounded waits for peers that TensorFlow would wait for forever
  gpu_memory  the total memory of each GPU, as nvidia-smi reports it
  gpu_runtime the run's GPUs and memory settings in TensorFlow's eager runtime (tf.config)
  determinism the bit contract's runtime settings (op determinism, no TensorFloat-32)
  cpu_kernels whether this CPU's kernels can run a run's precision (fp16, bf16): refused in
              one line, or run with a warning naming the cost
"""
