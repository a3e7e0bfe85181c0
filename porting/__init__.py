"""Port your own model: hold a team's TF1 tower code against its TF2 port, to the bit.

  import porting
  report = porting.compare(porting.Port(tower_loss=..., tf1_optimizer=..., build_model=...,
                                        replica_loss=..., tf2_optimizer=...),
                           batches, replicas=2, steps=3, tolerance=0.0)
  print(report.text())      # per variable: loss, outputs, gradients, weights, slots
  assert report.equal

  spec        Port: what a team hands the kit (its functions on both sides)
  combination TowerCombination: how the TF1 script makes one update of its towers
              (AVERAGE_GRADIENTS, MODEL_DEPLOY, replicate_model_fn(...), SYNC_REPLICAS,
              HOROVOD), run by the TF1 side and read by the causes (causes/combination)
  check       compare(): both sides opened, checked and started alike; stepping: the
              compared steps, streamed; compared: the Report it returns, and its text
  tf1_towers  the TF1 side: towers in a graph, a Session (tf1_graph: the towers built as
              the script builds them; tf1_update: each tower's loss as its combination makes
              it, their gradients combined, the script's tf1_gradients, the optimizer's rate;
              tf1_facts: what its graph shows the diagnosis; tf1_state: its variables
              read, set and saved by name)
  tf2_replicas the TF2 side: MirroredStrategy, a tape per replica, a Keras optimizer
              (tf2_step: the step, one tf.function over the replicas; keras_variables: its
              variables and slots by name)
  loss_scales float16 ports: TF1's MixedPrecisionLossScaleOptimizer against Keras's
              LossScaleOptimizer, unwrapped, compared, the gradients unscaled; precision:
              the dtype each side computes in, and the rounding bound read at it;
              mixed_precision_rewrite: TF1's graph rewrite, kept to the TF1 Session
  matching    TF1 variable names to TF2 variables (the names the code gave, the order of use,
              creation order, shapes, a map; structure: pairing by the order each forward
              pass reads its variables, use_order, and names Keras or tf.layers numbered)
  trace       what one side did in each step (losses, outputs, gradients, weights, slots);
              evidence: what the kit knows of a side, each fact declared (read, measured,
              where the run was)
  report      the rows and the text
  screen      the report in at most 100 columns, the verdict and the causes first (what
              `python -m porting compare` prints; Report.text(width=...))
  diffs       max absolute and relative difference, and ULPs
  diagnosis   the known causes of a difference, named where the numbers fit: one rule a
              cause over typed Observations (causes/: towers, scale, batch_norm,
              gradients, updates, optimizers, averages, machines: a record from another
              TensorFlow or CPU, precision; random_causes: draws not shared; penalties: an
              L2 penalty written into one side's loss only; projections: gradients
              projected on each other), each giving findings: a line
              that knows its kind (its rule, or where the bits part when none fits)
  unexplained the line where no cause fits (parting's place, how to narrow it)
  parting     where the bits first part when no cause fits: the step; the first layer whose
              output parts from the same input (both sides' layers probed from step 0's
              weights: layer_probes; loss_terms: the loss as the terms its additions add,
              measured); the first gradient from the loss down, the tensors
              used k times there (layer_structure: the towers' layers from the loss down,
              read once from tower 0's forward ops)
  hyperparameters  the two optimizers' settings, compared before a step runs (ema_settings:
              the two EMAs', what each averages, its decay and num_updates)
  layer_settings  the layers' (dropout rates, batch norm's epsilon, statistics and momentum,
              regularization, label smoothing), read from both sides' graphs (graph_values:
              constants and the tensors behind casts); layer_mismatches compares them
              before a step runs; graph_walks: what an op depends on, a tower's forward ops,
              the towers whose assigns a train op runs
  checkpoints tf1_to_tf2 / tf2_to_tf1 (to_tf1: the way back, and the program's variables
              beyond the towers, carried from --tf1_checkpoint or said not held): a port's
              checkpoints both ways, slots, moving
              averages and the global step (in the TF1 graph's dtype) included (adam_steps:
              TF1 Adam's step, kept in its beta powers; checkpoint_extras: the script's
              own variables, a learning rate variable carried both ways, the rest said)
  outputs     where a conversion writes: never through a planted link, never over a
              checkpoint unless asked, never half, never into the folder's index
  conversion_checks  every converted variable read back and compared; one the checkpoint
              cannot reach (Keras layers in a plain list) named, never dropped
  devices     N GPUs, or N logical CPU devices where there are none
  random_ops  dropout and other random draws alike on both sides (tower i = replica i, each
              step): Port(random_ops="aligned"), the default
  optimizers  TF1Adam, TF1Momentum, TF1RMSProp, TF1Adagrad: Keras optimizers that run TF1's
              kernels with TF1's slots, so a port steps as its TF1 optimizer did
  gated_conv  GatedConv2D: keras.layers.Conv2D whose bias gradient is TF1's gated one (where
              oneDNN fuses a tape's conv filter and bias gradients)
  batch_norm  TF1BatchNorm: a Keras layer that normalizes and updates its moving statistics
              as TF1's assign_moving_average does (zero-debiased; from the first, last or
              every tower), to the bit
  tf1_layers  tf.compat.v1.layers under Keras 3 (tf_keras), routed while the towers build;
              slim(): tf_slim, for tf.contrib-era code
  tf1_variables  tf.Variable weights in tower code, shared by the towers as get_variable's
  record      the TF1 side recorded where its TensorFlow runs, replayed where the port's does
              (record_files: the folder's header and arrays)
  errors      PortError: one line, no traceback, from the command line
  commands    the command line's commands (compare, record, tf1_to_tf2, tf2_to_tf1): their
              flags and what each does; __main__ parses and runs them

What the kit shares with the trainers is in `tfbits` (the machine the bits were made on,
TF1's gated arithmetic, the URL schemes TensorFlow reaches), the one package it imports of
this project: `porting.gated_bias_add` and `porting.replica_mean` are tfbits.gates'.
Nothing here knows CIFAR-10; MIGRATION.md ("Port your own model") walks through a second
model end to end.
"""

import importlib

# Loaded on first use (PEP 562), so that `python -m porting` parses its flags and answers a
# bad one before TensorFlow is imported.
_API = {"compare": "porting.check", "Report": "porting.compared",
        "tf1_to_tf2": "porting.checkpoints", "tf2_to_tf1": "porting.to_tf1",
        "replica_devices": "porting.devices", "PortError": "porting.errors",
        "gated_bias_add": "tfbits.gates", "replica_mean": "tfbits.gates",
        "GatedConv2D": "porting.gated_conv",
        "TF1Adam": "porting.optimizers",
        "TF1Momentum": "porting.optimizers", "TF1RMSProp": "porting.optimizers",
        "TF1Adagrad": "porting.optimizers",
        "Port": "porting.spec", "TF1BatchNorm": "porting.batch_norm",
        "TowerCombination": "porting.combination",
        "AVERAGE_GRADIENTS": "porting.combination", "MODEL_DEPLOY": "porting.combination",
        "SYNC_REPLICAS": "porting.combination", "HOROVOD": "porting.combination",
        "replicate_model_fn": "porting.combination"}
__all__ = sorted(_API)


def __getattr__(name):
  if name not in _API:
    raise AttributeError(f"module 'porting' has no attribute {name!r}")
  return getattr(importlib.import_module(_API[name]), name)
