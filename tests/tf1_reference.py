"""The original TF1 multi-GPU tutorial, written here again from its description, for tests.

Nothing in it comes from the project except the starting values and the batches: its model,
losses and step are those of `cifar10.py` + `cifar10_multi_gpu_train.py` under
tf.compat.v1, idiom for idiom: `_variable_on_cpu`, `_variable_with_weight_decay` (weight
decay through the 'losses' collection, wd=0.0 terms included), `tf.nn.bias_add` on the conv
layers, `tower_loss` summing the tower's collection, a float32 `global_step` made by
`get_variable` with `constant_initializer(0)`, `exponential_decay`, `average_gradients` over
towers that each take their slice of the batch, `apply_gradients`, and an
`ExponentialMovingAverage(0.9999, global_step)` of the trainable variables, written with
`Saver(tf.global_variables())`.

The original grouped the update and the EMA with no order (`tf.group`), so which weights the
EMA read varied run to run; `ema_reads` pins one order ("previous": EMA first, as most of
the original's runs did; "updated": the update first).
"""

import re

import numpy as np
import tensorflow as tf

from cifar10 import data_sources as sources
from cifar10 import input_pipeline as ip
from cifar10 import model

v1 = tf.compat.v1
TOWER_NAME = "tower"


def _variable_on_cpu(name, shape, initializer, dtype):
  with tf.device("/cpu:0"):
    return v1.get_variable(name, shape, initializer=initializer, dtype=dtype)


def _variable_with_weight_decay(name, shape, value, wd, dtype):
  var = _variable_on_cpu(name, shape, v1.constant_initializer(value), dtype)
  if wd is not None:
    weight_decay = tf.multiply(tf.nn.l2_loss(var), wd, name="weight_loss")
    v1.add_to_collection("losses", weight_decay)
  return var


def _layer(name, shape, initial, wd, dtype):
  weights = _variable_with_weight_decay("weights", shape, initial[name + "/weights"], wd, dtype)
  biases = _variable_on_cpu("biases", shape[-1:], v1.constant_initializer(
      initial[name + "/biases"]), dtype)
  return weights, biases


def inference(images, initial, dtype):
  lrn = dict(depth_radius=4, bias=1.0, alpha=0.001 / 9.0, beta=0.75)
  with v1.variable_scope("conv1") as scope:
    kernel, biases = _layer("conv1", [5, 5, 3, 64], initial, 0.0, dtype)
    conv = tf.nn.conv2d(images, kernel, [1, 1, 1, 1], padding="SAME")
    conv1 = tf.nn.relu(tf.nn.bias_add(conv, biases), name=scope.name)
  pool1 = v1.nn.max_pool(conv1, ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1], padding="SAME")
  norm1 = tf.nn.lrn(pool1, **lrn)
  with v1.variable_scope("conv2") as scope:
    kernel, biases = _layer("conv2", [5, 5, 64, 64], initial, 0.0, dtype)
    conv = tf.nn.conv2d(norm1, kernel, [1, 1, 1, 1], padding="SAME")
    conv2 = tf.nn.relu(tf.nn.bias_add(conv, biases), name=scope.name)
  norm2 = tf.nn.lrn(conv2, **lrn)
  pool2 = v1.nn.max_pool(norm2, ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1], padding="SAME")
  with v1.variable_scope("local3") as scope:
    reshape = tf.reshape(pool2, [images.shape[0], -1])
    weights, biases = _layer("local3", [reshape.shape[1], 384], initial, 0.004, dtype)
    local3 = tf.nn.relu(tf.matmul(reshape, weights) + biases, name=scope.name)
  with v1.variable_scope("local4") as scope:
    weights, biases = _layer("local4", [384, 192], initial, 0.004, dtype)
    local4 = tf.nn.relu(tf.matmul(local3, weights) + biases, name=scope.name)
  with v1.variable_scope("softmax_linear") as scope:
    weights, biases = _layer("softmax_linear", [192, 10], initial, 0.0, dtype)
    return tf.add(tf.matmul(local4, weights), biases, name=scope.name)


def loss(logits, labels):
  cross_entropy = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.cast(labels, tf.int64), logits=logits, name="cross_entropy_per_example")
  v1.add_to_collection("losses", tf.reduce_mean(cross_entropy, name="cross_entropy"))
  return tf.add_n(v1.get_collection("losses"), name="total_loss")


def tower_loss(scope, images, labels, initial, dtype):
  loss(inference(images, initial, dtype), labels)
  return tf.add_n(v1.get_collection("losses", scope), name="total_loss")


def average_gradients(tower_grads):
  average_grads = []
  for grad_and_vars in zip(*tower_grads):
    grad = tf.reduce_mean(tf.concat([tf.expand_dims(g, 0) for g, _ in grad_and_vars], 0), 0)
    average_grads.append((grad, grad_and_vars[0][1]))
  return average_grads


def train(num_gpus, seed, steps, batch_size, decay_steps, ema_reads, save_path=None,
          save_after=None, dtype=tf.float32):
  """`steps` steps of the original on the shared stream of `seed`, from the project's initial
  values for `seed`; returns {"grads": first step's averaged gradients, "weights", "ema",
  "global_step"} as numpy, keyed by TF1 names. With save_path, the original's
  Saver(tf.global_variables()) writes `save_path-<loop index>` after `save_after` steps (by
  default the last), numbered by the loop index as the original numbered its files."""
  initial = model.initial_values(seed)
  with tf.Graph().as_default(), tf.device("/cpu:0"):
    global_step = v1.get_variable("global_step", [], initializer=v1.constant_initializer(0),
                                  trainable=False)
    lr = v1.train.exponential_decay(0.1, global_step, decay_steps, 0.1, staircase=True)
    opt = v1.train.GradientDescentOptimizer(lr)
    stream = ip.train_dataset(sources.synthetic_source(seed), seed=seed,
                              global_batch_size=batch_size * num_gpus)
    images, labels = v1.data.make_one_shot_iterator(stream).get_next()
    images = tf.cast(images, dtype)
    image_slices, label_slices = tf.split(images, num_gpus), tf.split(labels, num_gpus)
    tower_grads, tower_losses = [], []
    with v1.variable_scope(v1.get_variable_scope()):
      for i in range(num_gpus):
        with tf.device(f"/cpu:{i}"), tf.name_scope(f"{TOWER_NAME}_{i}") as scope:
          tower_losses.append(tower_loss(scope, image_slices[i], label_slices[i], initial,
                                         dtype))
          v1.get_variable_scope().reuse_variables()
          tower_grads.append(opt.compute_gradients(tower_losses[-1]))
    grads = average_gradients(tower_grads)
    variable_averages = v1.train.ExponentialMovingAverage(0.9999, global_step)
    if ema_reads == "previous":
      variables_averages_op = variable_averages.apply(v1.trainable_variables())
      with tf.control_dependencies([variables_averages_op]):
        train_op = opt.apply_gradients(grads, global_step=global_step)
    else:
      apply_gradient_op = opt.apply_gradients(grads, global_step=global_step)
      with tf.control_dependencies([apply_gradient_op]):
        train_op = variable_averages.apply(v1.trainable_variables())
    saver = v1.train.Saver(v1.global_variables())
    names = [re.sub(r":0$", "", v.name) for v in v1.trainable_variables()]
    averages = [variable_averages.average(v) for v in v1.trainable_variables()]
    config = v1.ConfigProto(device_count={"CPU": num_gpus, "GPU": 0})
    with v1.Session(config=config) as sess:
      sess.run(v1.global_variables_initializer())
      step_grads = []
      for step in range(steps):
        # The gradients of the batch this step trains on (the update waits for them).
        step_grads.append(sess.run([train_op, [g for g, _ in grads]])[1])
        if save_path and step + 1 == (save_after or steps):
          saver.save(sess, save_path, global_step=step)
      weights, ema, final_step = sess.run([v1.trainable_variables(), averages, global_step])
  return {"grads": dict(zip(names, step_grads[0])), "weights": dict(zip(names, weights)),
          "ema": dict(zip(names, ema)), "global_step": final_step}


def eval_recipe(checkpoint_dir):
  """The original `cifar10_eval.py` restore: the model's variables under their scopes,
  `ExponentialMovingAverage(0.9999).variables_to_restore()`, a Saver over that map, the newest
  checkpoint of the folder, and the global step parsed from its file name. Returns (step,
  {TF1 name: restored value})."""
  with tf.Graph().as_default():
    images = tf.zeros([1, 24, 24, 3])
    inference(images, {n: np.zeros(s.shape, np.float32) for n, s in
                       zip(model.VARIABLE_NAMES, model.SPECS)}, tf.float32)
    variable_averages = v1.train.ExponentialMovingAverage(0.9999)
    saver = v1.train.Saver(variable_averages.variables_to_restore())
    with v1.Session() as sess:
      ckpt = v1.train.get_checkpoint_state(checkpoint_dir)
      saver.restore(sess, ckpt.model_checkpoint_path)
      global_step = ckpt.model_checkpoint_path.split("/")[-1].split("-")[-1]
      values = sess.run({re.sub(r":0$", "", v.name): v for v in v1.trainable_variables()})
  return int(global_step), values
