"""What one side did in each step, keyed by its own variable names (numpy values)."""

import collections.abc
import dataclasses

from porting import evidence

CHUNK = 64 << 20  # bytes of weights or slots read in one Session run


class Lazy(collections.abc.Mapping):
  """{key: value} read one value at a time, when asked (`fetch(key)`), and not kept: the
  report compares a variable and lets its copy go, so a comparison holds one variable of each
  side at a time, not every weight and slot of both."""

  def __init__(self, keys, fetch, stale=lambda: False):
    self._keys, self._fetch, self._stale = list(keys), fetch, stale

  def __getitem__(self, key):
    if key not in self._keys:
      raise KeyError(key)
    if self._stale():  # the variables have moved on: their values are another step's
      raise RuntimeError(f"{key} read after the next step ran")
    return self._fetch(key)

  def __contains__(self, key):
    return key in self._keys

  def __iter__(self):
    return iter(self._keys)

  def __len__(self):
    return len(self._keys)


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
  steps: one Step per step (compare() keeps each step's losses, outputs and rate, and step
  0's gradients: the rows are taken as the steps run); facts: porting.evidence.Evidence,
  what the side's graph shows
  ('fused_batch_norm', 'update_ops', its random draws) for the diagnosis."""
  variables: list
  trainable: list
  steps: list = dataclasses.field(default_factory=list)
  facts: evidence.Evidence = dataclasses.field(default_factory=evidence.Evidence)

  def __post_init__(self):
    if not isinstance(self.facts, evidence.Evidence):
      self.facts = evidence.Evidence.of(self.facts)


def chunked(run, tensors):
  """fetch(key) for a Lazy: `run` (a Session's) reads `tensors` ({key: tensor}) a chunk of
  up to CHUNK bytes at a time, in key order (the report's), and hands each value out once:
  memory stays a chunk's, and a Session run (~30 ms for a new set of fetches) is not paid
  per variable."""
  keys, cache = list(tensors), {}

  def fetch(key):
    if key not in cache:
      chunk, size = [], 0
      for k in keys[keys.index(key):]:
        n = tensors[k].shape.num_elements() * tensors[k].dtype.size
        if k in cache or (chunk and size + n > CHUNK):
          break
        chunk.append(k)
        size += n
      cache.update(zip(chunk, run([tensors[k] for k in chunk])))
    return cache.pop(key)
  return fetch
