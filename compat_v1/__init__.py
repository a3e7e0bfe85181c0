"""The same trainer written the TF1 way with tf.compat.v1: a graph, one tower per device,
get_variable reuse, average_gradients, Session/ConfigProto, Saver, ps/worker.

  python -m compat_v1.train --num_gpus=2 --dataset=synthetic --max_steps=200
  python -m compat_v1.eval --checkpoint_dir=/tmp/cifar10_train --dataset=synthetic --run_once

train -> devices (ConfigProto) -> loop (or cluster_loop: harness.control.driver backends) -> step,
fed by inputs (cluster_loop's chief saves through step_saver: a checkpoint holds the global
step it is named by), file for file as in strategies; restore (any checkpoint into a graph); eval ->
evaluator; launch; export -> saved_model (the SavedModel, the TF1 way). This package never
imports strategies.
"""
