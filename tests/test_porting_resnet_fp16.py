"""The float16 path of TF1's official ResNet against its Keras 3 port (tests/
resnet_fp16_port.py, ported by a helper as a team would; issue 61): what the kit says where
float16's rounding and a port's faults are of like size.

Measured on it before (this box): as the script pools (tf.reduce_mean in float16, against
Keras's mean that sums in float32), with TF1's batch norm unfused, step 0 stood up to 0.0024
relative apart and step 1 0.32, all rounding (with the port pooling as TF1 does, every row
the same bits but the moving statistics' update form): the kit said "not explained" (its
float16 rule read steps 0-1 against the bound). With the batch norm's gamma and beta decayed
in the port (the one fault), the penalty was named and beside it "float16 rounding ... up to
0.049", the penalty's own size. A TF1 optimizer of the team's own that scales its loss in
its compute_gradients was refused as "TF1 none". No convolution was compared layer by layer
(the custom getter's casts sit outside the tower's name scope).
"""

import pytest

import porting
from tests import resnet_fp16_port as m

SLOW = pytest.mark.slow  # ~3 s of CPU a comparison (one replica: the helper's N = 2
# measured the same findings)


def _compare(**changes):
  return porting.compare(m.port(**changes), m.batches(1, steps=2), replicas=1, steps=2)


@SLOW
def test_as_the_script_pools_the_first_steps_rounding_is_named_and_its_growth_said_apart():
  report = _compare(fused=False)
  kinds = [f.kind for f in report.findings]
  assert kinds == ["precision.low_precision"], report.text(width=100)
  line = report.findings[0]
  assert "every difference of step 0, where the bits first part, is within float16's" in line
  # Located at the pooling, before the dense layer: the convolutions are compared though the
  # script's custom getter casts their kernels outside the tower's name scope (they were
  # not: "after the last layer compared", batch norm's, and 11 kernels "compared no layer of").
  assert "and resnet_model/dense/kernel's: resnet_model/dense/kernel's layer's input is" in line
  assert "compares no layer of" not in line, line
  step1 = [r for r in report.rows if r.step == 1 and r.diff.max_rel > 0.082]
  if step1:  # rounding grown past the bound (0.32 here): said as not explained by it
    assert "from step 1 " in line and "which this does not explain" in line, line


@SLOW
def test_a_fault_named_is_not_also_called_float16_rounding():
  # Pooled as TF1 pools: the faithful base is the same bits but the statistics' update form.
  report = _compare(fused=False, pool="float16", decay_batch_norm=True)
  kinds = [f.kind for f in report.findings]
  assert "scale.penalty_by_hand" in kinds, report.text(width=100)
  assert "precision.low_precision" not in kinds, report.text(width=100)
  assert "batch_normalization/gamma" in report.findings[kinds.index("scale.penalty_by_hand")]


@SLOW
def test_a_scale_in_the_teams_own_optimizer_is_said_unread_not_none():
  with pytest.raises(porting.PortError, match=(
      r"the loss scales differ: TF1 none the kit can read \(ScriptLossScaling is no "
      r"optimizer class the kit reads: a scale its own compute_gradients applies is not "
      r"seen\), TF2 dynamic from 128")):
    _compare(scaling="script")


def test_a_tf1_optimizer_of_the_teams_own_is_said_to_run_its_own_compute_gradients():
  import keras  # pylint: disable=g-import-not-at-top
  from porting import hyperparameters  # pylint: disable=g-import-not-at-top
  line = hyperparameters.unread(m.ScriptLossScaling(0.1, 0.9, 128), keras.optimizers.SGD(0.1))
  assert line.endswith("; TF1 ScriptLossScaling's own compute_gradients runs as written (a "
                       "loss scale, a clipping written there is in the steps' numbers, not "
                       "read)"), line
