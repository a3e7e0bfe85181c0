"""Variables paired by the model's structure, not by the numbers Keras gives names (issue 61).

tests/residual_port.py: a residual block whose two convolutions have one shape. tf.layers
numbers them conv2d_1, conv2d_2 as the tower calls them; the Keras port creates the second
before the first, so Keras's process-wide counter names them the other way round, and so
does creation order. Paired by name (before), the TF1 side ran with the two kernels swapped:
NOT EQUAL at step 0, with a location in the forward pass that sent a team to look at code
that was right.
"""

import pytest

import porting
from porting import structure
from tests import residual_port as m

pytestmark = pytest.mark.filterwarnings("ignore:`tf.layers")


def test_a_port_that_creates_its_layers_in_another_order_pairs_by_their_use():
  report = porting.compare(m.port(), m.batches(2), replicas=2, steps=2)
  assert report.equal, report.text(width=100)  # swapped kernels part at step 0 (before)
  # Which numbers Keras gave depends on what this process built before (the point): the
  # pairs are read from the report, never assumed.
  pairs = dict(report.pairs)
  assert pairs["conv2d_1/kernel"] != pairs["conv2d_2/kernel"]
  said = "\n".join(report.pairing)
  assert said.startswith("paired by the order of use in the forward pass, not of creation: "
                         f"TF1 conv2d_1/kernel with TF2 {pairs['conv2d_1/kernel']} (creation "
                         f"order: {pairs['conv2d_2/kernel']})"), said


def test_the_same_port_created_in_order_pairs_alike_and_says_nothing():
  report = porting.compare(m.port(build_model=lambda: m.Net(swapped=False)), m.batches(2),
                           replicas=2, steps=1)
  assert report.equal and report.pairing == []


def test_names_keras_and_tf_layers_number_are_known_as_such():
  assert structure.auto_numbered("conv2d_1/kernel")
  assert structure.auto_numbered("net/block1/batch_normalization/gamma")
  assert structure.auto_numbered("dense/bias")
  assert not structure.auto_numbered("fc1/kernel")  # a name the code gave
  assert not structure.auto_numbered("net/logits/bias")
  assert not structure.auto_numbered("conv2d")  # a variable's own name is not a layer's


def in_order(left1, left2, shapes1, shapes2):
  """matching's rule for one order, as match hands it over."""
  from porting import matching  # pylint: disable=g-import-not-at-top
  return matching._in_order(left1, left2, shapes1, shapes2)  # pylint: disable=protected-access


def test_variables_of_one_shape_paired_by_creation_alone_are_said():
  shapes1 = {"a1": (2,), "a2": (3,), "a3": (2,)}
  shapes2 = {"b1": (2,), "b2": (3,), "b3": (2,)}
  notes = []
  # The forward passes read them in orders that do not pair: creation order decides.
  pairs = structure.ordered(list(shapes1), list(shapes2), shapes1, shapes2,
                            (["a1", "a2", "a3"], ["b2", "b1", "b3"]), in_order, notes)
  assert pairs == {"a1": "b1", "a2": "b2", "a3": "b3"}
  assert len(notes) == 1 and notes[0].startswith(
      "paired by creation order alone (their order of use does not pair them): a1, a3 share")
  notes = []  # a record: no graph, no order of use, nothing to say
  structure.ordered(list(shapes1), list(shapes2), shapes1, shapes2, None, in_order, notes)
  assert notes == []


def test_a_record_carries_the_towers_order_of_use_and_pairs_by_it(tmp_path):
  # A record is replayed without the TF1 graph: before, it kept no order of use, and the
  # swapped port's kernels were paired by Keras's numbers and creation order.
  from porting import record  # pylint: disable=g-import-not-at-top
  path = str(tmp_path / "record")
  record.write(m.port(), m.batches(2), path, replicas=2, steps=2)
  report = porting.compare(m.port(), record=path, steps=2)
  assert report.equal, report.text(width=100)
  pairs = dict(report.pairs)
  assert "\n".join(report.pairing).startswith(
      "paired by the order of use in the forward pass, not of creation: TF1 conv2d_1/kernel "
      f"with TF2 {pairs['conv2d_1/kernel']}")
