"""A run stopped and resumed charts as the same run uninterrupted, loss averages included.

The original's loss averages (ExponentialMovingAverage(0.9) of each loss term, the scalars
`total_loss`, `cross_entropy`, `local3/weight_loss`, `local4/weight_loss`) restarted from 0 at
every resume while they were not checkpointed: a V down to a tenth of the loss at the resume
step, and the fifth digit still off 100 steps later (issue 63). Each trainer runs STEPS steps
in one go and again stopped at STOP (its one checkpoint, as a Ctrl-C there saves) and resumed;
every scalar the step writes must be the same bits at every step. The loops run in-process
(tests.helpers.train_tf2 / train_v1) on 2 replicas (towers).
"""

import numpy as np
import pytest

from cifar10 import checkpoints
from cifar10 import config
from cifar10 import losses
from equivalence import runs as equivalence_runs
from tests import helpers

pytestmark = pytest.mark.slow
STEPS, STOP = 6, 3
TRAINERS = {"tf2": lambda c: helpers.train_tf2(c, ["/cpu:0", "/cpu:1"], "mirrored"),
            "v1": lambda c: helpers.train_v1(c, 2)}


def _config(train_dir, max_steps):
  # Summaries at every step, the resume step among them; no checkpoint but the run's last.
  return config.TrainConfig(train_dir=str(train_dir), max_steps=max_steps, batch_size=4,
                            seed=3, dataset="synthetic", save_summaries_steps=1,
                            save_checkpoint_steps=1000, log_frequency=STEPS)


def _scalars(train_dir):
  """{tag: {step: value}} of the run's scalar summaries (histograms and the driver's timing
  and settings left out)."""
  return {tag: steps for tag, steps in equivalence_runs.summaries(train_dir).items()
          if None not in steps.values()}


@pytest.fixture(name="runs", scope="module")
def fixture_runs(tmp_path_factory):
  """{trainer: (uninterrupted folder, stopped-and-resumed folder)}."""
  out = {}
  for name, train in TRAINERS.items():
    root = tmp_path_factory.mktemp(name)
    assert train(_config(root / "whole", STEPS)) == STEPS
    assert train(_config(root / "resumed", STOP)) == STOP
    assert train(_config(root / "resumed", STEPS)) == STEPS
    out[name] = (root / "whole", root / "resumed")
  return out


@pytest.mark.parametrize("trainer", sorted(TRAINERS))
def test_a_resumed_run_charts_every_scalar_as_the_uninterrupted_one(runs, trainer):
  whole, resumed = (_scalars(folder) for folder in runs[trainer])
  # The loss averages first, for the message that names them (the report's symptom).
  for term in losses.LOSS_TERMS:
    for tag in (term, term + losses.RAW_TAG_SUFFIX):
      assert list(whole[tag]) == list(range(STEPS)), tag
      assert resumed[tag] == whole[tag], (tag, resumed[tag], whole[tag])
  assert resumed == whole  # loss, learning rate, precision and sparsities too
  # The checkpoints hold the loss averages, bit-identical between the two folders.
  ends = [checkpoints.read(str(folder)) for folder in runs[trainer]]
  assert sorted(ends[0].loss_averages) == sorted(losses.LOSS_TERMS)
  for term in losses.LOSS_TERMS:
    assert ends[1].loss_averages[term].tobytes() == ends[0].loss_averages[term].tobytes(), term


def test_the_two_trainers_checkpoints_compare_equivalent_loss_averages_included(runs, capsys):
  capsys.readouterr()
  result = helpers.call("equivalence.checkpoints", str(runs["v1"][1]), str(runs["tf2"][1]))
  printed = capsys.readouterr().out
  assert result.returncode == 0 and printed.endswith("\nEQUIVALENT\n"), printed[-3000:]
  assert "loss averages (bit-identical)" in printed
  assert all(f"  {term} " in printed for term in losses.LOSS_TERMS), printed


def _without_loss_averages(monkeypatch, trainer):
  """The checkpoints of before: the same code, with saves that leave the averages out."""
  if trainer == "tf2":
    from strategies import state  # pylint: disable=g-import-not-at-top
    checkpoint = state.TrainingState.checkpoint
    monkeypatch.setattr(state.TrainingState, "checkpoint",
                        lambda self, loss_averages=True: checkpoint(self, False))
  else:
    from compat_v1 import loop  # pylint: disable=g-import-not-at-top
    build_train_graph = loop.build_train_graph
    monkeypatch.setattr(loop, "build_train_graph", lambda *args, **kwargs: build_train_graph(
        *args, **kwargs)._replace(loss_averages={}))


@pytest.mark.parametrize("trainer", sorted(TRAINERS))
def test_a_checkpoint_from_before_resumes_with_the_averages_from_0(runs, trainer, tmp_path,
                                                                   monkeypatch, caplog):
  train = TRAINERS[trainer]
  with monkeypatch.context() as old:
    _without_loss_averages(old, trainer)
    assert train(_config(tmp_path, STOP)) == STOP
  assert checkpoints.read(str(tmp_path)).loss_averages == {}
  caplog.set_level("INFO")
  assert train(_config(tmp_path, STEPS)) == STEPS
  said = [r.getMessage() for r in caplog.records if "holds no loss averages" in r.getMessage()]
  assert len(said) == 1 and all(r.levelname != "WARNING" for r in caplog.records
                                if "loss average" in r.getMessage()), said
  # The averages start from 0 at the resume step, as they always did (tf.compat.v1's
  # `average -= (average - value) * (1 - decay)` from 0); the raw terms are the run's own.
  whole, resumed = _scalars(runs[trainer][0]), _scalars(tmp_path)
  zero, one_minus_decay = np.float32(0), np.float32(1) - np.float32(losses.LOSS_AVERAGE_DECAY)
  for term in losses.LOSS_TERMS:
    raw = resumed[term + losses.RAW_TAG_SUFFIX]
    assert raw == whole[term + losses.RAW_TAG_SUFFIX], term
    average = zero - (zero - np.float32(raw[STOP])) * one_minus_decay
    assert np.float32(resumed[term][STOP]) == average != whole[term][STOP], term
  # Nothing else moves: the weights and their moving averages end with the bits of the
  # uninterrupted run.
  end, expected = checkpoints.read(str(tmp_path)), checkpoints.read(str(runs[trainer][0]))
  assert end.global_step == expected.global_step == STEPS
  for name in expected.weights:
    np.testing.assert_array_equal(end.weights[name], expected.weights[name], err_msg=name)
    np.testing.assert_array_equal(end.averages[name], expected.averages[name], err_msg=name)
