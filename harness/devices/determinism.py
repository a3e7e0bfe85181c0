"""The bit contract's runtime settings, applied by every binary that claims the contract.

Both trainers give the same bits as each other and as an uninterrupted run of themselves
(docs/determinism.md). On CPUs that holds by itself: every kernel this model uses sums in a
fixed order. On GPUs it does not unless TensorFlow is told to:

- op determinism (`tf.config.experimental.enable_op_determinism`): cuDNN's max-pool gradient
  with overlapping windows (this model's 3x3 stride 2) and BiasAddGrad's atomics kernel,
  which TensorFlow picks by timing, otherwise add in whatever order their threads finish;
  ops with no deterministic GPU kernel raise instead of running nondeterministically;
- TensorFloat-32 off: on Ampere and newer GPUs TensorFlow runs float32 convolutions and
  matmuls with 10-bit mantissas unless told not to, so `--precision=fp32` would not be
  float32 there (and the towers and the replicas could round differently).

`apply(deterministic)` sets both for the process (TensorFlow keeps them process-wide) where
there are GPUs: `--deterministic` (the default) in both trainers, always in both evaluators
and in `python -m equivalence`. `--nodeterministic` trades the contract for speed on GPUs: a
run is then repeatable only up to those kernels' rounding. Without GPUs nothing is set: the
CPU kernels keep the contract by themselves, and op determinism would refuse unseeded random
ops in the same process (the original tutorial's initialisers, which the tests run beside the
trainers) and XLA's max-pool gradient (`--jit_compile`).
"""



def _gpus():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top  # binaries parse flags first
  return tf.config.list_physical_devices("GPU")


def apply(deterministic=True):
  """On a machine with GPUs: op determinism and TensorFloat-32 off if `deterministic`; else
  TensorFloat-32 on (TensorFlow's default) and op determinism as it is (off in a new
  process). Without GPUs: nothing (see the module docstring)."""
  if not _gpus():
    return
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if deterministic:
    tf.config.experimental.enable_op_determinism()
  tf.config.experimental.enable_tensor_float_32_execution(not deterministic)


def applied():
  """Whether this process runs under the contract's settings."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tensorflow.python.framework import config as tf_config  # pylint: disable=g-direct-tensorflow-import,g-import-not-at-top
  return (tf_config.is_op_determinism_enabled()
          and not tf.config.experimental.tensor_float_32_execution_enabled())
