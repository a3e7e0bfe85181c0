"""The shared CIFAR-10 core: what both trainers share about CIFAR-10 and its numbers.

hparams (the original's constants), config (validated run settings, each declared once:
settings; an evaluator's: eval_config; the step's, resolved for a run's replicas:
step_settings), model, losses,
schedule, precision (compute dtypes and loss scaling), data_sources (the three sources of
examples) and bin_tarball (the classic archive, verified and unpacked), input_pipeline (the
train and eval streams), checkpoints (the format of either trainer's checkpoints), summaries
(the original's), scores (the loss and precision training and evaluation both write), serving (what an exported
model computes), devices (the device plan), errors. Nothing random or order-dependent is
owned by a trainer: it is all here. It never reads flags, never builds a tf.distribute
strategy and never opens a Session; its functions work eagerly, inside `tf.function` and
inside a `tf.compat.v1` Graph. Run plumbing (flags, the run driver, run folders and their
records, launchers, signals, log lines) is in `harness`.

Importing this package does not import TensorFlow: `config` and `errors` are pure Python so
that entry points can reject bad flags in milliseconds. Of this project it imports only
`tfbits` (the model's gated bias, from TF1's arithmetic).
"""
