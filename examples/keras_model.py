"""The CIFAR-10 model as a Keras model over the shared core: the TF2 `multi_gpu_model`.

TF1's `keras.utils.multi_gpu_model(model, gpus=N)` copied a model onto N towers and
concatenated their outputs (renaming them on the way). TF2 replaces it with nothing but a
strategy scope: build and compile the model under `MirroredStrategy`, and `fit` splits each
global batch over the replicas, sums the gradients and updates once.

`Cifar10Model` has no layers of its own: its weights are the shared core's variables, with
the values of `cifar10.model.initial_values(seed)`, and its forward pass is
`cifar10.model.inference`, so it is the same network, from the same first bits, as both
trainers. The weight decay is an `add_loss`; Keras divides it and each replica's mean
cross-entropy by the number of replicas, which is the loss both trainers use
(sum(CE) / global batch + weight_decay / N). The learning rate is the shared schedule, read at
the optimizer's step count. The moving averages of the weights are not Keras's (its
optimizer's `use_ema` has another decay rule): examples.keras_loop keeps the trainers' own.

`build_two_outputs` is the second example: a model with two named outputs, whose losses,
loss weights and metrics keep their names under the strategy (multi_gpu_model renamed
outputs to `concatenate_1`, ...).
"""

import dataclasses
import sys

import keras
import tensorflow as tf

from cifar10 import input_pipeline
from cifar10 import losses
from cifar10 import model
from cifar10 import schedule
from cifar10.hparams import DEFAULT
from cifar10.hparams import HParams

# CIFAR-10 classes 0 airplane, 1 automobile, 8 ship, 9 truck; the rest are animals.
VEHICLES = (0, 1, 8, 9)


class Cifar10Model(keras.Model):
  """cifar10.model.inference as a Keras model; weights from the shared seed."""

  def __init__(self, seed, compute_dtype="float32", **kwargs):
    super().__init__(**kwargs)
    self.compute_dtype_ = tf.as_dtype(compute_dtype)
    values = model.initial_values(seed)
    # Keras 3 names cannot hold "/": conv1/weights becomes conv1_weights.
    self.weight_list = [self.add_weight(shape=values[n].shape, initializer="zeros",
                                        name=n.replace("/", "_"), trainable=True)
                        for n in model.VARIABLE_NAMES]
    for variable, name in zip(self.weight_list, model.VARIABLE_NAMES):
      variable.assign(values[name])

  @property
  def params(self):
    """{shared-core name: variable}, e.g. params['conv1/weights']."""
    return dict(zip(model.VARIABLE_NAMES, self.weight_list))

  def call(self, images):
    params = self.params
    self.add_loss(losses.weight_decay(params))
    return model.inference(params, images, self.compute_dtype_)


@keras.saving.register_keras_serializable(package="cifar10")
class SharedSchedule(keras.optimizers.schedules.LearningRateSchedule):
  """cifar10.schedule.learning_rate at the optimizer's step: the trainers' staircase decay."""

  def __init__(self, hparams, decay_steps):
    self.hparams = hparams
    self.decay_steps = decay_steps

  def __call__(self, step):
    return schedule.learning_rate(step, self.decay_steps, self.hparams)

  def get_config(self):
    return {"hparams": dataclasses.asdict(self.hparams), "decay_steps": self.decay_steps}

  @classmethod
  def from_config(cls, config):
    return cls(HParams(**config["hparams"]), config["decay_steps"])


def build(strategy, *, seed, decay_steps, hparams=DEFAULT, compute_dtype="float32"):
  """The compiled model under `strategy`, built (so weights can be loaded before fit)."""
  with strategy.scope():
    net = Cifar10Model(seed, compute_dtype, name="cifar10")
    net.compile(optimizer=keras.optimizers.SGD(SharedSchedule(hparams, decay_steps)),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")])
    net(tf.zeros([1, DEFAULT.image_size, DEFAULT.image_size, 3]))
  return net


class TwoOutputModel(keras.Model):
  """The shared network with a second head: `label` (10 classes) and `vehicle` (2)."""

  def __init__(self, seed, **kwargs):
    super().__init__(**kwargs)
    self.body = Cifar10Model(seed, name="cifar10")
    self.vehicle_head = keras.layers.Dense(
        2, name="vehicle_head", kernel_initializer=keras.initializers.GlorotUniform(seed))

  def call(self, images):
    logits = self.body(images)
    return {"label": logits, "vehicle": self.vehicle_head(logits)}


def two_output_targets(images, labels):
  """(images, {'label': class, 'vehicle': 1 for airplane/automobile/ship/truck else 0})."""
  vehicle = tf.cast(tf.reduce_any(tf.equal(labels[:, None], VEHICLES), axis=1), tf.int32)
  return images, {"label": labels, "vehicle": vehicle}


def build_two_outputs(strategy, *, seed, learning_rate=0.05, vehicle_weight=0.5):
  """A compiled TwoOutputModel: named losses, loss weights and metrics per output."""
  with strategy.scope():
    net = TwoOutputModel(seed, name="two_outputs")
    scce = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    net.compile(optimizer=keras.optimizers.SGD(learning_rate),
                loss={"label": scce, "vehicle": scce},
                loss_weights={"label": 1.0, "vehicle": vehicle_weight},
                metrics={"label": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
                         "vehicle": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]})
    net(tf.zeros([1, DEFAULT.image_size, DEFAULT.image_size, 3]))
  return net


def fit_two_outputs(strategy, source, *, seed, steps, batch_size, vehicle_weight):
  """Fits build_two_outputs on `source`'s shared stream; returns fit's history dict. Keras's
  progress bar on a terminal; elsewhere (a file, a pipe) its one line per epoch: the bar
  redrawn with colour codes and backspaces at every step made a log file one long line."""
  net = build_two_outputs(strategy, seed=seed, vehicle_weight=vehicle_weight)
  stream = input_pipeline.train_dataset(
      source, seed=seed, global_batch_size=batch_size * strategy.num_replicas_in_sync)
  return net.fit(stream.map(two_output_targets), steps_per_epoch=steps, epochs=1,
                 verbose=1 if sys.stdout.isatty() else 2, shuffle=False).history
