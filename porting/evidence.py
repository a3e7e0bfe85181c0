"""`Evidence`: what the kit knows of one side of a comparison, every fact declared here with
what it is and where it comes from; Trace.facts is one. A fact not declared cannot be set
(before, a dict of string keys written in six files: a misspelt key read as "not there").

Three kinds, as the report needs them told apart:
  read      from the side's graph, code or settings before a step (what its train op runs,
            its layers' structure, its random draws, its EMA)
  measured  from the steps' numbers (step 0's transform of the gradients, the penalty's fit,
            the layers probed one by one, the replicas' copies apart)
  where     the run itself (the machine, a record's machine, a checkpoint started from)
A fact never set is absent (`in` is False, `get` gives the default): what could not be read
is absent, or None where the kit measured that it cannot say (probes).

Dict-like on purpose (`get`, `[]`, `in`, `update`, `setdefault`): the causes read facts by
name, and a record keeps them as JSON."""

import dataclasses

class _Absent:
  """A fact never set (None is a value: a probe measured as unable to say)."""

  def __repr__(self):
    return "absent"


_ABSENT = _Absent()


def _fact(kind, doc):
  return dataclasses.field(default=_ABSENT, metadata={"kind": kind, "doc": doc})


@dataclasses.dataclass
class Evidence:
  # read: the TF1 towers' graph (porting.tf1_facts)
  update_ops: str = _fact("read", "whose UPDATE_OPS the Port's combination runs")
  ema_order: str = _fact("read", "where TF1 applies its EMA: before or after the update")
  combination: dict = _fact("read", "the TowerCombination the towers were built with")
  regularized_towers: list = _fact("read", "the towers whose loss holds the regularization")
  update_towers: list = _fact("read", "the towers whose moving-statistic assigns the "
                              "train op runs")
  in_place_updates: bool = _fact("read", "statistics assigned in place, not via UPDATE_OPS")
  structure: dict = _fact("read", "tower 0's layers from the loss down (layer_structure)")
  ema: dict = _fact("read", "the EMA's decay and num_updates (ema_settings)")
  fused_batch_norm: bool = _fact("read", "a FusedBatchNorm op in the towers")
  # read: either side
  random_ops: str = _fact("read", "the Port's random_ops: aligned or as written")
  random_draws: dict = _fact("read", "{step: [(kind, shape)]} of the draws the kit aligned")
  random_escaped: list = _fact("read", "random ops the kit did not draw")
  outputs_parts: list = _fact("read", "what the loss function returns as its outputs")
  sparse_gradients: list = _fact("read", "TF2 variables whose tape gradient is sparse")
  graph_rewrites: dict = _fact("read", "grappler's options both sides ran under")
  loss_scale: str = _fact("read", "the TF2 side's loss scale, as the report says it")
  precision: str = _fact("read", "the narrowest float dtype the side's step computes in "
                         "(porting.precision: float16 in a mixed-precision port)")
  mixed_precision_rewrite: str = _fact("read", "TF1's Session runs grappler's mixed-precision "
                                       "rewrite: what it does there")
  # measured
  transformed: dict = _fact("measured", "what tf1_gradients made of step 0's gradients")
  regularization_loss: float = _fact("measured", "step 0's regularization loss, TF1")
  global_steps: list = _fact("measured", "TF1's global step after each step")
  largest_gradient: list = _fact("measured", "TF1's largest gradient at each step")
  penalty: dict = _fact("measured", "step 0's gradient differences fitted as c x w")
  penalty_frameworks: dict = _fact("measured", "each side's framework penalty as c x w")
  probes: dict = _fact("measured", "step 0's layers probed one by one; None: the probe "
                       "gave other bits than the step")
  loss_terms: tuple = _fact("measured", "step 0's loss as the scalar terms its additions add: "
                            "(form, [(value, op)]) (porting.loss_terms)")
  replicas_apart: dict = _fact("measured", "TF2 variables whose replicas' copies differ")
  # where
  machine: str = _fact("where", "the machine line of the TF2 side's run")
  recorded: str = _fact("where", "the machine a record's TF1 side ran on")
  start: tuple = _fact("where", "(checkpoint, global step) both sides started from")

  @classmethod
  def names(cls):
    return [f.name for f in dataclasses.fields(cls)]

  @classmethod
  def of(cls, facts):
    """Evidence holding `facts` ({name: value}); a name not declared is an error, as a typo."""
    evidence = cls()
    evidence.update(facts)
    return evidence

  def __contains__(self, name):
    return getattr(self, name, _ABSENT) is not _ABSENT

  def __getitem__(self, name):
    if name not in self:
      raise KeyError(name)
    return getattr(self, name)

  def __setitem__(self, name, value):
    if name not in self.names():
      raise KeyError(f"{name!r} is no fact the kit declares (porting.evidence)")
    setattr(self, name, value)

  def get(self, name, default=None):
    return self[name] if name in self else default

  def setdefault(self, name, default):
    if name not in self:
      self[name] = default
    return self[name]

  def update(self, facts):
    for name, value in dict(facts).items():
      self[name] = value

  def items(self):
    return [(name, getattr(self, name)) for name in self.names() if name in self]

  def as_dict(self):
    """{name: value} of the facts set (a record's JSON)."""
    return dict(self.items())
