"""Causes in batch norm's moving statistics: a fused TF1 batch norm, the statistics of
another tower than replica 0's, and updates that differ only by their rounding."""

MOVING = ("moving_mean", "moving_variance")


def _moving(obs):
  return [r for r in obs.bad if r.kind == "weight" and any(m in r.tf1 for m in MOVING)]


def fused(obs):
  """TF1's FusedBatchNorm: its own rounding of the forward pass and gradients (it does not
  move them: a port 0.9 apart has another fault first)."""
  if not obs.tf1.facts.get("fused_batch_norm") or not obs.bad or not obs.rounding(
      [r for r in obs.table if r.step == 0 and r.kind in ("loss", "outputs", "gradient")]):
    return []
  # Where the train op runs another tower's updates than the first, the moving statistics
  # are those towers' (other_towers names them): the fused kernel does not account for them.
  # Step 0's only: there both sides start from the same weights, and what parts later
  # (an optimizer's other update) is no kernel's rounding.
  statistics = ("" if _other_towers_run(obs) else
                f", its moving statistics up to "
                f"{obs.worst([r for r in _moving(obs) if r.step == 0]):.2g}")
  return ["TF1's batch norm is fused (FusedBatchNorm: its own rounding, and "
          "moving_variance updated with the unbiased variance n/(n-1)); the port's is not "
          "(no Keras 3 layer runs that kernel: Keras's BatchNormalization and "
          "porting.TF1BatchNorm use the biased variance): compare with a tolerance of this "
          "size, or check the rest of the port with fused=False on the TF1 side (here step "
          f"0's forward pass and gradients up to {obs.worst(obs.table, 0):.2g} relative "
          f"apart{statistics}{obs.noise_note()})"]


def _other_towers_run(obs):
  """Whether the TF1 train op runs the updates of a tower other than the first (N > 1)."""
  return obs.n > 1 and obs.tf1.facts.get("update_towers", [0]) != [0]


def other_towers(obs):
  """The TF1 train op runs another tower's UPDATE_OPS than the first (read from its graph),
  the TF2 side keeps replica 0's own."""
  moving, n = _moving(obs), obs.n
  towers = obs.tf1.facts.get("update_towers", [0])
  # Beside a fused kernel too: its rounding and unbiased variance do not move the means.
  if not moving or not _other_towers_run(obs) or (
      all(r.diff.max_rel <= obs.bound for r in moving)):
    return []
  which = ("every tower's, with no order between them" if len(towers) == n else
           " and ".join(f"tower {t}'s" + (" (the last)" if t == n - 1 else "")
                        for t in towers))
  advice = ("porting.TF1BatchNorm(update_from='last_tower') updates every replica from the "
            "last tower's batch" if towers == [n - 1] else
            "no sequence of updates reproduces racing ones; compare with the TF1 side running "
            "one tower's (update_ops='first_tower' or 'last_tower')")
  runs = f"runs the UPDATE_OPS of {which}"
  if obs.tf1.facts.get("in_place_updates"):
    # Not through UPDATE_OPS: the Port's update_ops does not choose them.
    runs = (f"updates them in place, {which} (outside UPDATE_OPS, as a batch norm with "
            "updates_collections=None assigns its statistics as it runs, in every tower the "
            "train op reaches)")
    advice = ("no sequence of updates reproduces racing ones, and the Port's update_ops "
              "cannot choose them; compare with the TF1 batch norm updating through "
              "UPDATE_OPS (updates_collections at its default), whose first tower's the "
              "train op then runs")
  return [f"batch-norm moving statistics: the TF1 train op {runs} "
          "(read from the ops it runs); the TF2 side's are replica 0's own (Keras's "
          "BatchNormalization, and porting.TF1BatchNorm's default update_from='own_replica', "
          "update each replica's copy from its own batch; the checkpoint saves replica 0's): "
          f"{advice} (up to {obs.worst(moving):.2g} relative apart)"]


def update_rounding(obs):
  """The moving statistics apart by rounding where they first differ, from a step whose
  forward pass and gradients are the same bits on both sides: then the batch statistics they
  average are too, and only the update's own arithmetic is left. (Where that step's loss or
  gradients differ, the statistics follow them: a fused TF1 batch norm, or TF1 recorded on
  another TensorFlow, was named as this update form, for a port whose TF1BatchNorm updates as
  TF1 does.)"""
  moving = _moving(obs)
  if obs.fired(fused, other_towers) or (
      not moving) or not all(r.diff.max_rel <= obs.bound for r in moving if r in obs.early) or (
          min(r.step for r in moving) > obs.start) or any(
              r.step == obs.start and r.kind in ("loss", "outputs", "gradient")
              for r in obs.bad):
    return []
  later = any(r.diff.max_rel > obs.bound for r in obs.bad if r not in obs.early)
  # A training step's forward pass reads the batch's statistics, not the moving ones: a
  # loss, output or gradient past rounding is something else (a ResNet's fp16 "sum" idiom at
  # N = 2, its gradients 4e-4 apart from step 1, had this line alone).
  beyond = [r for r in obs.bad if r.kind in ("loss", "outputs", "gradient") and
            r.diff.max_rel > obs.bound and not obs.rounding([r])]
  first = min(beyond, key=lambda r: (r.step, r.kind != "loss")) if beyond else None
  return ["moving statistics differ by rounding: TF1's batch norm updates them as "
          "v - (v - x)(1 - m), Keras 3's as v m + x (1 - m), up to "
          f"{obs.worst([r for r in moving if r in obs.early]):.2g} relative" +
          (f" (read at steps {obs.start}-{obs.start + 1}; later steps differ more)"
           if later else "") +
          (f"; they feed no training step's forward pass, so they do not explain the "
           f"{first.kind} of {first.tf1} at step {first.step} ({first.diff.max_rel:.2g} "
           "relative, past rounding): compare over fewer steps and with one tower to see "
           "what else differs" if first else "")]
