"""The run driver and what it calls: every training loop is a backend of it.

  driver      the run driver: every training loop's control (resume or --init_from, the
              schedule of logs, summaries, saves and profiles, stops), the loops its backends
  backend     what a loop is to the driver: the Backend base class, a Call and its Steps
  cadence     when a thing counted in steps is due (`due`), how long a call may run
  run_summaries what the driver writes to TensorBoard itself: the progress rates, the run's
              settings (Text and HParams tabs)
  run_errors  a run's control errors: a stop after saving (exit 143, 130), a NaN or Inf loss
              or state, a checkpoint that does not restore
  progress    the original's step lines; the evaluators' results, on standard output
  profiling   --profile_steps: a TensorBoard profile of a window of steps
  signals     SIGTERM and Ctrl-C as requests to stop at the next step boundary
  run_log     what a run says: on a stderr whose reader is gone, dropped (never an error);
              the chief's lines in <train_dir>/log.txt
"""
