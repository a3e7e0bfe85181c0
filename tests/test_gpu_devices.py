"""What each process asks of its GPUs, proved without a GPU: TensorFlow's device listing and
tf.config setters are faked (this machine has none), and the calls the binaries make are
recorded. The memory flags reach every visible GPU (both trainers); the evaluators take their
own device flags on one device; each parameter-server task sets up its devices; the towers
update and average the weights on their replicas' device type, as TF2 does.
"""

import pytest
import tensorflow as tf

from cifar10 import devices as device_plan
from cifar10 import config
from cifar10 import model
from compat_v1 import devices as v1_devices
from harness.devices import gpu_memory
from strategies import devices as tf2_devices
from tests import helpers


class _FakeTF:
  """Records the tf.config calls of devices.setup on a machine with `gpus` fake GPUs."""

  def __init__(self, monkeypatch, gpus):
    self.gpus = [tf.config.PhysicalDevice(f"/physical_device:GPU:{i}", "GPU")
                 for i in range(gpus)]
    self.calls = []
    cfg = tf.config
    monkeypatch.setattr(cfg, "list_physical_devices",
                        lambda kind=None: self.gpus if kind == "GPU" else [])
    for name in ("set_visible_devices", "set_logical_device_configuration",
                 "set_soft_device_placement"):
      monkeypatch.setattr(cfg, name, self._recorder(name))
    monkeypatch.setattr(cfg.experimental, "set_memory_growth", self._recorder("growth"))
    # The bit contract's settings (harness.devices.determinism), recorded: for real, op determinism
    # would stay on in this process and refuse later tests' unseeded ops.
    monkeypatch.setattr(cfg.experimental, "enable_op_determinism",
                        self._recorder("op_determinism"))
    monkeypatch.setattr(cfg.experimental, "enable_tensor_float_32_execution",
                        self._recorder("tf32"))
    monkeypatch.setattr(tf.debugging, "set_log_device_placement", self._recorder("log"))
    for name in ("set_intra_op_parallelism_threads", "set_inter_op_parallelism_threads"):
      monkeypatch.setattr(cfg.threading, name, self._recorder(name))
    monkeypatch.setattr(gpu_memory, "total_gpu_memory_mb", lambda: 16000)
    # A fresh runtime: nothing set yet, so setup sets everything.
    monkeypatch.setattr(cfg, "get_visible_devices", lambda kind=None: [])
    monkeypatch.setattr(cfg, "get_logical_device_configuration", lambda device: None)
    for name in ("get_intra_op_parallelism_threads", "get_inter_op_parallelism_threads"):
      monkeypatch.setattr(cfg.threading, name, lambda: None)

  def _recorder(self, name):
    return lambda *args: self.calls.append((name,) + args)

  def of(self, name):
    return [c[1:] for c in self.calls if c[0] == name]


def test_tf2_memory_settings_reach_every_visible_gpu(monkeypatch):
  fake = _FakeTF(monkeypatch, gpus=3)
  names = tf2_devices.setup(config.DeviceConfig(num_gpus=2, visible_gpus="0,2",
                                            memory_fraction=0.5, allow_growth=False))
  assert names == ["/gpu:0", "/gpu:1"]
  g0, _, g2 = fake.gpus
  assert fake.of("set_visible_devices") == [([g0, g2], "GPU")]
  # per_process_gpu_memory_fraction=0.5 of a 16000 MiB GPU -> a limit of 8000 MiB on each.
  limits = [(gpu, [c.memory_limit for c in configs])
            for gpu, configs in fake.of("set_logical_device_configuration")]
  assert limits == [(g0, [8000]), (g2, [8000])]
  assert fake.of("growth") == []
  assert fake.of("set_soft_device_placement") == [(True,)]
  assert fake.of("op_determinism") == [()] and fake.of("tf32") == [(False,)]  # --deterministic

  fake.calls.clear()
  # --num_gpus=2 of 3: the third stays hidden (before: all 3 visible and set up, so the run
  # mapped memory on a GPU it never used, and a multi-worker resolver counted 3 replicas).
  tf2_devices.setup(config.DeviceConfig(num_gpus=2, allow_growth=True, memory_limit_mb=3000))
  assert fake.of("set_visible_devices") == [([g0, fake.gpus[1]], "GPU")]
  assert fake.of("growth") == [(g, True) for g in fake.gpus[:2]]
  assert [gpu for gpu, _ in fake.of("set_logical_device_configuration")] == fake.gpus[:2]


def test_v1_memory_settings_reach_every_visible_gpu(monkeypatch):
  fake = _FakeTF(monkeypatch, gpus=3)
  names, proto = v1_devices.setup(config.DeviceConfig(num_gpus=2, visible_gpus="0,2",
                                                   memory_fraction=0.5, allow_growth=True))
  assert names == ["/gpu:0", "/gpu:1"]
  assert proto.gpu_options.visible_device_list == "0,2"
  assert proto.gpu_options.per_process_gpu_memory_fraction == 0.5  # a fraction of each GPU
  assert proto.gpu_options.allow_growth
  # The eager runtime that tf.data's functions start in the same process gets the same GPUs
  # and settings (before: none, so it took all 3, mapped their memory, and its GPU:1 was
  # physical GPU 1 where the Session's was GPU 2).
  g0, _, g2 = fake.gpus
  assert fake.of("set_visible_devices") == [([g0, g2], "GPU")]
  assert fake.of("growth") == [(g0, True), (g2, True)]
  assert [(gpu, [c.memory_limit for c in configs])
          for gpu, configs in fake.of("set_logical_device_configuration")] == [
              (g0, [8000]), (g2, [8000])]
  _, proto = v1_devices.setup(config.DeviceConfig(num_gpus=3, memory_limit_mb=3000))
  assert [list(d.memory_limit_mb) for d in proto.gpu_options.experimental.virtual_devices] == [
      [3000], [3000], [3000]]
  _, proto = v1_devices.setup(config.DeviceConfig(num_gpus=1, memory_limit_mb=3000))
  assert proto.gpu_options.visible_device_list == "0"  # before: "0,1,2"
  assert len(proto.gpu_options.experimental.virtual_devices) == 1


class _Stop(Exception):
  pass


@pytest.mark.parametrize("evaluator", ["strategies", "compat_v1"])
def test_the_evaluators_take_their_device_flags_and_one_device(evaluator, tmp_path,
                                                                monkeypatch):
  # Before: no device flags, so an evaluator beside a training run (as the original ran it)
  # mapped memory on every GPU of the machine, the trainer's included.
  import importlib  # pylint: disable=g-import-not-at-top
  module = importlib.import_module(f"{evaluator}.evaluator")
  asked = []

  def setup(device_config):
    asked.append(device_config)
    raise _Stop
  monkeypatch.setattr(module.devices, "setup", setup)
  with pytest.raises(_Stop):
    helpers.call(f"{evaluator}.eval", "--dataset=synthetic", f"--checkpoint_dir={tmp_path}",
                 "--run_once", "--visible_gpus=2", "--allow_growth",
                 "--gpu_memory_limit_mb=2000")
  assert asked == [config.DeviceConfig(num_gpus=1, visible_gpus="2", allow_growth=True,
                                       memory_limit_mb=2000)]


def test_an_evaluator_on_gpu_2_of_3_sees_only_gpu_2(monkeypatch):
  fake = _FakeTF(monkeypatch, gpus=3)
  tf2_devices.setup(config.DeviceConfig(num_gpus=1, visible_gpus="2", allow_growth=True))
  assert fake.of("set_visible_devices") == [([fake.gpus[2]], "GPU")]
  assert fake.of("growth") == [(fake.gpus[2], True)]


@pytest.mark.parametrize("task_type", ["chief", "worker", "ps"])
def test_a_parameter_server_task_sets_up_its_devices(task_type, monkeypatch):
  # Before: the worker and ps tasks served without any device set-up, so on a GPU machine
  # each took and mapped every GPU, and a worker's GPUs all became replicas.
  import json  # pylint: disable=g-import-not-at-top
  import socket  # pylint: disable=g-import-not-at-top
  ports = []
  for _ in range(3):
    with socket.socket() as s:
      s.bind(("127.0.0.1", 0))
      ports.append(s.getsockname()[1])
  monkeypatch.setenv("TF_CONFIG", json.dumps({
      "cluster": {"chief": [f"127.0.0.1:{ports[0]}"], "worker": [f"127.0.0.1:{ports[1]}"],
                  "ps": [f"127.0.0.1:{ports[2]}"]},
      "task": {"type": task_type, "index": 0}}))
  asked = []

  def setup(device_config):
    asked.append(device_config)
    raise _Stop
  monkeypatch.setattr(tf2_devices, "setup", setup)
  monkeypatch.setattr(tf2_devices, "serve", lambda: asked.append("served"))
  flags = ["--strategy=parameter_server", "--dataset=synthetic", "--train_dir=/nonexistent",
           "--allow_growth", "--visible_gpus=2", "--gpu_memory_limit_mb=2000"]
  with pytest.raises(_Stop):
    helpers.call("strategies.train", *flags)
  given = config.DeviceConfig(num_gpus=1, visible_gpus="2", allow_growth=True,
                              memory_limit_mb=2000)
  if task_type == "worker":  # one replica: its first visible GPU, with the memory settings
    assert asked == [given]
  else:  # the variables' CPUs, and the scheduler: no GPU at all
    assert asked == [config.DeviceConfig(cpu_only=True, allow_growth=True)]
  result = helpers.call("strategies.train", *flags, "--num_gpus=2")
  assert result.returncode == 2 and "one replica per worker" in result.stderr.splitlines()[-1]


@pytest.mark.parametrize("kind", ["gpu", "cpu"])
def test_the_towers_update_and_average_the_weights_on_the_replicas_device_type(kind):
  # TF2 updates each replica's copy of a weight, and its EMA shadow, on the replica's own
  # device. The towers must do theirs on the same type of device: a GPU kernel may fuse
  # w - lr * g into one rounding where the CPU's rounds twice. Before: always /cpu:0 (the
  # original's _variable_on_cpu), also with towers on GPUs. (The graph is built, not run.)
  from cifar10.step_settings import StepSettings  # pylint: disable=g-import-not-at-top
  from compat_v1.step import build_train_graph  # pylint: disable=g-import-not-at-top
  names = [f"/{kind}:0", f"/{kind}:1"]
  graph = tf.Graph()
  with graph.as_default():
    build_train_graph(tf.zeros([4, 24, 24, 3]), tf.zeros([4], tf.int32), names,
                      StepSettings(seed=1, decay_steps=10),
                      param_device=device_plan.parameter_device(names))
  ops = graph.get_operations()
  weights = [op for op in ops if op.type == "VarHandleOp" and op.name in model.VARIABLE_NAMES]
  updates = [op for op in ops if op.type == "ResourceApplyGradientDescent"]
  averages = [op for op in ops if op.type == "AssignSubVariableOp"
              and op.name.startswith("ExponentialMovingAverage/")]
  assert len(weights) == len(updates) == len(averages) == len(model.VARIABLE_NAMES)
  assert {op.device for op in weights + updates + averages} == {f"/device:{kind.upper()}:0"}
  if kind == "cpu":  # TF2: each replica's copy lives, and is updated, on its replica's device
    strategy = tf2_devices.get_strategy("mirrored", names)
    from strategies.step import Trainer  # pylint: disable=g-import-not-at-top
    trainer = Trainer(strategy, StepSettings(seed=1, decay_steps=10))
    for name in model.VARIABLE_NAMES:
      copies = strategy.experimental_local_results(trainer.params[name])
      assert [c.device.lower().rsplit("device:", 1)[1] for c in copies] == ["cpu:0", "cpu:1"]
