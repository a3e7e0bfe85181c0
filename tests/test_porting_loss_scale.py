"""Float16 ports with a loss scale: TF1's MixedPrecisionLossScaleOptimizer against Keras's
LossScaleOptimizer (issue 61), on tests/fp16_port.py.

Before, a TF1 loss-scale wrapper was refused ("keeps no learning rate"), and a Keras one
compared its scaled gradients: every gradient 32768 x TF1's, named as a loss the two sides
normalize otherwise.
"""

import pytest

import porting
from tests import fp16_port as m


def test_a_float16_port_scaled_alike_is_the_same_bits_and_says_its_scale():
  report = porting.compare(m.port(), m.batches(2), replicas=2, steps=3)
  assert report.equal, report.text(width=100)
  assert any(line.startswith("loss scale, the same on both sides: dynamic from 32768, x2 "
                             "after 2000 finite steps") for line in report.notes())
  assert not any("current_loss_scale" in line for line in report.unread)  # said, not listed
  # Equal to the bit, and the precision it computes in said beside the verdict.
  assert any(n.startswith("precision: both sides compute in float16") for n in report.notes())
  gradients = [r for r in report.rows if r.kind == "gradient"]
  assert gradients and all(r.diff.max_abs == 0 for r in gradients)


@pytest.mark.parametrize("tf1_scale, said", [
    (128.0, "the loss scales differ: TF1 fixed 128, TF2 dynamic from 32768, x2 after 2000 "
            "finite steps"),
    (None, "the loss scales differ: TF1 none, TF2 dynamic from 32768")])
def test_scales_that_differ_are_refused_naming_both(tf1_scale, said):
  with pytest.raises(porting.PortError, match=said.replace("(", r"\(")):
    porting.compare(m.port(tf1_optimizer=m.tf1_scaled(tf1_scale)), m.batches(1),
                    replicas=1, steps=1)
