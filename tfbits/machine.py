"""The machine a comparison's or a run's bits were made on, as one line and as JSON.

The same graph gives the same bits run after run on one kind of machine with the same
settings, and may give other last bits on another: TensorFlow's CPU kernels depend on the
instruction sets (oneDNN picks its kernels by them) and on whether oneDNN is on at all, and
GPU kernels on the GPU and its driver. Two results that differ are only comparable knowing
where each was made; every report of the kit, `python -m equivalence`, every training run's
log and the benchmark's results.json say it:

  machine: AMD EPYC, 2 CPUs (avx2 fma avx512f avx512bw avx512_vnni avx512_bf16), oneDNN on,
  intra-op 2, inter-op 2 threads, TensorFlow 2.21.0, Keras 3.15.1, no GPU

(`1 of 2 CPUs` where the process may run on fewer than the machine has: taskset, a
container's or Slurm's binding; `op determinism on` where TensorFlow runs deterministic
kernels, as it holds that, not as the environment says.)

`describe()` reads this process's; `Machine` is plain data, so tests describe other machines.
"""

import dataclasses
import os
import subprocess

from tfbits import threads

# /proc/cpuinfo flags that decide which CPU kernels run: TensorFlow turns oneDNN on by default
# where a CPU has VNNI, AVX-512 BF16 or AMX (ONEDNN_DEFAULT), oneDNN dispatches by the AVX
# generation, and float16 goes to oneDNN's kernels with AVX-512 FP16, AMX FP16 or AVX-NE-CONVERT
# (FLOAT16_KERNELS). TensorFlow 2.21's tensorflow/core/util/port.cc and util.cc.
ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "avx512_fp16",
             "avx_vnni", "avx_ne_convert", "amx_tile", "amx_int8", "amx_bf16", "amx_fp16")
ONEDNN_DEFAULT = ("avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16")


@dataclasses.dataclass(frozen=True)
class Machine:
  """cpu: the CPU's model name; cpus: logical CPUs; isa: the ISA_FLAGS it has, in that order;
  onednn: whether TensorFlow's oneDNN kernels are on; onednn_max_isa: ONEDNN_MAX_CPU_ISA, the
  cap on oneDNN's dispatch, if set; gpus: each GPU's name (and compute capability);
  gpu_driver: the NVIDIA driver's version, where nvidia-smi tells it; deterministic_ops:
  "on" where TensorFlow runs deterministic kernels (its own state: TF_DETERMINISTIC_OPS is
  latched at its first read, and enable_op_determinism() sets it; set, both trainers write
  other bits: docs/determinism.md); schedulable: the CPUs the process may run on (0: not
  read); threads: (intra-op, inter-op) pool counts the process runs (tfbits.threads; (): not
  read)."""
  cpu: str
  cpus: int
  isa: tuple
  onednn: bool
  onednn_max_isa: str
  tensorflow: str
  keras: str
  gpus: tuple = ()
  gpu_driver: str = ""
  deterministic_ops: str = ""
  schedulable: int = 0
  threads: tuple = ()

  @property
  def float16_kernels(self):
    """Whether float16 ops go to oneDNN's float16 kernels (TensorFlow's
    IsDataTypeSupportedByOneDNNOnThisCPU), not TensorFlow's own (Eigen)."""
    isa = set(self.isa)
    return self.onednn and (("avx512bw" in isa and isa & {"avx512_fp16", "amx_fp16"})
                            or "avx_ne_convert" in isa)

  def line(self, isa=True):
    """One line: CPU, ISA (unless not `isa`), oneDNN, versions, GPUs."""
    return ", ".join(self.parts(isa))

  def parts(self, isa=True):
    """line()'s comma-separated parts, where a wrapped line may break."""
    onednn = "oneDNN " + ("on" if self.onednn else "off")
    if self.onednn_max_isa:
      onednn += f" (ONEDNN_MAX_CPU_ISA={self.onednn_max_isa})"
    if self.gpus:
      names = sorted(set(self.gpus), key=self.gpus.index)
      gpus = "GPUs: " + ", ".join(f"{self.gpus.count(n)} x {n}" for n in names)
      gpus += f", driver {self.gpu_driver}" if self.gpu_driver else ""
    else:
      gpus = "no GPU"
    sets = f" ({' '.join(self.isa) or 'no AVX2'})" if isa else ""
    determinism = ([f"op determinism {self.deterministic_ops}"]
                   if self.deterministic_ops else [])
    cpus = (f"{self.schedulable} of {self.cpus} CPUs"
            if 0 < self.schedulable < self.cpus else f"{self.cpus} CPUs")
    pools = ([f"intra-op {self.threads[0]}, inter-op {self.threads[1]} threads"]
             if self.threads else [])
    return [self.cpu, f"{cpus}{sets}", onednn, *pools, *determinism,
            f"TensorFlow {self.tensorflow}", f"Keras {self.keras}", gpus]

  def as_dict(self):
    out = dataclasses.asdict(self)
    out["isa"], out["gpus"], out["threads"] = list(self.isa), list(self.gpus), list(
        self.threads)
    return out

  @classmethod
  def from_dict(cls, values):
    """The Machine of an as_dict() (read back from JSON)."""
    return cls(**{**values, "isa": tuple(values["isa"]), "gpus": tuple(values["gpus"]),
                  "threads": tuple(values.get("threads", ()))})


def cpu_info(path="/proc/cpuinfo"):
  """(model name, the ISA_FLAGS present) of the first CPU listed in `path`; ("unknown", ())
  where there is no such file (not Linux)."""
  name, flags = "", set()
  try:
    with open(path, encoding="utf-8", errors="replace") as f:
      for line in f:
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and not name:
          name = value.strip()
        elif key == "flags" and not flags:
          flags = set(value.split())
        if name and flags:
          break
  except OSError:
    pass
  return name or "unknown CPU", tuple(f for f in ISA_FLAGS if f in flags)


def onednn_enabled(isa, environ=os.environ):
  """Whether TensorFlow runs its oneDNN kernels: TF_ENABLE_ONEDNN_OPTS where set, else on for
  CPUs with ONEDNN_DEFAULT's instructions (Linux x86, TensorFlow's DefaultOneDnnPolicy)."""
  value = environ.get("TF_ENABLE_ONEDNN_OPTS", "").strip().lower()
  if value in ("0", "false"):
    return False
  if value in ("1", "true"):
    return True
  return any(f in isa for f in ONEDNN_DEFAULT)


def _runtime_onednn(isa):
  """This process's answer, from TensorFlow itself where it says (a private binding: fall
  back to its rule)."""
  try:
    from tensorflow.python.util import _pywrap_util_port  # pylint: disable=g-import-not-at-top
    return bool(_pywrap_util_port.IsMklEnabled())
  except (ImportError, AttributeError):
    pass
  try:  # TensorFlow 1.15: its pip wheel runs its own (Eigen) kernels, and says so here
    from tensorflow.python import pywrap_tensorflow  # pylint: disable=g-import-not-at-top
    return bool(pywrap_tensorflow.IsMklEnabled())
  except (ImportError, AttributeError):
    return onednn_enabled(isa)


def physical_devices(kind):
  """tf.config.list_physical_devices(kind), on TensorFlow 1.15 too (there under
  tf.config.experimental)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  lister = getattr(tf.config, "list_physical_devices", None)
  return (lister or tf.config.experimental.list_physical_devices)(kind)


def _gpus():
  """(names, driver) of the GPUs TensorFlow lists, without starting its runtime."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  names = []
  details_of = getattr(tf.config.experimental, "get_device_details", lambda gpu: {})  # 2.3+
  for gpu in physical_devices("GPU"):
    details = details_of(gpu)
    name = details.get("device_name", gpu.name)
    capability = details.get("compute_capability")
    names.append(f"{name} (compute {capability[0]}.{capability[1]})" if capability else name)
  driver = ""
  if names:
    try:
      out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version",
                            "--format=csv,noheader"], capture_output=True, text=True,
                           timeout=10, check=True)
      driver = out.stdout.split()[0] if out.stdout.split() else ""
    except (OSError, subprocess.SubprocessError):
      pass
  return tuple(names), driver


def _version(package):
  try:
    from importlib import metadata  # pylint: disable=g-import-not-at-top
  except ImportError:  # Python 3.7 (TensorFlow 1.15's): the backport, or pkg_resources
    try:
      import importlib_metadata as metadata  # pylint: disable=g-import-not-at-top
    except ImportError:
      import pkg_resources  # pylint: disable=g-import-not-at-top
      try:
        return pkg_resources.get_distribution(package).version
      except pkg_resources.DistributionNotFound:
        return "not installed"
  try:
    return metadata.version(package)
  except metadata.PackageNotFoundError:
    return "not installed"


def _keras(tf):
  """The Keras package's version; where there is none, TensorFlow 1.x's own (tf.keras,
  '2.2.4-tf' in 1.15), which built the towers' tf.keras layers there."""
  version = _version("keras")
  if version == "not installed":
    bundled = getattr(getattr(tf, "keras", None), "__version__", None)
    if bundled:
      return f"{bundled} (tf.keras)"
  return version


def describe():
  """This process's Machine (TensorFlow imported; its GPU runtime is not started)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  cpu, isa = cpu_info()
  gpus, driver = _gpus()
  return Machine(cpu=cpu, cpus=os.cpu_count() or 0, isa=isa, onednn=_runtime_onednn(isa),
                 onednn_max_isa=os.environ.get("ONEDNN_MAX_CPU_ISA", ""),
                 tensorflow=tf.__version__, keras=_keras(tf), gpus=gpus,
                 gpu_driver=driver, deterministic_ops=_op_determinism(),
                 schedulable=threads.schedulable_cpus(), threads=_pools())


def _op_determinism():
  """"on" where this process's TensorFlow runs deterministic kernels, as TensorFlow holds it;
  TensorFlow 1.15 has no such state: TF_DETERMINISTIC_OPS there, as its kernels read it."""
  try:
    from tensorflow.python.framework import config as tf_config  # pylint: disable=g-direct-tensorflow-import,g-import-not-at-top
    return "on" if tf_config.is_op_determinism_enabled() else ""
  except (ImportError, AttributeError):
    return "on" if os.environ.get("TF_DETERMINISTIC_OPS", "") not in ("", "0", "false") else ""


def _pools():
  """The (intra, inter) counts this process runs; () where TensorFlow does not say (1.15)."""
  try:
    return threads.effective()
  except AttributeError:
    return ()
