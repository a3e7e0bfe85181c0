"""Causes in the optimizers' updates: the learning rate's decay, Adam's 1 - beta and beta
powers, MomentumOptimizer's accumulator against Keras SGD's velocity, RMSProp's mean square
and epsilon, an embedding's gradient applied row by row."""



def learning_rate(obs):
  """The two sides' rates differ from some step."""
  rates = obs.rates
  if rates[0] == rates[1]:
    return []
  s = next(i for i, (a, b) in enumerate(zip(*rates)) if a != b)
  head = (f"the learning rate differs from step {s} (TF1 {rates[0][s]:.6g}, TF2 "
          f"{rates[1][s]:.6g})")
  steps = getattr(getattr(obs, "tf1", None), "facts", {}).get("global_steps", [])
  if len(steps) > 1 and len(set(steps)) == 1:  # measured after each step
    return [f"{head}: TF1's global step stays at {steps[0]} through the {len(steps)} steps "
            "(its train op does not increment it: an optimizer whose apply_gradients ignores "
            "global_step, as BERT's AdamWeightDecayOptimizer does; increment it there), so "
            "its schedule stays at that step's rate while TF2's iterations advance"]
  shift = _shift(*rates)
  if shift:
    ahead = "ahead of" if shift > 0 else "behind"
    return [f"{head}: TF2's schedule runs {abs(shift)} step(s) {ahead} TF1's (its rate at "
            f"step i is TF1's at step i {'+' if shift > 0 else '-'} {abs(shift)}, at every "
            "step compared): a boundary or decay_steps off by that many steps, or a step "
            "count that starts elsewhere on one side"]
  rising = [_rises(r) for r in rates]
  if rising[0] != rising[1]:  # a warmup's sign: one rate climbs, the other never does
    side, other = ("TF1", "TF2") if rising[0] else ("TF2", "TF1")
    climb = ", ".join(f"{r:.3g}" for r in rates[0 if rising[0] else 1][:4])
    return [f"{head}: {side}'s rate rises over the steps compared ({climb}"
            f"{', ...' if len(rates[0]) > 4 else ''}) and {other}'s never does: a warmup on "
            f"{side}'s side only (BERT's rises linearly from 0 over num_warmup_steps), or "
            "another schedule"]
  return [f"{head}: the two schedules differ; what gives this: decay_steps multiplied or "
          "divided by N, a step count per replica (TF1's global step moves once per step of "
          "all towers), a schedule counted in examples (global_step x batch) on one side and "
          "in steps on the other, or another rate, boundary or decay factor"]


def _rises(rates):
  return any(b > a for a, b in zip(rates, rates[1:]))


def _shift(tf1, tf2, most=3):
  """k where TF2's rate at step i is TF1's at i + k for every step both hold (k != 0, |k|
  <= most, at least one changing rate among them), else 0."""
  for k in sorted(range(-most, most + 1), key=abs):
    pairs = [(tf2[i], tf1[i + k]) for i in range(len(tf2)) if 0 <= i + k < len(tf1)]
    if k and len(pairs) >= 2 and all(a == b for a, b in pairs) and len(
        {b for _, b in pairs}) > 1:
      return k
  return 0


def adam_one_minus_beta(obs):
  """Moments that differ at step 0 where their own variable's gradient does not (read per
  variable: another variable's differing gradient, a conv bias's, does not hide it)."""
  if obs.optimizers != ("AdamOptimizer", "Adam"):
    return []
  same = {r.tf1 for r in obs.table if r.kind == "gradient" and r.step == 0 and
          r.diff.within(obs.tolerance)}
  fits = [r for r in obs.bad if r.kind == "slot" and r.step == 0 and
          r.tf1.split(":")[0] in same]
  if not fits:
    return []
  return ["Adam's 1 - beta: TF1's ApplyAdam kernel computes 1 - beta_1 and "
          "1 - beta_2 in float32 (1 - 0.999 = 0.00099998713), Keras in Python floats "
          f"and then rounds (0.001): at step 0, {len(fits)} moment slot(s) (m, v of a "
          "variable) differ with "
          f"the same gradients, by up to {max(r.diff.max_rel for r in fits):.2g} "
          "relative here"]


def adam_beta_powers(obs):
  """From the third step the weights move apart with every moment the same bits: Keras's
  beta ** t against TF1's running products beta1_power *= beta1."""
  if obs.optimizers != ("AdamOptimizer", "Adam") or not obs.bad or obs.start < 2:
    return []
  s = obs.start
  at = [r for r in obs.bad if r.step == s]
  moments_same = all(r.diff.within(0) for r in obs.table if r.kind == "slot" and r.step == s)
  if not moments_same or any(r.kind not in ("weight", "average") for r in at):
    return []
  return [f"Adam's beta powers: from step {s} the weights differ (by up to "
          f"{obs.worst(at):.2g} relative) with every moment the same bits: TF1's "
          "AdamOptimizer corrects its bias with running products (beta1_power *= beta1 each "
          "step, in float32), Keras's Adam with beta ** t; porting.TF1Adam keeps TF1's "
          "products (and runs TF1's kernel)"]


def _trainable(obs):
  """The TF2 names of the trainable variables compared."""
  return {obs.to2[k] for k in obs.names}


def _model_rows(obs):
  trainable = _trainable(obs)
  return [r for r in obs.bad if r.kind in ("weight", "slot") and
          r.tf2.split(":")[0] in trainable]


def _statistics(obs, rows):
  """The rows of `rows` that are weights the optimizer does not train (a batch norm's moving
  mean)."""
  trainable = _trainable(obs)
  return [r for r in rows if r.kind == "weight" and r.tf2.split(":")[0] not in trainable]


def _before_is_rounding(obs, change):
  """Every row apart before step `change` within rounding, the moving statistics aside."""
  before = [r for r in obs.bad if r.step < change]
  statistics = {id(r) for r in _statistics(obs, before)}
  return all(r.diff.max_rel <= obs.bound for r in before if id(r) not in statistics)


def momentum(obs):
  """MomentumOptimizer's accum = m accum + g, -lr accum, against Keras SGD's v = m v - lr g:
  rounding from the second step; a different update once the rate changes."""
  if obs.optimizers != ("MomentumOptimizer", "SGD"):
    return []
  rows = _model_rows(obs)
  if not rows or obs.fired(learning_rate):
    return []
  first = min(r.step for r in rows)
  rates = obs.rates[0]
  change = next((s for s in range(1, len(rates)) if rates[s] != rates[s - 1]), None)
  rounding = [r for r in rows if r.step <= first + 1]
  if first >= 1 and all(r.diff.max_rel <= obs.bound for r in rounding):
    line = ("momentum: MomentumOptimizer keeps accum = m accum + g and steps "
            "-lr accum, Keras SGD keeps v = m v - lr g and steps +v; the same update, "
            "rounded differently from the second step on (and a different one "
            "whenever the rate changes: v is -lr x accum only at a constant rate), up "
            f"to {obs.worst(rounding):.2g} relative")
  elif change is not None and _before_is_rounding(obs, change) and any(
      r.diff.max_rel > obs.bound for r in rows if r.step >= change):
    # Rounding before the change may be another cause's (a U-Net's penalty sums at step 0,
    # 2 ULPs): what parts past it once the rate moves is still this one. Moving statistics
    # feed no update (a fused kernel's unbiased variance parts them from step 0).
    before = [r for r in obs.bad if r.step < change]
    aside = (" (the moving statistics aside: they feed no update)" if any(
        r.diff.max_rel > obs.bound for r in _statistics(obs, before)) else "")
    line = ("momentum: MomentumOptimizer keeps accum = m accum + g and steps -lr accum, "
            "Keras SGD keeps v = m v - lr g and steps +v: alike at a constant rate, apart "
            f"once it changes: the rate moves at step {change} (TF1 {rates[change - 1]:.6g} "
            f"-> {rates[change]:.6g}), where Keras's velocity still carries the old rate; "
            f"every difference before it is rounding{aside}, from it up to "
            f"{obs.worst([r for r in rows if r.step >= change]):.2g} relative; "
            "porting.TF1Momentum keeps TF1's accumulator")
  else:
    return []
  return [line]


def rmsprop(obs):
  """TF1's ApplyRMSProp against Keras's RMSprop: the mean square starts at 1.0 (Keras: 0),
  so after step 0 every rms slot is rho x 1.0 above Keras's, to rounding. Both add epsilon
  under the square root (Keras 3's rmsprop.py: sqrt(velocity + epsilon)); the starting value
  is the difference."""
  if obs.optimizers != ("RMSPropOptimizer", "RMSprop"):
    return []
  rms = [r for r in obs.table if r.kind == "slot" and r.step == 0 and
         r.tf1.endswith(":rms")]
  offsets = [r.diff.max_abs for r in rms]
  if not rms or not 0 < min(offsets) <= 1 or max(offsets) - min(offsets) > 1e-3 * max(offsets):
    return []
  weights = [r for r in obs.bad if r.kind == "weight" and r.step == 0]
  return [f"RMSProp: every mean-square slot is {offsets[0]:.4g} apart after step 0, the "
          "decay x TF1's initial 1.0: tf.compat.v1.train.RMSPropOptimizer starts its `rms` "
          "at 1.0 where Keras's RMSprop starts at 0 (both add epsilon under the square "
          "root); porting.TF1RMSProp runs TF1's kernel with TF1's slots (the weights up "
          f"to {obs.worst(weights):.2g} relative apart after step 0)"]


# Keras optimizers that accumulate the gradient's square (what a row's parts applied one by
# one change past rounding).
SQUARING = ("Adagrad", "RMSprop", "Adam", "AdamW", "Adamax", "Nadam", "Adadelta")


def sparse_update(obs):
  """Under gradient_reduction "sum" the Keras optimizer is handed the tape's IndexedSlices
  (an embedding's gradient) and updates a row with each part the batch holds for it; TF1's
  average_gradients makes them dense (the row's parts summed, one update). Measured: SGD the
  same bits where no index repeats within a step, 1 ULP apart where one does; Keras's
  Adagrad 1% apart (the sum of the parts' squares against the square of their sum). At N >= 2
  the all-reduce of IndexedSlices concatenates the replicas' rows, so a word in more than one
  replica has its parts added one by one where TF1 adds the towers' dense sums: the gradient
  itself rounds (4 ULPs in a text CNN at N = 2; the same bits where no word is shared)."""
  sparse = set(obs.tf2.facts.get("sparse_gradients", ()))
  if obs.reduction != "sum" or not sparse or not obs.bad:
    return []
  at = [r for r in obs.bad if r.step == obs.start]
  summed = [r for r in at if r.kind == "gradient"]
  if not all(r.tf2.split(":")[0] in sparse and (
      r.kind in ("weight", "slot", "average") or
      (r.kind == "gradient" and obs.n > 1 and r.diff.max_rel <= obs.bound)) for r in at):
    return []
  names = sorted({r.tf1.split(":")[0] for r in at})
  if summed:
    return [f"an embedding's gradient summed as IndexedSlices: from step {obs.start} "
            f"{', '.join(names)} differ (up to {obs.worst(at):.2g} relative), the gradient "
            "included, with the forward pass and every other gradient the same bits; the "
            "all-reduce of the port's IndexedSlices concatenates the replicas' rows, and a "
            "word that more than one replica holds has its parts added one by one, where "
            "TF1 adds each tower's dense gradient (average_gradients): rounding. The port is "
            "not at fault; compare with a tolerance of that size, or make the gradient dense "
            "on each replica (under gradient_reduction='mean' the kit does, as TF1)"]
  head = (f"an embedding's sparse update: from step {obs.start} {', '.join(names)} differ "
          f"(up to {obs.worst(at):.2g} relative) with every gradient the same bits; the "
          "port's gradient of it is IndexedSlices, which the Keras optimizer applies as they "
          "are (a row whose index the batch holds k times is updated with each of its k "
          "parts), where TF1 sums a row's k parts first (average_gradients makes them dense) "
          "and updates it once")
  if all(r.diff.max_rel <= obs.bound for r in at):
    kind = "for SGD, rounding" if obs.optimizers[1] == "SGD" else "rounding"
    return [f"{head}: {kind}. The port is not at fault; compare with a tolerance "
            "of that size (under gradient_reduction='mean' the kit hands the optimizer dense "
            "averages, as TF1's)"]
  if obs.optimizers[1] not in SQUARING:  # past rounding with another update: not this
    return []
  return [f"{head}: an optimizer that accumulates the gradient's square (Adagrad, RMSProp, "
          "Adam) then holds the sum of the parts' squares where TF1 holds the square of their "
          "sum, which is no rounding; porting's TF1 optimizers (TF1Adagrad, TF1RMSProp, "
          "TF1Adam) run TF1's kernels on the dense gradient; under gradient_reduction='mean' "
          "the kit makes it dense before any optimizer, which the port's own training loop "
          "may not"]
