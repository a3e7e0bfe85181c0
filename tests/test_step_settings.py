"""The step's settings reach both trainers as one value, StepSettings.of(config, replicas).

Before, they went by keyword through three loop builders (the v1 graph took 12 parameters,
the Trainer 9): a setting added to one hop and not another was a silent default (issue 62).
"""

import dataclasses
import inspect

import pytest
import tensorflow as tf

from cifar10 import config
from cifar10 import precision
from cifar10 import schedule
from cifar10.step_settings import StepSettings
from compat_v1.step import build_train_graph
from strategies.step import Trainer

FIELDS = {f.name for f in dataclasses.fields(StepSettings)}


def test_a_runs_flags_resolve_to_the_steps_settings_for_its_replicas(tmp_path):
  run = config.TrainConfig(train_dir=str(tmp_path), dataset="synthetic", seed=17,
                           batch_size=32, learning_rate=0.05, precision="fp16",
                           ema_reads="previous")
  settings = StepSettings.of(run, 4, jit_compile=True)
  assert settings.seed == 17
  assert settings.decay_steps == schedule.decay_steps(32, 4, run.decay_steps_per_global_batch)
  per_global = dataclasses.replace(run, decay_steps_per_global_batch=True)
  # int(50000 / (32 x N) x 350): the replicas decide it
  assert [StepSettings.of(per_global, n).decay_steps for n in (2, 4)] == [273437, 136718]
  assert settings.hparams.initial_learning_rate == 0.05 and settings.hparams.batch_size == 32
  assert settings.compute_dtype == tf.float16
  assert settings.loss_scale == config.DEFAULT_LOSS_SCALE and not settings.dynamic
  assert settings.ema_reads == "previous" and settings.jit_compile
  dynamic = dataclasses.replace(run, loss_scale=precision.DYNAMIC)
  assert StepSettings.of(dynamic, 1).dynamic
  assert StepSettings.of(dataclasses.replace(run, decay_steps=7), 4).decay_steps == 7


@pytest.mark.parametrize("step", [build_train_graph, Trainer.__init__],
                         ids=["compat_v1", "strategies"])
def test_neither_step_takes_a_setting_by_keyword(step):
  parameters = set(inspect.signature(step).parameters)
  assert "settings" in parameters
  assert not parameters & FIELDS, parameters & FIELDS


def test_what_a_step_cannot_run_is_refused_where_it_is_declared_or_built():
  with pytest.raises(ValueError, match="ema_reads must be one of"):
    StepSettings(seed=1, decay_steps=1, ema_reads="before")
  with tf.Graph().as_default(), pytest.raises(ValueError, match="no per-replica function"):
    build_train_graph(tf.zeros([2, 24, 24, 3]), tf.zeros([2], tf.int32), ["/cpu:0"],
                      StepSettings(seed=1, decay_steps=1, jit_compile=True))
