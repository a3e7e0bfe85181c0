"""slim's LeNet on model_deploy clones against its Keras 3 port (tests/lenet_model_deploy_port.py):
the faithful port the same bits, and three one-fault ports, each named truly or located,
never blamed on the script. Found by trying it: the whole regularization on every replica
drew a first cause telling the team that the TF1 code differs by tower (a false cause)."""

import functools
import re

import pytest

import porting
from tests import lenet_model_deploy_port as m

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _causes(report):
  return [line for line in report.text().splitlines() if line.startswith("  cause: ")]


def test_the_faithful_port_is_the_same_bits_over_a_decay():
  report = porting.compare(m.port(), m.batches(2), replicas=2, steps=3)
  assert report.equal, report.text(width=100)
  assert report.hints == []
  # The schedule decays at step 2, both sides: TF1Momentum keeps TF1's accumulator across it.
  assert report.learning_rates[0][2] < report.learning_rates[0][1]


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_the_whole_regularization_on_every_replica_is_the_ports_count():
  report = porting.compare(
      m.port(replica_loss=functools.partial(m.replica_loss, placement="every_replica")),
      m.batches(2), replicas=2, steps=3)
  [line] = _causes(report)
  assert "the regularization is counted 2 times" in line and "on replica 0 only" in line
  assert "the TF1 code differs by tower" not in line


def test_label_smoothing_left_out_is_named_before_a_step():
  # Read from both graphs (each softmax cross-entropy's labels, y (1 - e) + e / K): before,
  # the port ran, and the report only located the difference after the last layer.
  with pytest.raises(porting.PortError, match=re.escape(
      "label smoothing (labels y (1 - e) + e / K): TF1 0.1, TF2 0;")):
    porting.compare(
        m.port(replica_loss=functools.partial(m.replica_loss, label_smoothing=0.0)),
        m.batches(2), replicas=2, steps=1)


def test_another_momentum_is_refused_before_a_step():
  with pytest.raises(porting.PortError, match="momentum TF1 0.9, TF2 0.8"):
    porting.compare(m.port(tf2_optimizer=functools.partial(m.tf2_optimizer, momentum=0.8)),
                    m.batches(2), replicas=2, steps=1)
