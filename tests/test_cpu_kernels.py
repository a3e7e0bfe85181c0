"""--precision on a CPU (harness.devices.cpu_kernels): fp16 refused where oneDNN's float16 kernels
would take it (Xeons with AVX-512 FP16: ~20x slower and NaN at step 14, measured there), run
with a one-line warning elsewhere; bf16 refused where oneDNN is capped below AVX-512 on an
AVX-512 CPU. The machine is faked at the boundary (tfbits.machine.describe)."""

import pytest

from harness.devices import cpu_kernels
from tfbits import machine
from tests import helpers

SAPPHIRE_RAPIDS = ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16",
                   "avx512_fp16", "amx_tile", "amx_int8", "amx_bf16")
ZEN4 = ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16")


def _machine(isa, onednn=True, cap=""):
  return machine.Machine("CPU", 2, isa, onednn, cap, "2.21.0", "3.15.1")


@pytest.mark.parametrize("precision, where, refused, warned", [
    ("fp16", _machine(SAPPHIRE_RAPIDS), "runs oneDNN's float16 kernels (it has avx512_fp16)",
     None),
    # TF_ENABLE_ONEDNN_OPTS=0 on the same CPU: TensorFlow's own kernels, the warning only.
    ("fp16", _machine(SAPPHIRE_RAPIDS, onednn=False), None, "several times slower than fp32"),
    ("fp16", _machine(ZEN4), None, "several times slower than fp32"),
    ("fp16", _machine(("avx2", "fma"), onednn=False), None, "several times slower"),
    ("bf16", _machine(SAPPHIRE_RAPIDS), None, None),
    ("bf16", _machine(ZEN4, cap="AVX2"), "with ONEDNN_MAX_CPU_ISA=AVX2: TensorFlow hands "
     "bfloat16 to oneDNN", None),
    ("bf16", _machine(ZEN4, cap="avx2_vnni_2"), "capped below AVX512_CORE", None),
    ("bf16", _machine(ZEN4, cap="AVX512_CORE"), None, None),
    ("bf16", _machine(ZEN4, onednn=False, cap="AVX2"), None, None),
    # A real AVX2 CPU: TensorFlow keeps bfloat16 off oneDNN without AVX-512.
    ("bf16", _machine(("avx2", "fma"), cap="AVX2"), None, None),
    ("fp32", _machine(SAPPHIRE_RAPIDS, cap="AVX2"), None, None),
])
def test_each_precision_on_each_cpu_kind(precision, where, refused, warned):
  line = cpu_kernels.refusal(precision, where)
  assert (line is None) if refused is None else (refused in line), line
  cost = cpu_kernels.warning(precision, where)
  assert (cost is None) if warned is None else (warned in cost), cost


@pytest.mark.parametrize("trainer", ["strategies.train", "compat_v1.train"])
def test_both_trainers_refuse_fp16_on_onednn_float16_kernels_in_one_line(trainer, tmp_path,
                                                                        monkeypatch):
  monkeypatch.setattr(machine, "describe", lambda: _machine(SAPPHIRE_RAPIDS))
  result = helpers.call(trainer, "--precision=fp16", "--dataset=synthetic", "--max_steps=1",
                        f"--train_dir={tmp_path / 'run'}")
  line = helpers.check_one_line(result, "--precision=fp16 on this CPU runs oneDNN's float16 "
                                        "kernels")
  assert line.endswith("or TF_ENABLE_ONEDNN_OPTS=0 to run fp16 on TensorFlow's own kernels")
  assert not (tmp_path / "run").exists()  # refused before anything was written


def test_a_gpu_run_is_not_asked(monkeypatch):
  # The GPU plan: its steps never meet the CPU's kernels (GPU listing faked, as elsewhere).
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from cifar10 import config  # pylint: disable=g-import-not-at-top
  from harness.devices import gpu_runtime  # pylint: disable=g-import-not-at-top
  asked = []
  monkeypatch.setattr(cpu_kernels, "check", asked.append)
  gpus = [tf.config.PhysicalDevice("/physical_device:GPU:0", "GPU")]
  monkeypatch.setattr(tf.config, "list_physical_devices",
                      lambda kind=None: gpus if kind == "GPU" else [])
  monkeypatch.setattr(tf.config, "get_visible_devices", lambda kind=None: gpus)
  kind, _, _ = gpu_runtime.configure(config.DeviceConfig(precision="fp16"))
  assert kind == "GPU" and asked == []
  kind, _, _ = gpu_runtime.configure(config.DeviceConfig(precision="fp16", cpu_only=True))
  assert kind == "CPU" and asked == ["fp16"]


def test_this_machine_warns_or_refuses_as_its_kernels_say(tmp_path, caplog):
  here = machine.describe()
  result = helpers.call("strategies.train", "--precision=fp16", "--dataset=synthetic",
                        "--max_steps=1", "--batch_size=2", f"--train_dir={tmp_path}")
  if cpu_kernels.refusal("fp16", here):
    assert result.returncode == 2
  else:
    assert result.returncode == 0, result.stderr[-2000:]
    assert cpu_kernels.warning("fp16", here) in result.stderr
