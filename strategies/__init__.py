"""The TF2 trainer: tf.distribute strategies, tf.data, tf.function, tf.train.Checkpoint.

  python -m strategies.train --num_gpus=2 --dataset=synthetic --max_steps=200
  python -m strategies.eval --checkpoint_dir=/tmp/cifar10_train --dataset=synthetic --run_once

train -> devices (set-up, get_strategy) -> loop (or cluster_loop: harness.control.driver backends)
-> step (the compiled step over the variables of state, their EMA in shadows), fed by inputs,
summarised with histograms; eval -> evaluator; launch; export -> saved_model (the SavedModel);
predict -> classify; sample_images (a split's examples as PNG files). compat_v1 has the same
files for the same jobs; this package never imports it.
"""
