"""MIGRATION.md's EMA checkpoint line for Keras 3 holds: tf.train.ExponentialMovingAverage
takes a Keras 3 variable's tf.Variable (`.value`), not the Keras variable itself."""

import keras
import numpy as np
import pytest
import tensorflow as tf


def test_the_averages_are_taken_of_each_keras_variables_value():
  model = keras.Sequential([keras.layers.Dense(2, kernel_initializer="ones")])
  model.build((None, 3))
  ema = tf.train.ExponentialMovingAverage(0.5)
  with pytest.raises(AttributeError, match="base_dtype"):
    ema.apply(model.trainable_variables)
  ema.apply([v.value for v in model.trainable_variables])
  model.trainable_variables[0].assign(np.full((3, 2), 3.0, np.float32))
  ema.apply([v.value for v in model.trainable_variables])
  averages = [ema.average(v.value) for v in model.trainable_variables]
  np.testing.assert_array_equal(averages[0].numpy(), np.full((3, 2), 2.0, np.float32))
  checkpoint = tf.train.Checkpoint(model=model, averages=averages)
  assert len(checkpoint.averages) == 2
