"""The TF2 trainer: tf.distribute strategies, tf.data, tf.function, tf.train.Checkpoint.

Run `python -m strategies.train --num_gpus=2` to train and `python -m strategies.eval` to
evaluate; the model, loss, schedule and input come from the shared `cifar10` package.
"""
