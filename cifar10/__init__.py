"""Shared CIFAR-10 core: hyper-parameters, model, loss, schedule, input pipeline, devices.

Both trainers (`strategies/` on tf.distribute and `compat_v1/` on graphs and towers) are built
over this package and nothing else owns anything random or order-dependent. It never reads
flags, never builds a tf.distribute strategy and never opens a Session. Its functions work
eagerly, inside `tf.function` and inside a `tf.compat.v1` Graph.

Importing this package does not import TensorFlow: `config` and `errors` are pure Python so
that entry points can reject bad flags in milliseconds.
"""
