"""The GPUs' memory as the driver reports it: what --per_process_gpu_memory_fraction needs.

TF2 has no fraction setting, only an absolute per-GPU limit (a logical device's
memory_limit), and TensorFlow does not report a GPU's total memory before its runtime has
taken it; nvidia-smi does, without touching the GPU. cifar10.devices.memory_limit_mb turns
the fraction into the limit.
"""

import subprocess


def total_gpu_memory_mb():
  """MiB of the smallest GPU (it bounds all of them), or None where nvidia-smi does not say."""
  try:
    out = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,"
                          "nounits"], capture_output=True, text=True, timeout=10, check=True)
    return min(int(v) for v in out.stdout.split())
  except (OSError, ValueError, subprocess.SubprocessError):
    return None
