"""`Report`: what `porting.compare` found, and its text.

The pairs of variables compared, every row of numbers, the two sides' traces (what each side
read and measured), the causes that fit the numbers, the machine the bits came from and what
could not be read; `text()` renders it whole or to a width (porting.screen).
"""

import dataclasses

from porting import precision
from porting import report
from porting import screen


@dataclasses.dataclass
class Report:
  """pairs: [(TF1 name, TF2 name)]; rows: every report.Row; tf1, tf2: the two Traces;
  findings: the known causes that fit the numbers (porting.findings.Finding: a kind and its
  line; `hints`: the lines); equal: every row within `tolerance`;
  machine: the tfbits.machine.Machine it ran on (bits are its kernels'); unread: what the
  kit could not read on a side and so did not compare before the steps (the numbers did);
  pairing: how variables were paired where their names did not say (porting.structure)."""
  pairs: list
  rows: list
  tf1: object
  tf2: object
  tolerance: float
  findings: list
  replicas: int
  machine: object = None
  unread: list = dataclasses.field(default_factory=list)
  pairing: list = dataclasses.field(default_factory=list)

  @property
  def hints(self):
    """The findings, in the report's order (each a str: its line)."""
    return list(self.findings)

  @property
  def equal(self):
    return report.first_difference(self.rows, self.tolerance) is None and (
        self.learning_rates[0] == self.learning_rates[1])

  @property
  def first_difference(self):
    """The first report.Row outside the tolerance (by step, then kind), or None."""
    return report.first_difference(self.rows, self.tolerance)

  @property
  def learning_rates(self):
    return ([s.learning_rate for s in self.tf1.steps], [s.learning_rate for s in self.tf2.steps])

  @property
  def left_out(self):
    """TF1 variables the variable map left out of the comparison (mapped to None)."""
    paired = {a for a, _ in self.pairs}
    return [n for n, _ in self.tf1.variables if n not in paired]

  def text(self, width=None):
    """The report; `width`: at most that many columns, the verdict, the first difference and
    the causes first (porting.screen: what the command prints); None: each line whole."""
    if width:
      return "\n".join(screen.lines(self, width))
    verdict = "EQUAL" if self.equal else "NOT EQUAL"
    where = "".join(f"  {line}\n" for line in self.notes())
    text = report.text(self.rows, self.tolerance, self.learning_rates, self.hints,
                       self.title(bound=False))
    head, _, body = text.partition("\n")
    return f"{head}\n{where}{body}\n{verdict}"

  def title(self, bound=True):
    title = (f"TF1 {self.replicas} tower(s) vs TF2 {self.replicas} replica(s), "
             f"{len(self.tf1.steps)} step(s)")
    if "start" in self.tf1.facts:
      path, step = self.tf1.facts["start"]
      title += f" from {path} (global step {step})"
    if self.left_out:
      title += f"; not compared (variable_map): {', '.join(self.left_out)}"
    if bound:
      title += f" ({report.bound(self.tolerance)}; steps count from 0)"
    return title

  def notes(self):
    """Where the bits were made and what was not compared, a line each."""
    notes = [f"machine: {self.machine.line()}"] if self.machine else []
    if "recorded" in self.tf1.facts:
      notes.append(f"TF1 side recorded on: {self.tf1.facts['recorded']}")
    notes += [f"not compared: {line}" for line in self.unread]
    notes += [f"pairing: {line}" for line in self.pairing]
    if "loss_scale" in self.tf2.facts:
      notes.append(self.tf2.facts["loss_scale"])
    if "mixed_precision_rewrite" in self.tf1.facts:
      notes.append(self.tf1.facts["mixed_precision_rewrite"])
    said = precision.note(self.tf1.facts.get("precision"), self.tf2.facts.get("precision"))
    if said:
      notes.append(said)
    apart = self.tf2.facts.get("replicas_apart", {})
    if apart:
      names = ", ".join(f"{n} (up to {d:.3g})" for n, d in list(apart.items())[:3])
      notes.append(f"replicas apart: {len(apart)} TF2 variable(s) hold other values on other "
                   f"replicas than on replica 0 after the last step: {names}"
                   f"{', ...' if len(apart) > 3 else ''}; replica 0's are compared (the "
                   "checkpoint saves them), a read on another replica sees its own")
    return notes
