"""Jobs of several processes: where their tasks are read, and local clusters.

  cluster     TF_CONFIG read and written in one place
  slurm       --cluster_resolver: TF_CONFIG or a Slurm job step, checked
  launcher    a local cluster: one process per task on 127.0.0.1, nothing left behind
  gpu_split   each task of a local cluster its own GPUs (CUDA_VISIBLE_DEVICES)
  watchdog    bounded waits for peers that TensorFlow would wait for forever
"""
