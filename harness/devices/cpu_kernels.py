"""Whether this machine's CPU kernels can run a run's precision, decided once for every binary.

Where a run computes on the CPU (no GPU in its plan), its precision meets TensorFlow's CPU
kernels, which the CPU's instruction sets and oneDNN pick (tfbits.machine):

  fp16 with oneDNN's float16 kernels (AVX-512 FP16, AMX FP16, AVX-NE-CONVERT: Sapphire Rapids
       and newer Xeons), refused: measured on a 2-core Xeon with AVX-512 FP16, both trainers
       ran ~20x slower than fp32 and a 15-step run went NaN at step 14. bf16 is that CPU's
       fast mixed precision; TF_ENABLE_ONEDNN_OPTS=0 runs fp16 on TensorFlow's own kernels.
  fp16 elsewhere on a CPU runs, with a warning: float16 in TensorFlow's own (Eigen) kernels,
       4-5x slower than fp32 on a 2-core AVX-512 EPYC (the benchmark's TF2 loop: 252 against
       1282 examples/sec, BENCHMARKS.md). It is the GPU recipe (loss scaling) checked on a
       CPU, which the tests rely on.
  bf16 where oneDNN's dispatch is capped below AVX-512 (ONEDNN_MAX_CPU_ISA=AVX2, AVX2_VNNI or
       AVX2_VNNI_2 on a CPU without AVX-NE-CONVERT) while TensorFlow, seeing AVX-512, hands
       bfloat16 to oneDNN, refused: oneDNN then has no bfloat16 convolution and the first step
       failed with "could not create a primitive descriptor". A real AVX2 CPU runs bf16 on
       TensorFlow's own kernels (oneDNN is off there by default, and TensorFlow keeps
       bfloat16 off oneDNN without AVX-512).
"""

from absl import logging

from cifar10.errors import UsageError
from tfbits import machine as machines

# ONEDNN_MAX_CPU_ISA values below AVX512_CORE: no bfloat16 convolution in oneDNN (measured:
# AVX2, AVX2_VNNI and AVX2_VNNI_2 failed, AVX512_CORE and up ran).
_BELOW_AVX512 = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2")


def refusal(precision, where):
  """The one line that refuses `precision` on Machine `where`'s CPU kernels, or None."""
  isa = set(where.isa)
  if precision == "fp16" and where.float16_kernels:
    return ("--precision=fp16 on this CPU runs oneDNN's float16 kernels (it has "
            f"{' '.join(sorted(isa & {'avx512_fp16', 'amx_fp16', 'avx_ne_convert'}))}): "
            "measured ~20x slower than fp32 and not finite after 14 steps; use "
            "--precision=bf16 (this CPU's fast mixed precision), or TF_ENABLE_ONEDNN_OPTS=0 "
            "to run fp16 on TensorFlow's own kernels")
  cap = where.onednn_max_isa.strip().upper()
  if (precision == "bf16" and where.onednn and isa & {"avx512f", "avx_ne_convert"}
      and cap in _BELOW_AVX512 and not (cap == "AVX2_VNNI_2" and "avx_ne_convert" in isa)):
    return (f"--precision=bf16 with ONEDNN_MAX_CPU_ISA={where.onednn_max_isa}: TensorFlow "
            "hands bfloat16 to oneDNN on this AVX-512 CPU, and oneDNN capped below "
            "AVX512_CORE has no bfloat16 convolution; unset ONEDNN_MAX_CPU_ISA (or cap it at "
            "AVX512_CORE or above), or set TF_ENABLE_ONEDNN_OPTS=0")
  return None


def warning(precision, where):
  """The one line that names the cost of `precision` on `where`'s CPU, or None."""
  if precision == "fp16" and not where.float16_kernels:
    return ("--precision=fp16 on a CPU runs float16 in TensorFlow's own kernels, several "
            "times slower than fp32 (5x on a 2-core AVX-512 EPYC): it checks the GPU "
            "recipe; --precision=bf16 is the CPU's mixed precision")
  return None


def check(precision):
  """For a process that runs its steps on the CPU: UsageError (one line) where its kernels
  cannot run `precision`, a warning line where they run it at a cost."""
  where = machines.describe()
  refused = refusal(precision, where)
  if refused:
    raise UsageError(refused)
  cost = warning(precision, where)
  if cost:
    logging.warning(cost)
