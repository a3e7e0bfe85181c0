"""Where the bits part when no known cause fits (porting.parting): the first step; in the
forward pass the first layer (in the model's order) whose output differs while its input is
the same bits, or the stretch between two layers where the input first differs; in the
backward pass the first gradient from the loss down; in the update, what it moved apart."""

import numpy as np

import porting
from porting import parting
from porting import report as report_lib
from porting.diffs import Diff
from tests import assign_moving_average_port as m


def _row(step, kind, name, rel):
  return report_lib.Row(step, kind, name, name, Diff(rel, rel, 1 if rel else 0))


X = np.arange(6, dtype=np.float32).reshape(2, 3)
STRUCTURE = {"order": ["top", "middle", "bottom"], "shared": {}}  # from the loss down
PAIRS = [("top", "top"), ("middle", "middle"), ("bottom", "bottom")]


def test_the_first_layer_whose_output_parts_from_the_same_input_is_named():
  tf1 = {"bottom": ("Conv2D", X, X), "middle": ("Conv2D", X, X), "top": ("MatMul", X, X)}
  tf2 = dict(tf1, middle=("Conv2D", X, X + 1e-6))
  where = parting.first_parting([_row(0, "loss", "tower_0", 1e-7)], [], STRUCTURE, tf1, tf2,
                                PAIRS)
  assert where.line() == (
      "the bits part at step 0 in the forward pass at middle's layer: its input the same "
      "bits, its output 2e-07 relative apart (TF1 Conv2D, TF2 Conv2D; every layer before it "
      "the same bits)")


def test_an_input_that_parts_after_a_layer_the_same_bits_names_the_stretch_between():
  tf1 = {"bottom": ("Conv2D", X, X), "middle": ("Conv2D", X, X), "top": ("MatMul", X, X)}
  tf2 = dict(tf1, middle=("Conv2D", X * 2, X))
  where = parting.first_parting([_row(0, "outputs", "tower_0", 1e-3)], [], STRUCTURE, tf1,
                                tf2, PAIRS)
  assert where.line().startswith(
      "the bits part at step 0 in the forward pass between bottom's layer and middle's: "
      "middle's layer's input is 1 relative apart while bottom's output is the same bits")


def test_weights_no_layer_compares_are_named_where_the_input_parts():
  """A GRU classifier: the TF1 cell's weights are read inside its loop, outside the layers
  the kit probes, and the report placed the parting "before softmax/w's layer" in what
  "reads no weight of a layer compared", with the two cells' kernels in between."""
  structure = {"order": ["top"], "shared": {}}
  pairs = [("cell/kernel", "rnn/cell/kernel"), ("top", "top")]
  tf1 = {"top": ("MatMul", X, X)}
  tf2 = {"top": ("MatMul", X * 2, X), "rnn/cell/kernel": ("MatMul", X, X)}
  where = parting.first_parting([_row(0, "outputs", "tower_0", 1e-3)], [], structure, tf1,
                                tf2, pairs)
  assert where.line().endswith(
      "(what is there reads no weight of a layer compared: an activation, a pooling, a "
      "dropout, a reshape, an embedding's lookup, a normalization's statistics; or a layer of "
      "weights the kit compares no layer of: cell/kernel)")


def test_a_layer_whose_output_has_another_shape_is_where_the_bits_part():
  """A transposed convolution's padding: the same input, an 8x8 output in TF1 and 10x10 in
  the port. The layer was skipped without a word and the parting said to be after it."""
  wide = np.zeros((2, 5), np.float32)
  tf1 = {"bottom": ("Conv2D", X, X), "middle": ("Conv2DBackpropInput", X, X),
         "top": ("MatMul", X, X)}
  tf2 = dict(tf1, middle=("Conv2DTranspose", X, wide))
  where = parting.first_parting([_row(0, "outputs", "tower_0", 1e-3)], [], STRUCTURE, tf1,
                                tf2, PAIRS)
  assert where.line() == (
      "the bits part at step 0 in the forward pass at middle's layer: its input the same bits, "
      "its output of another shape (TF1 [2, 3], TF2 [2, 5]; TF1 Conv2DBackpropInput, TF2 "
      "Conv2DTranspose)")
  # Its input apart too: not where it parts, but said among the layers not compared.
  tf2 = dict(tf1, middle=("Conv2DTranspose", X + 1, wide), top=("MatMul", X, X + 1))
  where = parting.first_parting([_row(0, "outputs", "tower_0", 1e-3)], [], STRUCTURE, tf1,
                                tf2, PAIRS)
  assert where.line().endswith(
      "at top's layer: its input the same bits, its output 0.2 relative apart (TF1 MatMul, TF2 "
      "MatMul; every layer compared before it the same bits; before it, layers the kit could not "
      "compare: middle (outputs TF1 [2, 3], TF2 [2, 5]))"), where.line()


def test_a_layer_whose_input_has_another_shape_says_its_inputs():
  """A ResNet port with 'same' padding where TF1 pads by hand: the stride-2 convolution's
  input is 10x10 in TF1 and 8x8 in the port, its output the same shape; the line said
  "(outputs TF1 [4, 4, 4, 8], TF2 [4, 4, 4, 8])", two equal shapes, and not the inputs."""
  padded = np.zeros((2, 5), np.float32)
  tf1 = {"bottom": ("Conv2D", X, X), "middle": ("Conv2D", padded, X), "top": ("MatMul", X, X)}
  tf2 = dict(tf1, middle=("Conv2D", X, X + 1), top=("MatMul", X + 1, X))
  where = parting.first_parting([_row(0, "outputs", "tower_0", 1e-3)], [], STRUCTURE, tf1,
                                tf2, PAIRS)
  assert "layers the kit could not compare: middle (inputs TF1 [2, 5], TF2 [2, 3])" in (
      where.line()), where.line()


def test_an_update_that_parts_with_the_same_gradients_is_said_as_such():
  table = [_row(1, "gradient", "w", 0.0), _row(1, "weight", "w", 1e-7)]
  where = parting.first_parting([table[1]], table, STRUCTURE)
  assert where.line().startswith(
      "the bits part at step 1 in the update: the forward pass and every gradient the same "
      "bits, the weight of w after it 1e-07 relative apart")


def test_a_forward_pass_after_weights_left_apart_is_not_said_to_read_the_same_weights():
  """Weights within the tolerance (or left out as noise) after step 0 are read by step 1:
  its forward pass parting is not "from the same weights and batch"."""
  table = [_row(0, "weight", "bottom", 2e-7), _row(0, "weight", "top", 0.0),
           _row(1, "outputs", "tower_0", 1e-4)]
  where = parting.first_parting([table[2]], table, STRUCTURE)
  assert where.line() == (
      "the bits part at step 1 in the forward pass: a tower's loss or outputs differ, from "
      "weights that are not all the same bits: after step 0, bottom apart (up to 2e-07 "
      "relative)")
  same = [_row(0, "weight", "bottom", 0.0), _row(1, "outputs", "tower_0", 1e-4)]
  assert parting.first_parting([same[1]], same, STRUCTURE).line() == (
      "the bits part at step 1 in the forward pass: a tower's loss or outputs differ from the "
      "same weights and batch")


def test_a_gradient_left_out_as_noise_above_the_parting_is_not_within_the_tolerance():
  """BERT's attention key bias (a gradient 0 but for rounding) above the first gradient
  apart, at tolerance 0: it was counted "within the tolerance"."""
  table = [_row(0, "gradient", "top", 0.0), _row(0, "gradient", "middle", 0.9),
           _row(0, "gradient", "bottom", 1e-7)]
  where = parting.first_parting([table[2]], table, STRUCTURE, noise={"middle"})
  assert ("the first gradient that differs is bottom's (1e-07 relative), with the 2 "
          "gradient(s) above it the same bits but for 1 left out (a gradient 0 but for "
          "rounding) and the forward pass the same bits") in where.line()


def test_a_port_with_another_activation_is_located_between_its_layers():
  report = porting.compare(m.port(build_model=lambda: m.Net(activation="elu")), m.batches(1),
                           replicas=1, steps=1)
  (line,) = report.hints
  # The convolution and the batch norm the same bits; what follows them before the logits
  # (the port's activation) is where the forward passes part.
  assert line.startswith(
      "not explained: no known cause fits; the bits part at step 0 in the forward pass "
      "between conv/BatchNorm/beta's layer and logits/weights's: logits/weights's layer's "
      "input is "), line
  assert "while conv/BatchNorm/beta's output is the same bits" in line


def test_a_weight_cast_outside_the_towers_scope_is_read_by_its_layer():
  """A float16 script's custom getter (TF1's official ResNet) casts each weight where the
  variable scope puts it, outside the tower's name scope: the tower's convolution reads only
  the cast. Its layer was not found (no ReadVariableOp of the kernel in the tower but the
  penalty's), and the parting said "after the last layer compared"."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from porting import layer_probes  # pylint: disable=g-import-not-at-top
  v1 = tf.compat.v1

  def cast_getter(getter, name, *args, **kwargs):
    return tf.cast(getter(name, *args, **kwargs), tf.float16, name=name + "_cast")

  with tf.Graph().as_default() as graph:
    images = v1.placeholder(tf.float16, [1, 4, 4, 3])
    with tf.name_scope("tower_0"), v1.variable_scope("model", custom_getter=cast_getter):
      kernel = v1.get_variable("conv/kernel", [3, 3, 3, 2])
      out = tf.nn.conv2d(images, kernel, 1, "SAME")
    (variable,) = v1.global_variables()
    with tf.name_scope("tower_0"):
      tf.nn.l2_loss(variable)  # the penalty's read, in the tower: no layer input of its own
    assert not kernel.op.name.startswith("tower_0/")  # the cast sits outside the tower
    tower = [op for op in graph.get_operations() if op.name.startswith("tower_0/")]
    handles = {v.op.name for v in v1.global_variables()}
    found = layer_probes.probes(
        tower, lambda t: t.op.name if t.op.name in handles else None, {"model/conv/kernel"})
  assert found["model/conv/kernel"][0] == "Conv2D"
  assert found["model/conv/kernel"][1] is images and found["model/conv/kernel"][2] is out
