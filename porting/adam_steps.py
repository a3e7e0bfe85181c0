"""TF1 AdamOptimizer's step, kept in its beta powers: `beta1_power` and `beta2_power` hold
beta x beta^t after t updates, multiplied in float32 each step. A team's Saver run of Adam
often has no global step; the conversions read the step from `beta2_power` and write both
powers as TF1 would hold them after a given number of steps."""

import numpy as np

from porting.errors import PortError


def power(beta, steps):
  """TF1 Adam's beta power after `steps` updates: float32(beta), times float32(beta) per
  update, each product rounded to float32 as its kernel rounds it."""
  factor = power = np.float32(beta)
  for _ in range(steps):
    power = np.float32(power * factor)
  return power


# Adam's beta2 = 0.999 power reaches float32's smallest normal number after ~87,000 updates;
# beyond that the step cannot be read from it.
_MAX_STEPS = 10 ** 6


def steps_of(power, beta, path):
  """The number of updates after which TF1's Adam holds `power` for `beta`."""
  factor, value, target = np.float32(beta), np.float32(beta), np.float32(power)
  for steps in range(_MAX_STEPS):
    if value == target:
      return steps
    if value < target or value == 0:
      break
    value = np.float32(value * factor)
  raise PortError(f"the TF1 checkpoint {path} has no global step, and its beta2_power "
                  f"{float(power)!r} is no power that AdamOptimizer(beta2={beta}) reaches: "
                  "give the step with a global_step variable in the checkpoint")


def beta_powers(optimizer):
  """{TF1 name: beta} of a tf.compat.v1.train.AdamOptimizer's non-slot step-keepers (its
  beta1_power and beta2_power, which checkpoints convert); {} for any other optimizer."""
  if not (hasattr(optimizer, "_get_beta_accumulators") and
          isinstance(getattr(optimizer, "_beta1", None), float)):
    return {}
  beta1_power, beta2_power = optimizer._get_beta_accumulators()  # pylint: disable=protected-access
  return {beta1_power.op.name: optimizer._beta1,  # pylint: disable=protected-access
          beta2_power.op.name: optimizer._beta2}  # pylint: disable=protected-access
