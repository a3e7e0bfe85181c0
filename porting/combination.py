"""How a TF1 script turns its towers into one update, as data: what each tower's loss holds,
how their gradients combine, whose UPDATE_OPS run. The kit's TF1 side runs this arithmetic
(tf1_update.combine), the report compares each tower's loss with its replica's on the scale
each side defines (loss_factor), and the causes read it instead of assuming averaged towers.

The forms TF1 multi-GPU trainers used, each read in its source:

  AVERAGE_GRADIENTS   cifar10_multi_gpu_train.py, Inception's inception_train.py: each tower's
                      loss as tower_loss returns it (its regularization in it), the towers'
                      gradients averaged (average_gradients), tower 0's UPDATE_OPS
  MODEL_DEPLOY        slim's deployment/model_deploy.py (train_image_classifier.py, the object
                      detection and DeepLab trainers): each clone's loss divided by the
                      clones (`scaled_clone_loss`), the REGULARIZATION_LOSSES collection added
                      to the first clone's only, the clones' gradients summed
                      (`_sum_clones_gradients`, add_n), the first clone's UPDATE_OPS
  replicate_model_fn(loss_reduction)
                      tf.contrib.estimator.replicate_model_fn: the model_fn's loss divided by
                      the towers unless loss_reduction is SUM (`_scale_loss`), the gradients
                      summed (`_compute_sum_on_device`), the model_fn's own unscoped
                      UPDATE_OPS, which hold every tower's
  SYNC_REPLICAS       SyncReplicasOptimizer: each worker's loss as written, the accumulator's
                      mean of the workers' gradients, every worker's UPDATE_OPS
  HOROVOD             horovod.tensorflow.DistributedOptimizer on TF1 (average=True): each
                      rank's loss as written, the allreduce's sum divided by the ranks, each
                      rank its own UPDATE_OPS (rank 0's are the ones its checkpoint keeps)
"""

import dataclasses

from porting.errors import PortError

LOSSES = ("as_written", "divided")
REGULARIZATIONS = ("in_tower_loss", "first_tower", "every_tower")
GRADIENTS = ("mean", "sum", "scaled_sum")
UPDATE_OPS = ("first_tower", "last_tower", "all_towers", "none")


@dataclasses.dataclass(frozen=True)
class TowerCombination:
  """One TF1 form of combining towers.

  loss: "as_written" (each tower's loss is what tower_loss returns) or "divided" (the script
    divides it by the number of towers, N > 1: tf.div(loss, 1.0 * N)).
  regularization: "in_tower_loss" (whatever tower_loss returns holds it, as the tutorial's
    tower_loss adds its 'losses' collection), "first_tower" (the script adds the sum of the
    whole REGULARIZATION_LOSSES collection to tower 0's loss only, after the division) or
    "every_tower" (to every tower's loss).
  gradients: "mean" (per variable, the towers' mean: average_gradients' reduce_mean), "sum"
    (add_n) or "scaled_sum" (add_n, then x 1/N: tf_cnn_benchmarks' parameter_server, whose
    1/N rounds where N is not a power of two, and a division does otherwise).
  update_ops: which towers' UPDATE_OPS run with the train op: "first_tower", "last_tower",
    "all_towers" or "none" (see Port.update_ops).
  """
  name: str = "custom"
  loss: str = "as_written"
  regularization: str = "in_tower_loss"
  gradients: str = "mean"
  update_ops: str = "first_tower"

  def __post_init__(self):
    for field, allowed in (("loss", LOSSES), ("regularization", REGULARIZATIONS),
                           ("gradients", GRADIENTS), ("update_ops", UPDATE_OPS)):
      if getattr(self, field) not in allowed:
        raise PortError(f"TowerCombination's {field} must be one of {', '.join(allowed)}, "
                        f"got {getattr(self, field)!r}")

  def tower_scale(self, n):
    """A tower's loss over its own mean loss: 1/N where the script divides it (N > 1)."""
    return 1.0 / n if self.loss == "divided" and n > 1 else 1.0

  def update_scale(self, n):
    """The combined gradient over the mean of the towers' own: 1 for the tutorial's average
    and model_deploy's sum of divided losses, N for a sum of losses as written."""
    return self.tower_scale(n) * (1 if self.averaged else n)

  def loss_factor(self, n, reduction):
    """What a replica's loss is multiplied by to be on its tower's scale, the report's loss
    rows: the faithful port's replica loss is its tower's (as the script's division left it)
    times what makes the two updates one. The script's update takes 1/N of its towers'
    gradients where it averages them, all of them where it sums; the port's, all of its
    replicas' under gradient_reduction "sum", 1/N under "mean". So: N for averaged towers
    against summed replicas (each replica the global batch's share), 1 for summed towers
    against summed replicas (model_deploy's divided losses, replicate_model_fn, summed losses
    as written: tf_cnn_benchmarks' replicated), 1/N for summed towers against averaged
    replicas. An int where it is one (x N is exact for powers of two)."""
    factor = replicas_share(n, reduction) / self.towers_share(n)
    return int(factor) if factor == int(factor) else factor

  def towers_share(self, n):
    """What the script's update takes of each tower's gradient: 1/N averaged, all summed."""
    return 1.0 / n if self.averaged else 1.0

  @property
  def averaged(self):
    """Whether the update is the towers' mean (by a division or by x 1/N), not their sum."""
    return self.gradients in ("mean", "scaled_sum")

  def describe(self, n):
    """One line: what the TF1 side did with its N towers."""
    loss = "as tower_loss returns it" if self.tower_scale(n) == 1 else f"divided by {n}"
    regularization = {"in_tower_loss": "its regularization as tower_loss adds it",
                      "first_tower": "the regularization collection added to tower 0's only",
                      "every_tower": "the regularization collection added to every tower's"}
    gradients = {"mean": "averaged", "sum": "summed",
                 "scaled_sum": f"summed, then multiplied by 1/{n}"}[self.gradients]
    return (f"{self.name}: each tower's loss {loss}, {regularization[self.regularization]}; "
            f"the towers' gradients {gradients}; {self.update_ops.replace('_', ' ')}'s "
            "UPDATE_OPS")

  def record(self):
    return dataclasses.asdict(self)


def replicas_share(n, reduction):
  """What the port's update takes of each replica's gradient under gradient_reduction."""
  return 1.0 if reduction == "sum" else 1.0 / n


def from_record(facts):
  """The TowerCombination a record's facts hold; a record made before the kit kept one was
  built by the kit's averaged towers, with the update_ops it wrote down."""
  if facts.get("combination"):
    return TowerCombination(**facts["combination"])
  return dataclasses.replace(AVERAGE_GRADIENTS, update_ops=facts.get("update_ops",
                                                                      "first_tower"))


AVERAGE_GRADIENTS = TowerCombination("average_gradients")
MODEL_DEPLOY = TowerCombination("model_deploy", loss="divided", regularization="first_tower",
                                gradients="sum")
SYNC_REPLICAS = TowerCombination("SyncReplicasOptimizer", update_ops="all_towers")
HOROVOD = TowerCombination("horovod DistributedOptimizer")


def replicate_model_fn(loss_reduction="weighted_sum_by_nonzero_weights"):
  """tf.contrib.estimator.replicate_model_fn's combination under `loss_reduction` (a
  tf.compat.v1.losses.Reduction value; its default SUM_BY_NONZERO_WEIGHTS divides each tower's
  loss by the towers, SUM does not)."""
  # NONE is refused by replicate_model_fn itself: a tower's loss must be a scalar.
  reductions = ("weighted_sum", "weighted_sum_by_nonzero_weights", "weighted_mean",
                "weighted_sum_over_batch_size")
  if loss_reduction not in reductions:
    raise PortError(f"replicate_model_fn's loss_reduction must be a tf.compat.v1.losses."
                    f"Reduction value ({', '.join(reductions)}), got {loss_reduction!r}")
  return TowerCombination(f"replicate_model_fn({loss_reduction})",
                          loss="as_written" if loss_reduction == "weighted_sum" else "divided",
                          gradients="sum", update_ops="all_towers")
