"""What the runtime needs of a run's devices, for both trainers.

  gpu_runtime the run's GPUs and memory settings in TensorFlow's eager runtime (tf.config)
  gpu_memory  the total memory of each GPU, as nvidia-smi reports it
  determinism the bit contract's runtime settings (op determinism, no TensorFloat-32)
  cpu_kernels whether this CPU's kernels can run a run's precision (fp16, bf16): refused in
              one line, or run with a warning naming the cost
"""
