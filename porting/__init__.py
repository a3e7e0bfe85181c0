"""Port your own model: hold a team's TF1 tower code against its TF2 port, to the bit.

  import porting
  report = porting.compare(porting.Port(tower_loss=..., tf1_optimizer=..., build_model=...,
                                        replica_loss=..., tf2_optimizer=...),
                           batches, replicas=2, steps=3, tolerance=0.0)
  print(report.text())      # per variable: loss, outputs, gradients, weights, slots
  assert report.equal

  spec        Port: what a team hands the kit (its functions on both sides)
  check       compare() and its Report
  tf1_towers  the TF1 side: towers in a graph, average_gradients, a Session
  tf2_replicas the TF2 side: MirroredStrategy, a tape per replica, a Keras optimizer
  matching    TF1 variable names to TF2 variables (name, shape, creation order, a map)
  trace       what one side did in each step (losses, outputs, gradients, weights, slots)
  report      the rows and the text
  diffs       max absolute and relative difference, and ULPs
  diagnosis   the known causes of a difference, named where the numbers fit
  devices     N GPUs, or N logical CPU devices where there are none
  errors      PortError: one line, no traceback, from the command line

Nothing here knows CIFAR-10; MIGRATION.md ("Port your own model") walks through a second
model end to end.
"""

from porting.check import compare
from porting.check import Report
from porting.devices import replica_devices
from porting.errors import PortError
from porting.spec import Port

__all__ = ["compare", "Port", "PortError", "replica_devices", "Report"]
