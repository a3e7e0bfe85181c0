"""Test-wide TensorFlow set-up: quiet logs and 4 logical CPU devices, fixed before TF starts.

Every in-process test shares one TF runtime with /cpu:0../cpu:3, so the multi-replica tests
need no GPU; single-device tests just use /cpu:0.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from harness import quiet  # pylint: disable=g-import-not-at-top

# TensorFlow's import-time lines (CUDA probing on a machine without a GPU) would otherwise
# end up in the suite's output, once per xdist worker, as the binaries' first screens would.
with quiet.native_stderr_filtered():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.config.list_physical_devices()

NUM_LOGICAL_CPUS = 4
tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0],
    [tf.config.LogicalDeviceConfiguration()] * NUM_LOGICAL_CPUS)
