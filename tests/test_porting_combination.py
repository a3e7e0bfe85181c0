"""How the TF1 side combines its towers, as the script writes it (porting.combination): slim's
model_deploy clones compared as train_image_classifier.py deploys them, and the causes read
against the script's combination, never against an assumed average of the towers."""

import dataclasses
import functools

import pytest
import tensorflow as tf

import porting
from porting import combination
from porting.errors import PortError
from tests import model_deploy_port as m

pytestmark = pytest.mark.filterwarnings("ignore:`tf.layers.", "ignore:`layer.apply`",
                                          "ignore::DeprecationWarning")
v1 = tf.compat.v1


def _causes(report):
  return [line for line in report.text().splitlines() if line.startswith("  cause: ")]


def test_the_forms_say_what_their_scripts_do():
  n = 4
  assert (combination.AVERAGE_GRADIENTS.tower_scale(n), combination.AVERAGE_GRADIENTS.
          update_scale(n)) == (1.0, 1.0)
  deploy = combination.MODEL_DEPLOY
  assert (deploy.loss, deploy.regularization, deploy.gradients, deploy.update_ops) == (
      "divided", "first_tower", "sum", "first_tower")
  # Each clone's loss / N, summed: the towers' mean. One clone: no division (model_deploy's
  # `if num_clones > 1`).
  assert (deploy.tower_scale(n), deploy.update_scale(n), deploy.tower_scale(1)) == (0.25, 1.0, 1.0)
  assert porting.replicate_model_fn().update_scale(n) == 1.0  # SUM_BY_NONZERO_WEIGHTS divides
  summed = porting.replicate_model_fn("weighted_sum")
  assert (summed.loss, summed.update_scale(n), summed.update_ops) == ("as_written", 4.0,
                                                                      "all_towers")
  assert combination.from_record({"update_ops": "last_tower"}) == dataclasses.replace(
      combination.AVERAGE_GRADIENTS, update_ops="last_tower")  # a record made before
  assert combination.from_record({"combination": deploy.record()}) == deploy


def test_a_sum_times_the_reciprocal_is_the_scripts_mean_not_a_division():
  """tf_cnn_benchmarks' parameter_server averages by add_n, then x 1/N (float32); the kit ran
  average_gradients' reduce_mean for it, which divides: other bits at N = 3."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  from porting import tf1_update  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)
  grads = [rng.normal(size=1000).astype(np.float32) for _ in range(3)]
  towers = [[(tf.constant(g), "w")] for g in grads]
  scaled = porting.TowerCombination(gradients="scaled_sum")
  [(got, name)] = tf1_update.combine(scaled, towers)
  expected = (grads[0] + grads[1] + grads[2]) * np.float32(1.0 / 3)
  assert name == "w" and got.numpy().tobytes() == expected.tobytes()
  [(mean, _)] = tf1_update.combine(porting.AVERAGE_GRADIENTS, towers)
  assert not np.array_equal(mean.numpy(), got.numpy())  # the division rounds otherwise
  assert (scaled.towers_share(3), scaled.update_scale(3), scaled.loss_factor(3, "sum")) == (
      1 / 3, 1.0, 3)
  assert "the towers' gradients summed, then multiplied by 1/3" in scaled.describe(3)


def test_a_tower_loss_that_asks_for_its_tower_and_the_towers_is_told_them():
  """tf_cnn_benchmarks adds its weight decay on the last device, x N: the tower function
  needs both, and the kit told neither (a port closed over N, right at one N only)."""
  told = []

  def tower_loss(scope, images, labels, tower, towers):
    told.append((scope, tower, towers))
    return m.tower_loss(scope, images, labels)
  porting.compare(m.port(tower_loss=tower_loss), m.batches(3, steps=1), replicas=3, steps=1)
  assert told == [("tower_0/", 0, 3), ("tower_1/", 1, 3), ("tower_2/", 2, 3)]


def test_a_combination_the_kit_cannot_run_is_refused_in_one_line():
  with pytest.raises(PortError, match="TowerCombination's gradients must be one of mean, sum, "
                     "scaled_sum, got 'median'"):
    porting.TowerCombination(gradients="median")
  with pytest.raises(PortError, match="loss_reduction must be a tf.compat.v1.losses.Reduction"):
    porting.replicate_model_fn("none")
  with pytest.raises(PortError, match="tf1_towers must be a porting.TowerCombination"):
    m.port(tf1_towers="model_deploy")
  # update_ops named on the Port still decides whose updates run.
  assert m.port(update_ops="last_tower").combination.update_ops == "last_tower"
  assert m.port().combination == porting.MODEL_DEPLOY


def test_model_deploys_clones_compared_as_written_are_the_same_bits():
  """The clone loss / N, the regularization on clone 0, the clones' gradients summed, against
  the port's global-batch mean with the regularization on replica 0: every row the same bits
  (before, the kit averaged the clones and named a false cause)."""
  report = porting.compare(m.port(), m.batches(2), replicas=2, steps=3)
  assert report.equal, report.text()
  assert report.tf1.facts["combination"] == porting.MODEL_DEPLOY.record()
  assert report.tf1.facts["regularized_towers"] == [0]
  assert {r.kind for r in report.rows} == {"loss", "outputs", "gradient", "weight", "slot"}


def test_the_regularization_on_other_replicas_is_named_whatever_tower_0_holds():
  """model_deploy's first clone against TF2's share on every replica: losses apart by +-R/2,
  the update the same."""
  report = porting.compare(
      m.port(replica_loss=functools.partial(m.replica_loss, placement="every_replica")),
      m.batches(2), replicas=2, steps=1)
  [line] = _causes(report)
  assert "is tower_0 +1/2 R, tower_1 -1/2 R, summing to 0" in line, line
  assert "TF1 adds it to tower 0's loss only (model_deploy)" in line
  assert "on replica 0 only" in line
  assert not any(r.kind == "gradient" and r.diff.max_rel > 1e-5 for r in report.rows)


def test_the_whole_regularization_on_every_replica_is_the_ports_count_not_the_scripts():
  """A port adding all of R on each replica against model_deploy's first clone. Before (a
  team's LeNet port, found by trying it): a first cause told the team the TF1 towers after the
  first count their losses otherwise and 'the TF1 code differs by tower, not the port': the
  script's own combination, which the kit runs, blamed."""
  report = porting.compare(
      m.port(replica_loss=functools.partial(m.replica_loss, placement="whole_on_every_replica")),
      m.batches(2), replicas=2, steps=1)
  [line] = _causes(report)
  assert line.startswith("  cause: the regularization is counted 2 times"), line
  assert "TF1 adds it to tower 0's loss only (model_deploy)" in line, line
  assert "on replica 0 only" in line
  assert "not the port" not in line


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_a_factor_in_tf1_gradients_is_said_not_blamed_on_the_port():
  """The clone loss written into tower_loss and the sum restored by tf1_gradients x N (how a
  team wrote model_deploy before the kit knew it): the weights are the same bits, and the kit
  names the factor, not 'the TF2 loss is divided by the replica's batch'."""
  def clone_loss(scope, images, labels):
    loss, logits = m.tower_loss(scope, images, labels)
    loss = loss / 2.0
    if scope.startswith("tower_0"):
      loss = tf.add_n([loss, tf.add_n(v1.get_collection(v1.GraphKeys.REGULARIZATION_LOSSES))])
    return loss, logits
  report = porting.compare(
      m.port(tower_loss=clone_loss, tf1_towers=porting.AVERAGE_GRADIENTS,
             tf1_gradients=lambda grads: [(2.0 * g, v) for g, v in grads]),
      m.batches(2), replicas=2, steps=1)
  [line] = _causes(report)
  assert line.startswith("  cause: tf1_gradients multiplies the towers' combined gradients "
                         "by 2 at step 0"), line
  assert "Port(tf1_towers=porting.MODEL_DEPLOY)" in line
  assert all(r.diff.max_abs == 0 for r in report.rows if r.kind in ("weight", "slot"))
  assert "not compared: what tf1_gradients makes of the towers' combined gradients" in (
      report.text())


@pytest.mark.slow
def test_a_script_whose_towers_hold_no_regularization_is_said_so():
  """model_deploy's clones declared as the tutorial's averaged towers: no tower's loss holds
  the collection (read from the graph), so the port's regularization is the difference, not
  'counted N times'."""
  report = porting.compare(m.port(tf1_towers=porting.AVERAGE_GRADIENTS), m.batches(2),
                           replicas=2, steps=1)
  [line] = _causes(report)
  assert line.startswith("  cause: the TF1 towers' losses hold no regularization"), line
  assert "counted 2 times" not in report.text()


@pytest.mark.slow
def test_the_tutorials_towers_against_a_port_with_the_regularization_on_replica_0():
  def with_regularization(scope, images, labels):
    loss, logits = m.tower_loss(scope, images, labels)
    return tf.add_n([loss, tf.add_n(v1.get_collection(
        v1.GraphKeys.REGULARIZATION_LOSSES))]), logits
  report = porting.compare(m.port(tower_loss=with_regularization,
                                  tf1_towers=porting.AVERAGE_GRADIENTS),
                           m.batches(2), replicas=2, steps=1)
  [line] = _causes(report)
  assert "is tower_0 -1 R, tower_1 +1 R, summing to 0" in line, line
  assert "tf.nn.scale_regularization_loss" in line


@pytest.mark.slow
def test_towers_that_sum_their_own_losses_against_a_mean():
  """replicate_model_fn(SUM): the towers' undivided losses summed, N x the mean the port
  makes; said against the script's combination."""
  def with_regularization(scope, images, labels):
    loss, logits = m.tower_loss(scope, images, labels)
    return tf.add_n([loss, tf.add_n(v1.get_collection(
        v1.GraphKeys.REGULARIZATION_LOSSES))]), logits
  report = porting.compare(
      m.port(tower_loss=with_regularization,
             tf1_towers=porting.replicate_model_fn("weighted_sum"),
             replica_loss=functools.partial(m.replica_loss, placement="every_replica")),
      m.batches(2), replicas=2, steps=1)
  causes = _causes(report)
  assert causes[0].startswith("  cause: every gradient is 0.5 x the towers' combined one "
                              "(N = 2): the TF1 script combines its towers to 2 x"), causes
  assert "divided by the replica's batch" not in report.text()


def test_towers_summed_as_written_hold_each_replicas_own_loss_on_their_scale():
  """tf_cnn_benchmarks' replicated towers (each tower's own mean, the gradients summed, no
  division) and their faithful port (each replica's own mean, summed): the report compared
  each replica's loss times N, as if it were the global batch's share: 2x apart at N = 2, and
  "not explained ... in the head, the loss" sent the team to a loss that was right."""
  def with_regularization(scope, images, labels):
    loss, logits = m.tower_loss(scope, images, labels)
    return tf.add_n([loss, tf.add_n(v1.get_collection(
        v1.GraphKeys.REGULARIZATION_LOSSES))]), logits

  def own_mean(model, images, labels, global_batch_size):
    del global_batch_size  # the replica's own batch: the script's towers are not divided
    return m.replica_loss(model, images, labels, tf.shape(images)[0],
                          placement="whole_on_every_replica")
  summed = porting.TowerCombination("summed as written", gradients="sum")
  assert summed.loss_factor(2, "sum") == 1 and summed.loss_factor(4, "mean") == 0.25
  assert porting.AVERAGE_GRADIENTS.loss_factor(4, "sum") == 4
  report = porting.compare(m.port(tower_loss=with_regularization, tf1_towers=summed,
                                  replica_loss=own_mean),
                           m.batches(2), replicas=2, steps=1)
  losses = [r for r in report.rows if r.kind == "loss"]
  assert len(losses) == 2 and max(r.diff.max_rel for r in losses) < 1e-6, report.text()
  assert not any("the head" in line or "every gradient is" in line
                 for line in _causes(report)), report.text()


@pytest.mark.slow
def test_a_record_keeps_the_towers_combination_and_replays_it(tmp_path):
  """A model_deploy side recorded and replayed: the record says how its towers combined, and
  the port compares EQUAL against it as against the live side. (In a folder of its own: a
  fixed ram:// path crashed a test worker once, in one of four suite runs.)"""
  from porting import record  # pylint: disable=g-import-not-at-top
  folder = str(tmp_path / "model_deploy_record")
  record.write(m.port(), m.batches(2, steps=2), folder, replicas=2, steps=2)
  report = porting.compare(m.port(tf1_towers=porting.AVERAGE_GRADIENTS), record=folder,
                           steps=2)
  assert report.tf1.facts["combination"] == porting.MODEL_DEPLOY.record()
  assert report.equal, report.text()


def _rows(report):
  return [(r.step, r.kind, r.tf1, r.diff.max_abs) for r in report.rows]


@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_horovod_and_sync_replicas_run_their_own_arithmetic():
  """Horovod's DistributedOptimizer on TF1 (average=True) is the tutorial's arithmetic with
  rank 0's updates; SyncReplicasOptimizer's accumulator averages the workers' gradients as
  average_gradients does, and every worker's UPDATE_OPS run. Held against the tutorial's form
  on tests/bn_momentum_port.py (a batch norm, momentum): each side as its script combines."""
  from tests import bn_momentum_port as bn  # pylint: disable=g-import-not-at-top
  compare = lambda form: porting.compare(bn.port(tf1_towers=form), bn.batches(2), replicas=2,
                                         steps=2)
  tutorial, horovod, sync = (compare(f) for f in (porting.AVERAGE_GRADIENTS, porting.HOROVOD,
                                                  porting.SYNC_REPLICAS))
  assert horovod.tf1.facts["combination"]["name"] == "horovod DistributedOptimizer"
  assert _rows(horovod) == _rows(tutorial) and horovod.hints == tutorial.hints
  # SyncReplicas: the same gradients and trained weights as the tutorial's towers; its moving
  # statistics every worker's, racing, and named so.
  moving = lambda r: "moving_" in r[2]
  assert [r for r in _rows(sync) if not moving(r)] == [
      r for r in _rows(tutorial) if not moving(r)]
  assert max(r[3] for r in _rows(sync) if moving(r)) > 1e-3
  assert [h for h in sync.hints if h.startswith(
      "batch-norm moving statistics: the TF1 train op runs the UPDATE_OPS of every tower's")]
