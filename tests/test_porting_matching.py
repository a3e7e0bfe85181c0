"""How the porting kit pairs the two sides' variables and slots and measures their
differences: by name, then by shape and creation order; what it cannot pair is one line
naming every variable, unless the port's variable_map leaves a TF1-only variable out; a
difference is counted in ULPs. The model is tests/bn_momentum_port.py."""

import numpy as np
import pytest
import tensorflow as tf

import porting
from porting import diffs
from porting import matching
from tests import bn_momentum_port as m

# pytest resets warning filters per test; the model's own filter does not outlive it.
pytestmark = pytest.mark.filterwarnings(
    "ignore:`tf.layers.batch_normalization` is deprecated")


def test_ulps_count_the_floats_between_two_values():
  a = np.float32([1.0, -2.0, 0.0, 3.0])
  b = a.copy()
  b[1] = np.nextafter(np.float32(-2.0), np.float32(0.0))
  b[3] = np.nextafter(np.nextafter(np.float32(3.0), np.float32(9)), np.float32(9))
  d = diffs.diff(a, b)
  assert d.ulps == 2 and not d.within(0) and d.within(1e-6)
  assert diffs.diff(np.float32([0.0]), np.float32([-0.0])).within(0)  # the same value
  assert diffs.diff(a, a[:2]).shape_mismatch


TF1 = [("conv1/kernel", (3, 3, 3, 8)), ("bn1/gamma", (8,)), ("bn1/beta", (8,)),
       ("logits/kernel", (8, 10)), ("logits/bias", (10,))]


def test_variables_pair_by_name_then_by_shape_and_creation_order():
  by_name = [("net/logits/bias", (10,)), ("net/conv1/kernel", (3, 3, 3, 8)),
             ("net/bn1/beta", (8,)), ("net/bn1/gamma", (8,)), ("net/logits/kernel", (8, 10))]
  assert matching.match(TF1, by_name) == [(n, "net/" + n) for n, _ in TF1]
  keras_names = [("conv2d/kernel", (3, 3, 3, 8)), ("batch_normalization/gamma", (8,)),
                 ("batch_normalization/beta", (8,)), ("dense/kernel", (8, 10)),
                 ("dense/bias", (10,))]
  assert [b for _, b in matching.match(TF1, keras_names)] == [n for n, _ in keras_names]


def test_unmatched_variables_are_one_line_naming_every_one():
  # gamma and beta have the same shape and, with a variable missing, no order to go by.
  other = [("conv2d/kernel", (3, 3, 3, 8)), ("bn/scale", (8,)), ("bn/offset", (8,)),
           ("dense/kernel", (8, 10))]
  with pytest.raises(porting.PortError) as e:
    matching.match(TF1, other)
  message = str(e.value)
  assert "\n" not in message
  for name in ("bn1/gamma", "bn1/beta", "logits/bias", "bn/scale", "bn/offset"):
    assert name in message
  assert "conv1/kernel" not in message  # paired: its shape occurs once on each side
  explicit = {"bn1/gamma": "bn/scale", "bn1/beta": "bn/offset"}
  with pytest.raises(porting.PortError, match=r"TF1 logits/bias \[10\]; TF2 none"):
    matching.match(TF1, other, explicit)
  assert matching.match(TF1[:-1], other, explicit)[1:3] == list(explicit.items())
  with pytest.raises(porting.PortError, match="names TF2 'bn/gamma', which the port"):
    matching.match(TF1, other, {"bn1/gamma": "bn/gamma"})


def test_a_slot_belongs_to_the_longest_variable_name_it_starts_with():
  # Keras names a slot '<variable path, / as _>_<kind>': 'dense_kernel_scale_momentum' is
  # dense/kernel_scale's momentum. Before: also dense/kernel's slot of kind 'scale_momentum'.
  from porting import tf2_replicas  # pylint: disable=g-import-not-at-top
  variables = [type("Variable", (), {"path": p})() for p in ("dense/kernel",
                                                             "dense/kernel_scale")]
  slots = [type("Slot", (), {"name": n})() for n in ("dense_kernel_momentum",
                                                     "dense_kernel_scale_momentum")]
  optimizer = type("Optimizer", (), {"variables": slots})()
  assert tf2_replicas.slot_variables(optimizer, variables) == {
      ("dense/kernel", "momentum"): slots[0], ("dense/kernel_scale", "momentum"): slots[1]}


def _tower_loss_with_a_counter(images, labels):
  """The tower as before, plus a variable of the TF1 code's own that the port has no
  counterpart of (as the original's loss averages were)."""
  tf.compat.v1.get_variable("tower_counter", [], initializer=tf.compat.v1.zeros_initializer(),
                            trainable=False)
  return m.tower_loss(images, labels)


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_a_tf1_only_variable_is_an_error_until_the_map_leaves_it_out():
  with pytest.raises(porting.PortError, match=r"TF1 tower_counter \[\]; TF2 none"):
    porting.compare(m.port(tower_loss=_tower_loss_with_a_counter), m.batches(2), replicas=2,
                    steps=1)
  port = m.port(tower_loss=_tower_loss_with_a_counter, variable_map={"tower_counter": None})
  report = porting.compare(port, m.batches(2), replicas=2, steps=2)
  plain = porting.compare(m.port(), m.batches(2), replicas=2, steps=2)
  assert report.left_out == ["tower_counter"]
  assert "not compared (variable_map): tower_counter" in report.text().splitlines()[0]
  assert [(r.kind, r.tf1, r.diff) for r in report.rows] == [
      (r.kind, r.tf1, r.diff) for r in plain.rows]


def test_creation_order_never_pairs_gamma_with_beta():
  """tf.layers' and tf_slim's default batch norm make gamma before beta, TF1BatchNorm (as
  tf.contrib.layers.batch_norm's own path) beta before gamma: with names that do not pair,
  creation order paired TF1's gamma with the port's beta, started TF1 from swapped weights
  and reported a cause that was not there (a MobileNet port through tf_slim)."""
  tf1 = [("Conv2d_0/weights", (3, 3, 3, 8)), ("Conv2d_0/BatchNorm/gamma", (8,)),
         ("Conv2d_0/BatchNorm/beta", (8,)), ("Conv2d_0/BatchNorm/moving_mean", (8,)),
         ("Conv2d_0/BatchNorm/moving_variance", (8,)), ("Logits/weights", (8, 10)),
         ("Logits/biases", (10,))]
  tf2 = [("net/c0/kernel", (3, 3, 3, 8)), ("net/c0_bn/beta", (8,)), ("net/c0_bn/gamma", (8,)),
         ("net/c0_bn/moving_mean", (8,)), ("net/c0_bn/moving_variance", (8,)),
         ("net/logits/kernel", (8, 10)), ("net/logits/bias", (10,))]
  pairs = dict(matching.match(tf1, tf2))
  for a, b in pairs.items():
    assert a.rsplit("/", 1)[-1].replace("weights", "kernel").replace("biases", "bias") == \
        b.rsplit("/", 1)[-1], (a, b)
  # Where the roles cannot be lined up, nothing is paired by guess: one line, as any unmatched.
  with pytest.raises(porting.PortError, match="variables left unmatched"):
    matching.match(tf1[:3], [tf2[0], ("net/c0_bn/beta", (8,)), ("net/c0_bn/w", (8,))])


def test_a_keras_lstm_against_tf1s_lstm_cell_says_why_no_map_pairs_them():
  """A PTB port with Keras's LSTM: 'give the port a variable_map', and the map then gave
  'the shapes differ'; neither said that the two keep their kernels in other layouts."""
  tf1 = [("rnn/basic_lstm_cell/kernel", (64, 128)), ("rnn/basic_lstm_cell/bias", (128,))]
  tf2 = [("lstm/lstm_cell/kernel", (32, 128)), ("lstm/lstm_cell/recurrent_kernel", (32, 128)),
         ("lstm/lstm_cell/bias", (128,))]
  for explicit in (None, {"rnn/basic_lstm_cell/kernel": "lstm/lstm_cell/kernel",
                          "rnn/basic_lstm_cell/bias": "lstm/lstm_cell/bias"}):
    with pytest.raises(porting.PortError) as raised:
      matching.match(tf1, tf2, explicit)
    assert str(raised.value).endswith(
        "(TF1's BasicLSTMCell and LSTMCell keep one kernel over [input, h] with the gates in "
        "the order i, j, f, o, and add the forget bias in the step; Keras's LSTM keeps a "
        "kernel and a recurrent_kernel, the gates in the order i, f, c, o: the kit pairs "
        "whole variables, so port the cell as TF1 computes it: one kernel, its gate order and "
        "forget bias (MIGRATION.md, TF1's RNN cells))")


def test_two_port_variables_of_one_name_are_said_not_collapsed():
  """Keras layers built outside the model's scope can share a path: the unmatched line listed
  the two as one."""
  tf1 = [("a/query/kernel", (4, 4)), ("b/query/kernel", (4, 4))]
  tf2 = [("query/kernel", (4, 4)), ("query/kernel", (4, 4))]
  with pytest.raises(porting.PortError) as raised:
    matching.match(tf1, tf2)
  assert str(raised.value).startswith(
      "the port's model holds several variables named query/kernel")


def test_a_size_set_otherwise_is_not_sent_to_the_variable_map():
  """A wide & deep port with 51 hash buckets against TF1's 50 was told to give a
  variable_map, which pairs names and cannot make the sizes alike."""
  tf1 = [("input_layer/occupation_embedding/embedding_weights", (50, 8))]
  tf2 = [("deep/occupation_embedding/embeddings", (51, 8))]
  with pytest.raises(porting.PortError) as raised:
    matching.match(tf1, tf2)
  assert str(raised.value).endswith(
      "(as many left on each side, of the same ranks, other sizes: a variable_map pairs names "
      "and cannot pair those; a size set otherwise on one side, as a vocabulary's, hash "
      "buckets' or units' count, is to be set alike)")


def test_a_keras_gru_against_tf1s_gru_cell_says_why_no_map_pairs_them():
  """A GRU classifier ported with Keras's GRU: 'give the port a variable_map', then 'the
  shapes differ', with no word of the two layouts or of reset_after (the LSTM's line existed)."""
  tf1 = [("rnn/gru_cell/gates/kernel", (16, 20)), ("rnn/gru_cell/gates/bias", (20,)),
         ("rnn/gru_cell/candidate/kernel", (16, 10)), ("rnn/gru_cell/candidate/bias", (10,))]
  tf2 = [("gru/gru_cell/kernel", (6, 30)), ("gru/gru_cell/recurrent_kernel", (10, 30)),
         ("gru/gru_cell/bias", (2, 30))]
  for explicit in (None, {"rnn/gru_cell/gates/kernel": "gru/gru_cell/kernel"}):
    with pytest.raises(porting.PortError) as raised:
      matching.match(tf1, tf2, explicit)
    assert "Keras's GRU keeps a kernel, a recurrent_kernel and a bias in the order z, r, h" in (
        str(raised.value))
    assert "(reset_after=True) applies the reset gate after the recurrent matmul" in (
        str(raised.value))


def test_a_kernel_apart_only_by_a_dimension_of_1_says_so():
  """A text CNN's conv2d over [seq, emb, 1] ported as Conv1D: 'the shapes differ' and no more."""
  with pytest.raises(porting.PortError) as raised:
    matching.match([("conv/W", (3, 8, 1, 4))], [("conv1d/kernel", (3, 8, 4))],
                   {"conv/W": "conv1d/kernel"})
  assert str(raised.value).startswith(
      "TF1 'conv/W' [3, 8, 1, 4] is paired with TF2 'conv1d/kernel' [3, 8, 4]: the shapes differ "
      "(the same values but for dimensions of 1, as a Keras Conv1D's kernel [k, in, out]")


def test_a_kernel_of_as_many_values_in_another_layout_says_so():
  """A Transformer's Q kernel from tf.layers.dense [8, 8] against Keras's MultiHeadAttention
  [8, 2, 4]: 'the shapes differ' and no more."""
  with pytest.raises(porting.PortError) as raised:
    matching.match([("attention/q/kernel", (8, 8))], [("mha/query/kernel", (8, 2, 4))],
                   {"attention/q/kernel": "mha/query/kernel"})
  assert "the shapes differ (as many values in another layout, as Keras's MultiHeadAttention" \
      in str(raised.value)
