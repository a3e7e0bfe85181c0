"""What one side did in each step, keyed by its own variable names (numpy values)."""

import dataclasses


@dataclasses.dataclass
class Step:
  """losses, outputs: per tower/replica, in order (outputs None where the port returns none);
  gradients: {trainable variable: the gradient applied} (averaged over the towers, or summed
  over the replicas); learning_rate: the rate the update used; weights: {variable: value
  after the step} (every model variable, moving statistics included); slots: {(variable,
  slot kind): value after the step}; regularization: {trainable variable: the gradient of
  the regularization losses alone} (TF1 side, where its REGULARIZATION_LOSSES collection has
  any); averages: {trainable variable: its moving average after the step} (where the port
  has an EMA)."""
  losses: list
  outputs: list
  gradients: dict
  learning_rate: float
  weights: dict
  slots: dict
  regularization: dict = dataclasses.field(default_factory=dict)
  averages: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Trace:
  """variables: [(name, shape)] in creation order; trainable: their trainable names;
  initial: {name: value} before the first step; steps: one Step per step; facts: what the
  side's graph shows ('fused_batch_norm', 'update_ops') for the diagnosis."""
  variables: list
  trainable: list
  initial: dict
  steps: list = dataclasses.field(default_factory=list)
  facts: dict = dataclasses.field(default_factory=dict)
