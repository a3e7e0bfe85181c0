"""The same trainer written the TF1 way with tf.compat.v1: a graph, one tower per device,
get_variable reuse, average_gradients, Session/ConfigProto, Saver.

Run `python -m compat_v1.train --num_gpus=2` to train and `python -m compat_v1.eval` to
evaluate. Model, loss, schedule and input come from the shared `cifar10` package; this package
never imports `strategies` (and `strategies` never imports it).
"""
