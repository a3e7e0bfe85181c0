"""Run plumbing shared by every binary, no model or data of its own: it imports `cifar10` (its
configs, errors, checkpoints and data checks) and `tfbits` (the machine line, URL schemes),
nothing of `porting` (tests/test_layers.py).

  command_line  a binary's flags, their ranges and --help subjects, its one-line errors
                (cli, options, flag_ranges, usage, export_options, cluster_options)
  control       the run driver and what it calls (driver, backend, cadence, run_summaries,
                run_errors, progress, profiling, signals, run_log)
  folders       a run folder's files and their recovery (run_folder, recovery, run_record,
                ownership, export_folder, polling)
  clusters      jobs of several processes (cluster, slurm, launcher, gpu_split, watchdog)
  devices       what the runtime needs of a run's devices (gpu_runtime, gpu_memory,
                determinism, cpu_kernels)

Each folder's own docstring says what each of its modules holds.
"""
