"""Device (model) parallelism with explicit device scopes: two branches of one model.

The TF1 GPU guide's other multi-device pattern: not replicas of the whole model, but parts of
one model on different devices. Here one shared layer, the CIFAR-10 network of the shared core
(`cifar10.model.inference`, one set of weights), is applied to two inputs, each on its own
device: the image on devices[0] and its mirror image on devices[1]. The host concatenates the
two branches' logits and a small head on the host maps the 20 values to the 10 classes. The
weights live on the host, as in the TF1 guide (`/cpu:0` variables, read by each device).

In TF2 this is nothing but `tf.device` scopes inside a `tf.function`; no strategy is involved.
The ops are named `branch_0/...`, `branch_1/...` and `head/...`, so the placement log
(`--log_device_placement`) shows where each part ran. Run it with
`python -m examples.model_parallel --num_gpus=2`.
"""

from absl import logging
import numpy as np
import tensorflow as tf

from cifar10 import input_pipeline
from cifar10 import losses
from cifar10 import model
from cifar10.hparams import DEFAULT


class TwoBranchModel:
  """The shared network on two devices, a head on the host; plain SGD."""

  def __init__(self, devices, host, seed, learning_rate=0.05):
    if len(devices) != 2:
      raise ValueError(f"two branch devices are needed, got {devices}")
    self.devices, self.host, self.learning_rate = list(devices), host, learning_rate
    values = model.initial_values(seed)
    rng = np.random.Generator(np.random.Philox(key=seed + 1))
    classes = DEFAULT.num_classes
    head = rng.normal(0.0, 0.1, size=(2 * classes, classes)).astype(np.float32)
    with tf.device(host):
      self.params = {n: tf.Variable(values[n], name=n) for n in model.VARIABLE_NAMES}
      self.head = tf.Variable(head, name="head/weights")
    self.variables = [self.params[n] for n in model.VARIABLE_NAMES] + [self.head]

  def logits(self, images):
    """Class logits of a batch: each branch on its device, the head on the host."""
    views = [images, tf.image.flip_left_right(images)]
    branches = []
    for i, (device, view) in enumerate(zip(self.devices, views)):
      with tf.device(device), tf.name_scope(f"branch_{i}"):
        branches.append(model.inference(self.params, view))
    with tf.device(self.host), tf.name_scope("head"):
      return tf.matmul(tf.concat(branches, axis=1), self.head)

  @tf.function
  def train_step(self, images, labels):
    with tf.GradientTape() as tape:
      logits = self.logits(images)
      with tf.device(self.host), tf.name_scope("head"):
        loss = tf.reduce_mean(losses.cross_entropy(logits, labels))
    grads = tape.gradient(loss, self.variables)
    with tf.device(self.host):
      for var, grad in zip(self.variables, grads):
        var.assign_sub(self.learning_rate * grad)
    return loss


def train(devices, source, *, seed, steps, batch_size, learning_rate, log_frequency):
  """Trains a TwoBranchModel on `source`'s shared stream; returns the logged losses."""
  net = TwoBranchModel(devices, "/cpu:0", seed, learning_rate)
  logging.info("Branches on %s, head and weights on /cpu:0", devices)
  stream = iter(input_pipeline.train_dataset(source, seed=seed, global_batch_size=batch_size))
  logged = []
  for step in range(steps):
    loss = net.train_step(*next(stream))
    if step % log_frequency == 0 or step == steps - 1:
      logged.append(float(loss))
      logging.info("step %d, loss = %.3f", step, logged[-1])
  return logged
