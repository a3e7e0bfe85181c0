"""`Finding`: one thing the diagnosis found, as data: its kind (which rule of porting.causes
found it, or the diagnosis' own: random draws, values not finite, where the bits part when no
cause fits) and the line the report prints. A later rule reads an earlier one's finding by
its kind (diagnosis.Observations.fired), never by its text; the report renders the lines."""

RANDOM = "random_ops"  # draws the two sides do not share (porting.random_causes)
NOT_FINITE = "not_finite"  # a row holds NaN or Inf
NOT_EXPLAINED = "not_explained"  # no known cause fits: where the bits part (porting.unexplained)


class Finding(str):
  """A line of the report that knows its kind: a str (what the report prints, what a test
  or a team's script reads as text) with `kind`."""

  def __new__(cls, kind, text):
    finding = super().__new__(cls, text)
    finding.kind = kind
    return finding

  def __getnewargs__(self):  # pickled as (kind, text), not as the str alone
    return self.kind, str(self)

  @property
  def text(self):
    return str.__str__(self)

  def __repr__(self):
    return f"Finding({self.kind!r}, {self.text!r})"


def kind_of(rule):
  """A rule's kind: its module and name under porting.causes ("scale.regularization")."""
  return f"{rule.__module__.rsplit('.', 1)[-1]}.{rule.__name__}"


def of_rule(rule, lines):
  """The Findings of `rule` from the lines it returned."""
  return [Finding(kind_of(rule), line) for line in lines]
