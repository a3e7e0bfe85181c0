"""Which machine the bits were made on (tfbits.machine): the CPU and the instruction sets that
pick TensorFlow's kernels, oneDNN on or off as TensorFlow decides it, the versions, the GPUs;
and that every run log, the kit's report and the equivalence report carry it."""

import dataclasses
import os
import subprocess
import sys
import types

import pytest
import tensorflow as tf

import porting
from tfbits import machine
from tfbits import threads
from tests import helpers

# /proc/cpuinfo of the kinds CI and users have (flags cut to what matters and some noise).
SAPPHIRE_RAPIDS = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
flags\t\t: fpu sse2 avx avx2 fma avx512f avx512dq avx512bw avx512_vnni avx512_bf16 avx512_fp16 amx_bf16 amx_tile amx_int8
processor\t: 1
model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
flags\t\t: fpu sse2 avx avx2 fma avx512f avx512bw avx512_vnni avx512_bf16 avx512_fp16
"""
ZEN4 = """model name\t: AMD EPYC
flags\t\t: sse2 avx f16c avx2 fma avx512f avx512bw avx512_vnni avx512_bf16 avx512vbmi
"""
OLD_AVX2 = """model name\t: AMD EPYC 7B12
flags\t\t: sse2 avx avx2 fma f16c
"""


@pytest.mark.parametrize("text, name, isa, onednn, float16", [
    (SAPPHIRE_RAPIDS, "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz",
     ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "avx512_fp16",
      "amx_tile", "amx_int8", "amx_bf16"), True, True),
    (ZEN4, "AMD EPYC", ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16"),
     True, False),
    # No VNNI, BF16 or AMX: TensorFlow leaves oneDNN off (its Eigen kernels run).
    (OLD_AVX2, "AMD EPYC 7B12", ("avx2", "fma"), False, False),
])
def test_each_cpu_kind_gets_tensorflows_kernel_choice(tmp_path, text, name, isa, onednn,
                                                      float16):
  (tmp_path / "cpuinfo").write_text(text)
  assert machine.cpu_info(str(tmp_path / "cpuinfo")) == (name, isa)
  assert machine.onednn_enabled(isa, {}) is onednn
  kind = machine.Machine(name, 2, isa, onednn, "", "2.21.0", "3.15.1")
  assert bool(kind.float16_kernels) is float16
  # TF_ENABLE_ONEDNN_OPTS decides where set: then no float16 kernels of oneDNN either.
  assert machine.onednn_enabled(isa, {"TF_ENABLE_ONEDNN_OPTS": "0"}) is False
  assert machine.onednn_enabled(isa, {"TF_ENABLE_ONEDNN_OPTS": "1"}) is True
  off = machine.Machine(name, 2, isa, False, "", "2.21.0", "3.15.1")
  assert not off.float16_kernels


def test_no_cpuinfo_is_an_unknown_cpu(tmp_path):
  assert machine.cpu_info(str(tmp_path / "absent")) == ("unknown CPU", ())


def test_the_line_names_everything_that_picks_kernels():
  kind = machine.Machine("Intel Xeon", 16, ("avx2", "avx512f"), True, "AVX2", "2.21.0",
                         "3.15.1", ("NVIDIA H100 (compute 9.0)",) * 2 + ("NVIDIA A100",),
                         "550.54.15")
  assert kind.line() == ("Intel Xeon, 16 CPUs (avx2 avx512f), oneDNN on "
                         "(ONEDNN_MAX_CPU_ISA=AVX2), TensorFlow 2.21.0, Keras 3.15.1, GPUs: "
                         "2 x NVIDIA H100 (compute 9.0), 1 x NVIDIA A100, driver 550.54.15")
  assert machine.Machine.from_dict(kind.as_dict()) == kind


def test_this_process_is_described_as_tensorflow_runs_it():
  here = machine.describe()
  from tensorflow.python.util import _pywrap_util_port  # pylint: disable=g-import-not-at-top
  assert here.onednn is bool(_pywrap_util_port.IsMklEnabled())
  assert here.onednn is machine.onednn_enabled(here.isa)  # the rule is TensorFlow's
  assert here.tensorflow == tf.__version__ and here.gpus == () and here.gpu_driver == ""
  assert here.line().startswith(f"{here.cpu}, ")


# In a child: TensorFlow latches TF_DETERMINISTIC_OPS at its first read, process-wide.
_DESCRIBED = """
import os, sys
from tfbits import machine
first = machine.describe().line()
os.environ.pop("TF_DETERMINISTIC_OPS", None)
print(first); print(machine.describe().line())
"""


def _described(env, taskset=()):
  out = subprocess.run([*taskset, sys.executable, "-c", _DESCRIBED], capture_output=True,
                       text=True, timeout=120, env=env, cwd=helpers.REPO, check=True)
  return out.stdout.splitlines()[-2:]


@pytest.mark.skipif(threads.schedulable_cpus() < 2, reason="needs 2 schedulable CPUs")
@pytest.mark.slow  # over 1.5 s of CPU: the fast tier's budget (tests/conftest.py)
def test_the_line_says_the_cpus_pools_and_op_determinism_the_process_runs():
  """taskset -c 0 on a machine of N CPUs: TensorFlow's pools default to 1 thread each (its
  schedulable CPUs), and the line says so, where it once said the machine's N.

  Set when TensorFlow starts, TF_DETERMINISTIC_OPS=1 gave both trainers other weights after
  one step (conv1's 7.45e-9 apart, measured; docs/determinism.md). The line says what
  TensorFlow runs: still on after the variable is gone (it latched at its first read), where
  the line once read the environment and said off. Two processes carry both checks."""
  env = {k: v for k, v in helpers.env().items()
         if k not in ("TF_DETERMINISTIC_OPS", "TF_NUM_INTRAOP_THREADS",
                      "TF_NUM_INTEROP_THREADS")}
  bound, _ = _described(env, taskset=("taskset", "-c", "0"))
  cpus = os.cpu_count()
  assert f", 1 of {cpus} CPUs (" in bound, bound
  # Nothing set them in that child: TensorFlow's defaults, as tfbits.threads resolves them.
  assert ", intra-op 1, inter-op 1 threads, " in bound, bound
  assert "op determinism" not in bound, bound
  pinned, removed = _described({**env, "TF_NUM_INTRAOP_THREADS": "3",
                                "TF_DETERMINISTIC_OPS": "1"}, taskset=("taskset", "-c", "0"))
  assert ", intra-op 3, inter-op 1 threads, op determinism on, TensorFlow " in pinned, pinned
  assert ", op determinism on, " in removed, removed


def test_the_pools_and_schedulable_cpus_read_back():
  kind = machine.Machine("AMD EPYC", 2, ("avx2", "fma"), False, "", "2.21.0", "3.15.1",
                         deterministic_ops="on", schedulable=1, threads=(1, 1))
  assert kind.line() == ("AMD EPYC, 1 of 2 CPUs (avx2 fma), oneDNN off, intra-op 1, inter-op "
                         "1 threads, op determinism on, TensorFlow 2.21.0, Keras 3.15.1, "
                         "no GPU")
  assert machine.Machine.from_dict(kind.as_dict()) == kind
  # A record written before the pools were read: none said.
  old = {k: v for k, v in kind.as_dict().items() if k not in ("schedulable", "threads")}
  assert "threads" not in machine.Machine.from_dict(old).line()


def test_gpus_are_named_with_the_driver(monkeypatch):
  # TensorFlow's listing and nvidia-smi faked at the boundary, as on a 2-GPU machine.
  gpus = [tf.config.PhysicalDevice(f"/physical_device:GPU:{i}", "GPU") for i in range(2)]
  monkeypatch.setattr(tf.config, "list_physical_devices",
                      lambda kind=None: gpus if kind == "GPU" else [])
  monkeypatch.setattr(tf.config.experimental, "get_device_details",
                      lambda gpu: {"device_name": "NVIDIA H100 80GB HBM3",
                                   "compute_capability": (9, 0)})
  calls = []

  def nvidia_smi(args, **kwargs):
    calls.append(args)
    return subprocess.CompletedProcess(args, 0, "550.54.15\n550.54.15\n", "")

  monkeypatch.setattr(subprocess, "run", nvidia_smi)
  here = machine.describe()
  assert here.gpus == ("NVIDIA H100 80GB HBM3 (compute 9.0)",) * 2
  assert here.gpu_driver == "550.54.15"
  assert calls == [["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]]
  assert here.line().endswith("GPUs: 2 x NVIDIA H100 80GB HBM3 (compute 9.0), driver 550.54.15")


@pytest.mark.filterwarnings("ignore:`tf.layers.batch_normalization` is deprecated")
def test_the_kits_report_says_where_it_ran():
  from tests import bn_momentum_port as m  # pylint: disable=g-import-not-at-top
  report = porting.compare(m.port(), m.batches(1, steps=1), replicas=1, steps=1)
  assert report.machine == machine.describe()
  assert report.text().split("\n")[1] == f"  machine: {machine.describe().line()}"


def test_a_long_machine_line_breaks_at_its_commas_within_the_width(caplog):
  from harness.control import progress  # pylint: disable=g-import-not-at-top
  caplog.set_level("INFO")
  server = machine.Machine(
      cpu="Intel(R) Xeon(R) Platinum 8480+", cpus=224, isa=("avx2",), onednn=True,
      onednn_max_isa=None, tensorflow="2.21.0", keras="3.15.1",
      gpus=("NVIDIA H100 80GB HBM3",) * 8, gpu_driver="550.54.15")
  progress.log_machine(server)
  assert caplog.messages == [
      "Machine: Intel(R) Xeon(R) Platinum 8480+, 224 CPUs, oneDNN on, TensorFlow 2.21.0,",
      "  Keras 3.15.1, GPUs: 8 x NVIDIA H100 80GB HBM3, driver 550.54.15"]
  assert max(map(len, caplog.messages)) + len("00:00:00 ") <= 100
  caplog.clear()
  progress.log_machine(dataclasses.replace(server, cpu="AMD EPYC", cpus=2, gpus=(),
                                           gpu_driver=None))
  assert caplog.messages == [
      "Machine: AMD EPYC, 2 CPUs, oneDNN on, TensorFlow 2.21.0, Keras 3.15.1, no GPU"]


def test_a_training_run_and_its_evaluation_log_their_machine(tmp_path, caplog):
  from cifar10 import config  # pylint: disable=g-import-not-at-top
  caplog.set_level("INFO")
  run = config.TrainConfig(train_dir=str(tmp_path / "run"), dataset="synthetic", batch_size=2,
                           max_steps=1, seed=1)
  helpers.train_v1(run)
  # The instruction sets are in run_config.json; on the screen they made a 200-column line.
  # (An ONEDNN_MAX_CPU_ISA cap is a setting of the run, and is said: "oneDNN on
  # (ONEDNN_MAX_CPU_ISA=AVX2)"; the CPU's own list is what stays off.)
  here = machine.describe()
  line = f"Machine: {here.line(isa=False)}"
  listed = " ".join(here.isa) or "no AVX2"
  assert _machine_lines(caplog.messages) == [line] and f"({listed})" not in line
  assert f"({listed})" in here.line()  # the list the screen leaves out
  result = helpers.call("strategies.eval", f"--checkpoint_dir={tmp_path / 'run'}",
                        "--dataset=synthetic", "--run_once", "--num_examples=8", "--seed=1",
                        f"--eval_dir={tmp_path / 'eval'}")
  assert result.returncode == 0, result.stderr[-2000:]
  assert _machine_lines(result.stderr.splitlines()) == [line], result.stderr[-2000:]


def _machine_lines(lines):
  """Each `Machine: ...` line of a log, its wrapped continuations (progress.log_machine:
  indented, under 100 columns) joined back to one line."""
  out = []
  for text in lines:
    text = text.split("] ", 1)[-1] if "] " in text[:40] else text  # absl's prefix
    text = text.split(" ", 1)[1] if text[:2].isdigit() and text[2:3] == ":" else text
    if text.startswith("Machine: "):
      out.append(text)
    elif out and text.startswith("  ") and out[-1].endswith(","):
      out[-1] += " " + text.strip()
  return out


def test_tensorflow_1s_own_keras_is_named_where_no_keras_package_is(monkeypatch):
  """TensorFlow 1.15 bundles tf.keras (2.2.4-tf) and no keras package: its records' machine
  line said 'Keras not installed' though tf.keras built the towers' layers there."""
  monkeypatch.setattr(machine, "_version", lambda package: "not installed")
  bundled = types.SimpleNamespace(keras=types.SimpleNamespace(__version__="2.2.4-tf"))
  assert machine._keras(bundled) == "2.2.4-tf (tf.keras)"  # pylint: disable=protected-access
  assert machine._keras(types.SimpleNamespace()) == "not installed"  # pylint: disable=W0212
