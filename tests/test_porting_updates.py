"""The porting kit on a PTB-style language model (tests/recurrent_port.py): where the two
updates part, an embedding's sparse gradient, TF1's RNN cells under Keras 3, and the
script's learning-rate variable through checkpoint conversions."""

import dataclasses
import json

import keras
import numpy as np
import pytest
import tensorflow as tf

import porting
from porting import diagnosis
from porting import diffs
from porting import tf1_layers
from tests import recurrent_port as m

v1 = tf.compat.v1
# TF1's RNN cells warn at construction (the binaries' screens filter it: tfbits.quiet).
pytestmark = pytest.mark.filterwarnings("ignore:`tf.nn.rnn_cell.")


def _causes(report):
  return [line for line in report.text().splitlines() if line.startswith("  cause:")]


def test_clipping_each_variable_is_located_in_the_update_not_called_rounding():
  """Keras's clipnorm (each variable by its own norm) against TF1's clip_by_global_norm:
  the gradients part by rounding only (an LSTM output used twice), the weights after the
  step by up to 1.8 relative. The kit named the gradients' rounding and said the port was not
  at fault; the faithful port (global_clipnorm) is that rounding and nothing more."""
  faithful = porting.compare(m.port(), m.batches(1, 1), replicas=1, steps=1)
  [line] = _causes(faithful)
  assert "gradient sums" in line and "The port is not at fault" in line
  wrong = porting.compare(m.port("clipnorm"), m.batches(1, 1), replicas=1, steps=1)
  [line] = _causes(wrong)
  assert "not at fault" not in line and "gradient sums" not in line
  assert line.startswith("  cause: not explained: no known cause fits; the bits part at step "
                         "0 in the update: the forward pass and every gradient at most ")
  assert ("further apart than the step's gradients move them: "
          "Model/RNN/basic_lstm_cell/bias") in line
  assert "a clipping of the gradients (by each variable's norm against by their global norm" in line
  weights = [r for r in wrong.rows
             if r.kind == "weight" and r.tf1 == "Model/RNN/basic_lstm_cell/bias"]
  gradients = [r for r in wrong.rows if r.kind == "gradient"]
  assert weights[0].diff.max_rel > 0.5 and max(r.diff.max_rel for r in gradients) < 1e-6


def test_an_embeddings_sparse_update_under_the_sum_reduction():
  """gradient_reduction "sum" hands Keras the tape's IndexedSlices: the kit failed (a
  TypeError reading them); now the report compares their dense sum, and where a word repeats
  in a step the row-by-row update's rounding is named; with no word twice, the same bits."""
  sparse = m.port(recurrent=False, clipped=False, reduction="sum")
  report = porting.compare(sparse, m.batches(1), replicas=1, steps=2)
  [line] = _causes(report)
  assert line.startswith("  cause: an embedding's sparse update: from step 0 Model/embedding "
                         "differ (up to ")
  assert ": for SGD, rounding. The port is not at fault" in line
  first = [r for r in report.rows if r.step == 0]
  assert all(r.diff.max_abs == 0 for r in first if r.kind == "gradient")
  assert 0 < max(r.diff.max_rel for r in first if r.kind == "weight") < 1e-6
  unique = porting.compare(sparse, m.batches(1, repeated=False), replicas=1, steps=2)
  assert unique.equal, unique.text()


def test_an_embeddings_gradient_summed_over_replicas_as_slices_is_named():
  """At N = 2 under "sum" the all-reduce concatenates the replicas' IndexedSlices, so a word
  both replicas hold is summed in another order than the towers' dense sums: the gradient
  itself 4 ULPs apart, which the kit left "not explained" (its sparse-update rule asked for
  equal gradients); MIGRATION said such a port is the same bits at powers of two."""
  sparse = m.port(recurrent=False, clipped=False, reduction="sum")
  report = porting.compare(sparse, m.batches(2), replicas=2, steps=1)
  apart = [r for r in report.rows if not r.diff.within(0)]
  assert {(r.kind, r.tf1) for r in apart} >= {("gradient", "Model/embedding")}
  assert all(r.tf1 == "Model/embedding" for r in apart) and max(
      r.diff.max_rel for r in apart) < 1e-6
  (line,) = report.hints
  assert line.startswith("an embedding's gradient summed as IndexedSlices: from step 0 "
                         "Model/embedding differ")
  assert "The port is not at fault" in line
  # No word in both replicas: the same bits.
  assert porting.compare(sparse, m.batches(2, repeated=False, per_replica=2), replicas=2,
                         steps=1).equal


def test_tf1_rnn_cells_run_under_keras_3_and_a_bound_stub_names_its_module():
  """tf.compat.v1.nn.rnn_cell is a Keras 3 stub in TensorFlow 2.16+; the kit routes it to
  tf_keras's cells while the towers build (the test above builds a BasicLSTMCell), and an
  error from the stub names that module, not tf.compat.v1.layers."""
  assert tf1_layers.rnn_cell().BasicLSTMCell.__module__.startswith("tf_keras")
  error = tf1_layers.translated(AttributeError("`MultiRNNCell` is not available with Keras 3."))
  assert "tf.compat.v1.nn.rnn_cell.MultiRNNCell" in str(error)
  assert "porting.tf1_layers.rnn_cell()" in str(error)
  error = tf1_layers.translated(AttributeError("`conv2d` is not available with Keras 3."))
  assert "tf.compat.v1.layers.conv2d" in str(error) and "tf1_layers.layers()" in str(error)


def _tf1_checkpoint(prefix, rate):
  """The script's own Saver checkpoint after it assigned its rate variable `rate`."""
  graph = tf.Graph()
  with graph.as_default():
    words, targets = (tf.constant(x) for x in m.batches(1, 1)[0])
    step = v1.train.get_or_create_global_step()
    optimizer = m.tf1_optimizer(step, clipped=False)
    loss, _ = m.tower_loss(words, targets, recurrent=False)
    train = optimizer.minimize(loss, global_step=step)
    assign_lr = optimizer._learning_rate.assign(rate)  # pylint: disable=protected-access
    with v1.Session() as sess:
      sess.run(v1.global_variables_initializer())
      sess.run(train)
      sess.run(assign_lr)
      return v1.train.Saver().save(sess, prefix)


def test_the_scripts_rate_variable_is_carried_both_ways(tmp_path):
  """The PTB script's `lr` variable was dropped silently: tf1_to_tf2 wrote Keras's initial
  rate, tf2_to_tf1 TF1's, and the next step ran at the wrong rate."""
  port = m.port(recurrent=False, clipped=False)
  example = m.batches(1, 1)[0]
  tf1 = _tf1_checkpoint(str(tmp_path / "tf1" / "model.ckpt"), 0.25)
  notes = []
  tf2 = porting.tf1_to_tf2(port, tf1, str(tmp_path / "tf2" / "ckpt"), example, notes=notes)
  assert notes == ["carried: lr (TF1's learning rate, 0.25) as the optimizer's learning_rate"]
  held = tf.train.load_checkpoint(tf2)
  rate = held.get_tensor("optimizer/_learning_rate/.ATTRIBUTES/VARIABLE_VALUE")
  assert rate == np.float32(0.25)
  notes = []
  back = porting.tf2_to_tf1(port, tf2, str(tmp_path / "back" / "model.ckpt"), example,
                            notes=notes)
  assert notes[0] == "carried: the optimizer's learning_rate (0.25) as lr"
  assert notes[1:] == [porting.to_tf1.not_held(5)]  # towers alone: the program's rest is said
  reader = tf.train.load_checkpoint(back)
  assert reader.get_tensor("lr") == np.float32(0.25) and reader.get_tensor("global_step") == 1
  # A comparison started from the checkpoint runs both sides at the run's rate.
  report = porting.compare(port, m.batches(1), replicas=1, steps=2, start_from=tf1)
  assert "learning rate per step: TF1 [0.25, 0.25]" in report.text()
  assert report.equal, report.text()


def test_a_keras_loss_objects_own_division_by_the_replicas_is_said():
  """Keras 3's loss objects divide their mean by the replicas in sync (its
  scale_loss_for_distribution): under gradient_reduction "mean" that is 1/N, and the advice
  to use the replica's own mean, which the port already did, could not be followed."""
  crossentropy = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

  def keras_loss(model, words, targets, global_batch):
    del global_batch
    logits = model(words)
    return crossentropy(targets, logits), logits

  port = m.port(recurrent=False, clipped=False)
  report = porting.compare(dataclasses.replace(port, replica_loss=keras_loss), m.batches(2, 1),
                           replicas=2, steps=1)
  [line] = _causes(report)
  assert line.startswith("  cause: every gradient is 0.5 x the towers' average (1/N, N = 2)")
  assert "a keras.losses object called in a replica divides its mean by the number of " \
         "replicas itself: with one, use gradient_reduction='sum'" in line
  summed = porting.compare(dataclasses.replace(port, replica_loss=keras_loss,
                                               gradient_reduction="sum"),
                           m.batches(2, 1), replicas=2, steps=1)
  assert not any("x the towers' average" in line for line in _causes(summed)), summed.text()


def test_a_rounding_cause_does_not_clear_what_later_steps_show_past_rounding():
  """A tiny BERT whose port decays LayerNorm's gamma too (TF1's optimizer excludes it) got
  only 'gradient sums ... The port is not at fault' at N = 2: the step-0 rounding the sums
  explain hid the weights 1.3e-5 apart two steps on. The line now says what it leaves."""
  report = porting.compare(m.port(), m.batches(1, 3), replicas=1, steps=3)
  [line] = _causes(report)
  assert "gradient sums" in line and line.endswith(
      "The port is not at fault; compare with a tolerance of that size (grappler as by "
      "default here)")
  # The same numbers, with the head's weights 1e-3 apart at step 2 (what a decay would do).
  rows = [r if (r.step, r.kind, r.tf1) != (2, "weight", "Model/softmax_w") else
          dataclasses.replace(r, diff=dataclasses.replace(r.diff, max_abs=1e-3, max_rel=1e-3))
          for r in report.rows]
  hints = diagnosis.causes(report.pairs, report.tf1, report.tf2, rows, 0.0, 1,
                           ("ClippedGradientDescent", "SGD"), "mean", onednn=True)
  [line] = [h for h in hints if h.startswith("gradient sums")]
  assert line.endswith("That rounding is not the port's fault, but from step 2 weight "
                       "Model/softmax_w is 0.001 relative apart, past rounding, which it need "
                       "not explain: compare over fewer steps and with one tower to see "
                       "whether anything else differs")


def test_differences_only_in_gradients_that_are_zero_but_for_rounding_are_said_as_such():
  """A tiny BERT's faithful port at N = 2 differed only in its attention key biases, whose
  gradient is 0 up to rounding (softmax ignores a shift of the scores): 0.4-2 relative, noise
  on both sides. The kit named a convolution's fused bias, then 'not explained' at the key
  bias. Here the embedding model's numbers, every row the same bits but one gradient 1e-9 of
  the step's largest and 0.5 relative apart."""
  report = porting.compare(m.port(recurrent=False, clipped=False), m.batches(1, 1),
                           replicas=1, steps=1)
  assert report.equal, report.text()
  largest = report.tf1.facts["largest_gradient"][0]
  noise = diffs.Diff(max_abs=1e-9 * largest, max_rel=0.5, ulps=1000)
  rows = [dataclasses.replace(r, diff=noise) if (r.kind, r.tf1) == ("gradient", "Model/softmax_b")
          else r for r in report.rows]
  hints = diagnosis.causes(report.pairs, report.tf1, report.tf2, rows, 0.0, 1,
                           ("GradientDescentOptimizer", "SGD"), "mean", onednn=True)
  assert hints == [
      "only gradients within rounding of 0 differ: Model/softmax_b (with the weights and "
      "slots they move), 0 up to rounding on both sides, as a bias's before a batch norm, or "
      "an attention key's bias's, is; every other row is within the tolerance. The port is "
      "not at fault there; their relative figures say nothing, and no tolerance covers them"]
  real = diffs.Diff(max_abs=1e-9 * largest, max_rel=1e-6, ulps=10)  # small, not noise
  rows = [dataclasses.replace(r, diff=real) if (r.kind, r.tf1) == ("gradient", "Model/softmax_b")
          else r for r in report.rows]
  hints = diagnosis.causes(report.pairs, report.tf1, report.tf2, rows, 0.0, 1,
                           ("GradientDescentOptimizer", "SGD"), "mean", onednn=True)
  assert not any(h.startswith("only gradients within rounding") for h in hints), hints


class _StepIgnored(v1.train.GradientDescentOptimizer):
  """BERT's AdamWeightDecayOptimizer's way: apply_gradients takes global_step and leaves it."""

  def apply_gradients(self, grads_and_vars, global_step=None, name=None):
    del global_step
    return super().apply_gradients(grads_and_vars, name=name)


def test_a_global_step_the_tf1_train_op_never_moves_is_said():
  """A tiny BERT whose optimizer ignores global_step (as BERT's own does) had TF1's rate 0
  at every step, and the kit listed guesses (decay_steps x N, a step count per replica, ...)
  that all missed it. The TF1 global step is read after each step."""
  port = dataclasses.replace(
      m.port(recurrent=False, clipped=False),
      tf1_optimizer=lambda step: _StepIgnored(v1.train.exponential_decay(1.0, step, 1, 0.5)),
      tf2_optimizer=lambda: keras.optimizers.SGD(
          keras.optimizers.schedules.ExponentialDecay(1.0, 1, 0.5)))
  report = porting.compare(port, m.batches(1, 3), replicas=1, steps=3)
  assert report.tf1.facts["global_steps"] == [0, 0, 0]
  assert report.hints[0] == (
      "the learning rate differs from step 1 (TF1 1, TF2 0.5): TF1's global step stays at 0 "
      "through the 3 steps (its train op does not increment it: an optimizer whose "
      "apply_gradients ignores global_step, as BERT's AdamWeightDecayOptimizer does; "
      "increment it there), so its schedule stays at that step's rate while TF2's iterations "
      "advance")


def test_a_rate_variable_a_scheduled_port_cannot_hold_is_said_both_ways(tmp_path):
  """Where the port's rate is a schedule, the TF1 script's `lr` has no place: said, with why,
  each way; the run's own TF1 checkpoint carries it back."""
  port = dataclasses.replace(
      m.port(recurrent=False, clipped=False), tf2_optimizer=lambda: keras.optimizers.SGD(
          keras.optimizers.schedules.ExponentialDecay(1.0, 10, 0.5)))
  example = m.batches(1, 1)[0]
  tf1 = _tf1_checkpoint(str(tmp_path / "tf1" / "model.ckpt"), 0.25)
  notes = []
  tf2 = porting.tf1_to_tf2(port, tf1, str(tmp_path / "tf2" / "ckpt"), example, notes=notes)
  assert notes == [
      "not carried (the kit pairs nothing on the TF2 side with them: variables the TF1 code "
      "makes beside the model and tf.compat.v1.train's slots, as an optimizer of its own "
      "keeps its moments): lr (TF1's learning rate, 0.25: the port's rate is a schedule of "
      "the step)"]
  notes = []
  back = porting.tf2_to_tf1(port, tf2, str(tmp_path / "back" / "model.ckpt"), example,
                            notes=notes)
  assert notes == [
      "written at their initial values (the kit pairs nothing in the TF2 checkpoint with "
      "them; --tf1_checkpoint carries them from the run's own): lr", porting.to_tf1.not_held(5)]
  assert tf.train.load_checkpoint(back).get_tensor("lr") == np.float32(m.RATE)
  notes = []
  again = porting.tf2_to_tf1(port, tf2, str(tmp_path / "again" / "model.ckpt"), example,
                             notes=notes, tf1_checkpoint=tf1)
  assert notes == [f"every variable of {tf1} written"]
  assert tf.train.load_checkpoint(again).get_tensor("lr") == np.float32(0.25)


def test_contrib_missing_on_tensorflow_1_is_not_said_to_be_tensorflow_2s(monkeypatch):
  """Recording on TensorFlow 1.15, tower code that reached contrib as tf.compat.v1.contrib
  was told 'TensorFlow 2 does not have' it and to record where its TensorFlow runs: it was."""
  error = AttributeError("module 'tensorflow._api.v1.compat.v1' has no attribute 'contrib'")
  monkeypatch.setattr(tf, "__version__", "1.15.5")
  assert str(tf1_layers.translated(error)) == (
      "the TF1 code calls contrib through a module TensorFlow 1.15.5 keeps none in (module "
      "'tensorflow._api.v1.compat.v1'): tf.contrib is its name here")
  monkeypatch.setattr(tf, "__version__", "2.21.0")
  assert str(tf1_layers.translated(error)).startswith(
      "the TF1 code calls tf.contrib, which TensorFlow 2 does not have")


def test_a_recurrent_layers_fault_is_located_with_what_its_probes_compare():
  """A port without BasicLSTMCell's forget bias: the forward pass parts (the forget gate acts
  from the second word on). Its probes compare each variable's first read, the cell's at the
  first word, where the forget gate multiplies a zero state: the line says so. And a clipping
  by two different global norms is no update that parts: the gradients already differ."""
  report = porting.compare(m.port("forget_bias"), m.batches(1, 1), replicas=1, steps=1)
  [line] = _causes(report)
  assert line.startswith("  cause: not explained: no known cause fits; the bits part at step "
                         "0 in the forward pass")
  assert ("Model/RNN/basic_lstm_cell/bias, Model/RNN/basic_lstm_cell/kernel are read up to 4 "
          "times in the forward pass (a recurrent layer's steps, or weights shared): the "
          "layers are compared at their first read") in line
  assert "in the update" not in line


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_the_scripts_clipping_between_its_gradients_and_their_update_is_a_port_field():
  """The PTB and BERT scripts clip between tf.gradients and apply_gradients; the kit builds
  that train op, and both ports had to move the clip into an optimizer subclass.
  Port(tf1_gradients=...) takes the script's lines as they are: the faithful port differs
  by the gradient sums' rounding only, as with the subclass (grappler may round those sums
  another way in the other graph), and a per-variable clip is still located in the update."""
  plain = lambda step: v1.train.GradientDescentOptimizer(v1.Variable(m.RATE, trainable=False,
                                                                    name="lr"))
  for fault in (None, "clipnorm"):
    hook = porting.compare(dataclasses.replace(m.port(fault), tf1_optimizer=plain,
                                               tf1_gradients=m.clip_by_global_norm),
                           m.batches(1, 2), replicas=1, steps=2)
    assert ("not compared: what tf1_gradients makes of the towers' combined gradients (a "
            "clipping or any other transform): the kit does not read its code (TF2's "
            f"clipping: {'global_clipnorm' if fault is None else 'clipnorm'} 0.05); "
            "the steps' numbers compare them") in hook.text()
    [line] = _causes(hook)
    if fault is None:
      assert line.startswith("  cause: gradient sums") and "The port is not at fault" in line
    else:
      assert "the bits part at step 0 in the update" in line
  with pytest.raises(porting.PortError) as raised:
    porting.compare(dataclasses.replace(m.port(), tf1_gradients=lambda gv: gv[:1]),
                    m.batches(1, 1), replicas=1, steps=1)
  assert str(raised.value).startswith("tf1_gradients must return the [(gradient, variable)]")


def test_tf2s_clipping_is_read_where_the_tf1_optimizer_is_a_class_the_kit_does_not_read():
  """BERT's script clips in its own lines and steps with its own optimizer class: the line
  said "TF2's clipping: none" of a port clipping by the global norm (it was read from the
  settings' mismatches, which a class the kit does not read has none of)."""

  class ScriptDescent(v1.train.GradientDescentOptimizer):  # the script's own class
    pass

  own = lambda step: ScriptDescent(v1.Variable(m.RATE, trainable=False, name="lr"))
  report = porting.compare(dataclasses.replace(m.port(), tf1_optimizer=own,
                                               tf1_gradients=m.clip_by_global_norm),
                           m.batches(1, 1), replicas=1, steps=1)
  text = report.text().replace("\n    ", " ")
  assert "the kit does not read its code (TF2's clipping: global_clipnorm 0.05)" in text, text
  assert "TF1 ScriptDescent is not an optimizer the kit reads" in text


def test_averaged_sparse_gradients_are_the_towers_to_the_bit():
  """gradient_reduction "mean" at N = 2 with an embedding: replica_mean all-reduced the
  IndexedSlices (rows concatenated, then summed) where average_gradients makes each tower's
  dense first: 1 ULP apart. MIGRATION says "mean" is the same bits at every N."""
  report = porting.compare(m.port(recurrent=False, clipped=False), m.batches(2, 3),
                           replicas=2, steps=3)
  assert report.equal, report.text()


def test_an_embeddings_sparse_update_by_keras_adagrad_is_no_rounding():
  """Keras 3's Adagrad handed IndexedSlices adds each part's square to a repeated row's
  accumulator, where TF1's adds the square of the row's sum: 1% apart after one step of a
  wide & deep model, and the kit said 'not explained' (with oneDNN advice). Named now, with
  porting.TF1Adagrad as the way that updates as TF1."""
  tf1_adagrad = lambda step: v1.train.AdagradOptimizer(0.5)
  keras_adagrad = lambda: keras.optimizers.Adagrad(0.5, initial_accumulator_value=0.1,
                                                   epsilon=0.0)
  port = dataclasses.replace(m.port(recurrent=False, clipped=False, reduction="sum"),
                             tf1_optimizer=tf1_adagrad, tf2_optimizer=keras_adagrad)
  report = porting.compare(port, m.batches(1), replicas=1, steps=1)
  [line] = _causes(report)
  assert line.startswith("  cause: an embedding's sparse update: from step 0 Model/embedding")
  assert "holds the sum of the parts' squares where TF1 holds the square of their sum" in line
  slots = [r for r in report.rows if r.kind == "slot"]
  assert max(r.diff.max_rel for r in slots) > 1e-3
  # The same numbers with an update that squares nothing (Lion's: a sign): past rounding,
  # not this cause.
  hints = diagnosis.causes(report.pairs, report.tf1, report.tf2, report.rows, 0.0, 1,
                           ("AdagradOptimizer", "Lion"), "sum", onednn=True)
  assert not any(h.startswith("an embedding's sparse update") for h in hints), hints
  kit = porting.compare(dataclasses.replace(port, tf2_optimizer=lambda: porting.TF1Adagrad(0.5)),
                        m.batches(1), replicas=1, steps=2)
  assert kit.equal, kit.text()


def test_tf1_state_beside_the_model_and_slots_is_said_not_compared():
  """BERT's AdamWeightDecayOptimizer keeps its moments as get_variables of its own, not
  tf.compat.v1.train slots: no row compared them and nothing said so."""
  def own_state(step):
    del step
    v1.Variable(0.0, trainable=False, name="state_of_mine")
    return v1.train.GradientDescentOptimizer(m.RATE)

  port = dataclasses.replace(m.port(recurrent=False, clipped=False), tf1_optimizer=own_state)
  report = porting.compare(port, m.batches(1, 1), replicas=1, steps=1)
  assert ("1 TF1 variable(s) beside the model and tf.compat.v1.train's slots (state_of_mine: "
          "an optimizer of the team's own keeps its state so): no row compares them; the "
          "weights' rows compare what they do") in report.unread
  plain = porting.compare(m.port(), m.batches(1, 1), replicas=1, steps=1)  # lr: the rate
  assert not [line for line in plain.unread if "beside the model" in line]


def test_a_record_keeps_what_the_live_tf1_side_says_is_not_compared(tmp_path):
  """BERT's optimizer recorded under TensorFlow 1.15: its own apply_gradients and its moments
  beside the model were said against the live towers, and nothing against the record."""
  from porting import record  # pylint: disable=g-import-not-at-top

  class OwnDescent(v1.train.GradientDescentOptimizer):
    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
      return super().apply_gradients(grads_and_vars, global_step, name)

  def own_state(step):
    del step
    v1.Variable(0.0, trainable=False, name="state_of_mine")
    return OwnDescent(m.RATE)

  port = dataclasses.replace(m.port(recurrent=False, clipped=False), tf1_optimizer=own_state)
  live = porting.compare(port, m.batches(1, 1), replicas=1, steps=1)
  path = record.write(port, m.batches(1, 1), str(tmp_path / "record"), replicas=1, steps=1)
  replayed = porting.compare(port, record=str(tmp_path / "record"), steps=1)
  assert path.endswith("record.json")
  said = [line for line in live.unread if "state_of_mine" in line or "OwnDescent" in line]
  assert len(said) == 2 and said == [line for line in replayed.unread if line in said], (
      live.unread, replayed.unread)
  assert "TF1 OwnDescent's own apply_gradients runs as written" in " ".join(said)
  # A record written before records kept them: said so, not left out.
  header = tmp_path / "record" / "record.json"
  old = {k: v for k, v in json.loads(header.read_text()).items()
         if k not in ("own_methods", "beside")}
  header.write_text(json.dumps(old))
  older = porting.compare(port, record=str(tmp_path / "record"), steps=1)
  assert [line for line in older.unread if "record was written before" in line] == [
      "what the TF1 side holds beside the model and whether its optimizer's own "
      "compute_gradients or apply_gradients ran: the record was written before records kept "
      "them (record it again to see them)"], older.unread


def test_gradient_sums_are_not_named_against_a_record_from_another_tensorflow():
  """A text CNN recorded on TF 1.15 parted at its embedding with one conv (no sum) as with two,
  and the kit named "gradient sums ... TF1's tf.gradients and the tape add in another order"
  beside the other runtime: with the TF1 side's kernels another TensorFlow's, that order
  cannot be told from theirs. The same record said as made here keeps the sums' line."""
  import json  # pylint: disable=g-import-not-at-top
  import uuid  # pylint: disable=g-import-not-at-top
  from porting import record  # pylint: disable=g-import-not-at-top
  path = f"ram://record-{uuid.uuid4().hex}"
  header = record.write(m.port(), m.batches(1, 1), path, replicas=1, steps=1)
  here = porting.compare(m.port(), record=path, steps=1)
  assert [h for h in here.hints if h.startswith("gradient sums")], here.hints
  with tf.io.gfile.GFile(header) as f:
    recorded = json.load(f)
  recorded["machine"] = recorded["machine"].replace(f"TensorFlow {tf.__version__},",
                                                    "TensorFlow 1.15.5,")
  tf.io.gfile.remove(header)  # ram:// opened for writing keeps what was there
  with tf.io.gfile.GFile(header, "w") as f:
    json.dump(recorded, f)
  there = porting.compare(m.port(), record=path, steps=1)
  assert not [h for h in there.hints if "gradient sums" in h], there.hints
  assert [h for h in there.hints if h.startswith("the TF1 side was recorded elsewhere: "
                                                  "TensorFlow 1.15.5 there")], there.hints
