"""The same CNN written the way Keras users write it: the peer the benchmark holds TF2 against.

Layers, not the shared core's functions: `Sequential` of Conv2D / MaxPooling2D / LRN / Dense
with Keras's own initializers, `compile(SGD, SparseCategoricalCrossentropy)` and `fit` over
MirroredStrategy, fed by the shared synthetic stream. Its numbers are not the trainers' (other
initial weights, no EMA, no weight decay schedule of the original): it is here for speed only.
"""

import keras
import tensorflow as tf


def _lrn(x):
  # In float32 whatever the compute dtype, as cifar10.model does: TensorFlow's LRN has float32
  # kernels only on GPUs (float16 ran on the CPU there, silently) and none for bfloat16.
  y = tf.nn.lrn(tf.cast(x, tf.float32), depth_radius=4, bias=1.0, alpha=0.001 / 9.0, beta=0.75)
  return tf.cast(y, x.dtype)


def build(strategy, learning_rate=0.1):
  """The compiled peer model under `strategy`."""
  with strategy.scope():
    net = keras.Sequential([
        keras.Input((24, 24, 3)),
        keras.layers.Conv2D(64, 5, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(3, 2, padding="same"),
        keras.layers.Lambda(_lrn),
        keras.layers.Conv2D(64, 5, padding="same", activation="relu"),
        keras.layers.Lambda(_lrn),
        keras.layers.MaxPooling2D(3, 2, padding="same"),
        keras.layers.Flatten(),
        keras.layers.Dense(384, activation="relu",
                           kernel_regularizer=keras.regularizers.L2(0.004)),
        keras.layers.Dense(192, activation="relu",
                           kernel_regularizer=keras.regularizers.L2(0.004)),
        keras.layers.Dense(10),
    ])
    net.compile(optimizer=keras.optimizers.SGD(learning_rate),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  return net
