"""benchmarks.throughput: what it counts, what it refuses, and what it writes."""

import dataclasses
import json

import pytest

from benchmarks import measure
from tests import helpers


def test_the_model_flops_are_counted_layer_by_layer():
  # Forward MACs: conv1 24*24*64*75, conv2 12*12*64*1600, local3 2304*384, local4 384*192,
  # softmax 192*10; backward twice the forward, less conv1's unneeded input gradient.
  forward = 2764800 + 14745600 + 884736 + 73728 + 1920
  assert measure.training_flops_per_example() == 2 * (3 * forward - 2764800) == 105295104



def test_the_matmul_peak_is_timed_over_at_least_its_window():
  # The runs double until one lasts the window: 0.1 s per matmul here, so 1, 2, 4, 8 of them,
  # and the rate is the 8 matmuls' over their 0.8 s. (A fixed 20 is ~5 ms of an H200.)
  now, calls = [0.0], []

  def run(repeats):
    calls.append(repeats)
    now[0] += 0.1 * repeats
  repeats, elapsed = measure.timed_window(run, 0.5, clock=lambda: now[0])
  assert calls == [1, 2, 4, 8] and repeats == 8 and elapsed == pytest.approx(0.8)
  now[0], calls[:] = 0.0, []
  assert measure.timed_window(run, 0.1, clock=lambda: now[0])[0] == 1 and calls == [1]

@pytest.mark.parametrize("flags,expected", [
    (("--steps=15",), "--steps=15 and --warmup=10 must be multiples of --steps_per_loop=10"),
    (("--kinds=tf2,fast",),
     "flag --kinds=['tf2', 'fast']: give one or more of tf2, tf2_central, tf2_loop"),
    (("--precisions=fp8",), "give one or more of fp32, bf16, fp16"),
    (("--num_gpus=0",), "0 is not an integer in the range [1, 64]"),
    (("--batch_sizes=8,128", "--steps=200,40,10"),
     "--steps=200,40,10: give one count, or one per --batch_sizes (2)"),
    (("--batch_sizes=8,8",), "--batch_sizes=8,8: each once"),
    (("--batch_sizes=8,128", "--steps=200,45"),
     "--steps=200,45 and --warmup=10 must be multiples of --steps_per_loop=10"),
])
def test_bad_flags_are_one_line(flags, expected):
  result = helpers.call("benchmarks.throughput", *flags)
  assert result.returncode == 2 and expected in helpers.error_line(result)


@pytest.mark.slow
def test_a_run_prints_and_writes_each_kind_against_v1(tmp_path):
  result = helpers.run("benchmarks.throughput", "--num_gpus=1", "--kinds=v1,bare_step",
                       "--batch_sizes=8", "--steps=2", "--warmup=2", "--steps_per_loop=2",
                       f"--out={tmp_path}")
  assert result.returncode == 0, result.stderr[-3000:]
  written = json.loads((tmp_path / "results.json").read_text())
  assert written["flops_per_example"] == 105295104 and written["peak_gflops"] > 0
  # The machine the children measured on, as this process describes it.
  from tfbits import machine  # pylint: disable=g-import-not-at-top
  assert written["machine"] == machine.describe().as_dict()
  assert f"machine: {machine.describe().line()}" in result.stdout.splitlines()
  rows = {r["kind"]: r for r in written["rows"]}
  assert sorted(rows) == ["bare_step", "v1"]
  assert rows["v1"]["ratio_to_v1"] == 1.0
  for row in rows.values():
    assert row["n"] == 1 and row["precision"] == "fp32"
    # The percent of peak is the load's and the CPU's (a busy box measured its matmul peak low
    # and the bare step at 180%): only that it is a measured, positive figure; so is the
    # process's CPU time per example.
    assert row["percent_of_peak"] > 0 and row["cpu_ms_per_example"] > 0, row
  lines = [line for line in result.stdout.splitlines() if line.strip().startswith("fp32")]
  assert len(lines) == 2
  for line, label in zip(lines, (" bare step ", " v1 ")):  # the yardstick first
    assert label in line, line
  # A global step's milliseconds, and v1's over the bare step's (its fixed cost per step).
  for row in rows.values():
    assert row["ms_per_step"] == pytest.approx(1000 * 8 / row["examples_per_sec"])
  assert rows["bare_step"]["ms_over_bare_step"] == 0
  assert rows["v1"]["ms_over_bare_step"] == pytest.approx(
      rows["v1"]["ms_per_step"] - rows["bare_step"]["ms_per_step"])
  assert lines[1].split()[-2:] == [f"{rows['v1']['ms_per_step']:.2f}",
                                   f"{rows['v1']['ms_over_bare_step']:.2f}"]


def test_what_has_nothing_to_compare_with_is_a_dash_and_null(tmp_path, monkeypatch, capsys):
  # Stand-in children (their rates made up): at N = 2 there is no bare step, and without v1
  # in --kinds no ratio. Before, the table printed `nan` and results.json held NaN, which is
  # not JSON (a strict parser such as JavaScript's JSON.parse refuses the file).
  from absl import flags as absl_flags  # pylint: disable=g-import-not-at-top
  from benchmarks import results  # pylint: disable=g-import-not-at-top
  from benchmarks import throughput  # pylint: disable=g-import-not-at-top
  from tfbits import machine  # pylint: disable=g-import-not-at-top
  where = machine.Machine("Stand-in CPU", 2, ("avx2",), False, "", "2.21.0", "3.15.1")
  rates = {"peak": {"gflops": 100.0, "machine": where.as_dict()},
           "bare_step": {"examples_per_sec": 800.0},
           "tf2": {"examples_per_sec": 400.0}, "v1": {"examples_per_sec": 500.0}}
  monkeypatch.setattr(throughput, "_run_child",
                      lambda spec, *_: rates[spec.split(":")[0]])
  monkeypatch.setattr(results, "chart", lambda rows, path: None)
  tables = {}
  for kinds in ("tf2,v1,bare_step", "tf2,bare_step"):
    fv = absl_flags.FlagValues()
    throughput.define_flags(fv)
    fv(["throughput", "--num_gpus=1,2", f"--kinds={kinds}", "--batch_sizes=8",
        f"--out={tmp_path / kinds}"])
    throughput.main(fv)
    tables[kinds] = [line.split() for line in capsys.readouterr().out.splitlines()
                     if line.strip().startswith("fp32")]
    with open(tmp_path / kinds / "results.json", encoding="utf-8") as f:
      text = f.read()
    assert "NaN" not in text
    assert json.loads(text)["machine"] == where.as_dict()
    rows = {(r["n"], r["kind"]): r for r in json.loads(text)["rows"]}
    # At N = 1 a step of 8 examples at 800/s is 10 ms; TF2's 20 ms are 10 over it.
    assert rows[1, "tf2"]["ms_per_step"] == 20 and rows[1, "tf2"]["ms_over_bare_step"] == 10
    assert rows[2, "tf2"]["ms_per_step"] == 40 and rows[2, "tf2"]["ms_over_bare_step"] is None
    assert rows[1, "tf2"]["ratio_to_v1"] == (0.8 if "v1" in kinds else None)
  # precision, batch, N, kind, ex/s, / v1, % peak, cpu ms/ex, ms/step, over bare: `-` where
  # nothing compares (and where the stand-in children measured no CPU time).
  assert tables["tf2,v1,bare_step"][1] == ["fp32", "8", "1", "TF2", "400.0", "0.80", "42.1%",
                                           "-", "20.00", "10.00"]
  assert tables["tf2,v1,bare_step"][3] == ["fp32", "8", "2", "TF2", "400.0", "0.80", "42.1%",
                                           "-", "40.00", "-"]
  assert tables["tf2,bare_step"][1][5] == "-" and tables["tf2,bare_step"][2][-1] == "-"


def test_every_batch_size_is_measured_in_one_run_with_its_own_steps(tmp_path, monkeypatch,
                                                                     capsys):
  # Issue 51: batch 128 and 8 side by side in one run; a cheap step needs more steps to time,
  # so --steps gives one count per batch size. Stand-in children: each kind's rate made up,
  # the bare step's doubled at batch 8 so each batch's "over bare" has its own yardstick.
  import subprocess  # pylint: disable=g-import-not-at-top
  from absl import flags as absl_flags  # pylint: disable=g-import-not-at-top
  from benchmarks import results  # pylint: disable=g-import-not-at-top
  from benchmarks import throughput  # pylint: disable=g-import-not-at-top
  from tfbits import machine  # pylint: disable=g-import-not-at-top
  where = machine.Machine("Stand-in CPU", 2, ("avx2",), False, "", "2.21.0", "3.15.1")
  argv = []

  def child(args, **_):
    argv.append(args)
    spec, batch = args[3].split("=")[1], int(args[4].split("=")[1])
    kind = spec.split(":")[0]
    rate = {"bare_step": 800.0 * (2 if batch == 8 else 1), "tf2": 400.0, "v1": 500.0}.get(kind)
    out = ({"gflops": 100.0, "machine": where.as_dict()} if kind == "peak"
           else {"examples_per_sec": rate, "cpu_ms_per_example": 2000 / rate})
    return subprocess.CompletedProcess(args, 0, json.dumps(out) + "\n", "")

  monkeypatch.setattr(subprocess, "run", child)
  monkeypatch.setattr(results, "chart", lambda rows, path: None)
  fv = absl_flags.FlagValues()
  throughput.define_flags(fv)
  fv(["throughput", "--num_gpus=1,2", "--kinds=tf2,v1,bare_step", "--batch_sizes=128,8",
      "--steps=30,200", "--warmup=10", "--steps_per_loop=10", f"--out={tmp_path}"])
  throughput.main(fv)
  # Each child timed its own batch size's steps: batch 128 for 30, batch 8 for 200.
  asked = sorted({(a[3].split("=")[1], a[4], a[5]) for a in argv})
  assert asked == sorted([("peak:1:fp32", "--batch_sizes=128", "--steps=30")] + [
      (f"{k}:{n}:fp32", f"--batch_sizes={b}", f"--steps={s}")
      for k in ("tf2", "v1") for n in (1, 2) for b, s in ((128, 30), (8, 200))] + [
          ("bare_step:1:fp32", f"--batch_sizes={b}", f"--steps={s}")
          for b, s in ((128, 30), (8, 200))])
  written = json.loads((tmp_path / "results.json").read_text())
  assert written["batch_sizes"] == [128, 8] and written["steps"] == {"128": 30, "8": 200}
  rows = {(r["batch_size"], r["n"], r["kind"]): r for r in written["rows"]}
  assert len(rows) == 10
  # Batch 128: a TF2 step of 128 examples at 400/s is 320 ms, the bare one's 160; batch 8:
  # 20 ms against 5.
  assert rows[128, 1, "tf2"]["ms_over_bare_step"] == 160
  assert rows[8, 1, "tf2"]["ms_over_bare_step"] == 15
  assert rows[8, 2, "tf2"]["ms_per_step"] == 40 and rows[8, 2, "tf2"]["ratio_to_v1"] == 0.8
  # The children's CPU time per example (here 2 cores kept busy: 2000 / rate ms), a median.
  assert rows[8, 2, "tf2"]["cpu_ms_per_example"] == 5
  assert rows[8, 1, "v1"]["cpu_ms_per_example"] == 4
  lines = [line.split()[:4] for line in capsys.readouterr().out.splitlines()
           if line.startswith("     fp32")]
  assert lines == [["fp32", "128", "1", "bare"], ["fp32", "128", "1", "TF2"],
                   ["fp32", "128", "1", "v1"], ["fp32", "128", "2", "TF2"],
                   ["fp32", "128", "2", "v1"], ["fp32", "8", "1", "bare"],
                   ["fp32", "8", "1", "TF2"], ["fp32", "8", "1", "v1"],
                   ["fp32", "8", "2", "TF2"], ["fp32", "8", "2", "v1"]]


def test_the_ratio_to_v1_is_the_median_of_each_rounds_ratio(tmp_path, monkeypatch):
  # Stand-in children on a machine whose speed doubles and triples between rounds (the drift
  # BENCHMARKS.md measured): TF2 runs 10% behind v1 in the first and third rounds and 5% ahead
  # in the second. The ratio of the two medians (200 / 190 = 1.05) would call TF2 ahead; each
  # round's ratio, its median: 0.91.
  from absl import flags as absl_flags  # pylint: disable=g-import-not-at-top
  from benchmarks import results  # pylint: disable=g-import-not-at-top
  from benchmarks import throughput  # pylint: disable=g-import-not-at-top
  from tfbits import machine  # pylint: disable=g-import-not-at-top
  where = machine.Machine("Stand-in CPU", 2, ("avx2",), False, "", "2.21.0", "3.15.1")
  runs = {"tf2": [100.0, 200.0, 300.0], "v1": [110.0, 190.0, 330.0]}

  def child(spec, *_):
    kind = spec.split(":")[0]
    if kind == "peak":
      return {"gflops": 100.0, "machine": where.as_dict()}
    return {"examples_per_sec": runs[kind].pop(0)}

  monkeypatch.setattr(throughput, "_run_child", child)
  monkeypatch.setattr(results, "chart", lambda rows, path: None)
  fv = absl_flags.FlagValues()
  throughput.define_flags(fv)
  fv(["throughput", "--num_gpus=2", "--kinds=tf2,v1", "--repeats=3", f"--out={tmp_path}"])
  throughput.main(fv)
  rows = {r["kind"]: r for r in json.loads((tmp_path / "results.json").read_text())["rows"]}
  assert rows["tf2"]["runs"] == [100.0, 200.0, 300.0] and rows["tf2"]["examples_per_sec"] == 200
  assert rows["tf2"]["ratio_to_v1"] == pytest.approx(100 / 110)
  assert rows["v1"]["ratio_to_v1"] == 1.0


def test_a_precision_the_cpu_is_refused_is_one_line_not_a_run(tmp_path, monkeypatch, capsys):
  # A Xeon with AVX-512 FP16 (faked in the stand-in peak child): fp16 is not measured.
  from absl import flags as absl_flags  # pylint: disable=g-import-not-at-top
  from benchmarks import results  # pylint: disable=g-import-not-at-top
  from benchmarks import throughput  # pylint: disable=g-import-not-at-top
  from tfbits import machine  # pylint: disable=g-import-not-at-top
  where = machine.Machine("Xeon", 2, ("avx512f", "avx512bw", "avx512_fp16"), True, "", "2.21.0",
                          "3.15.1")
  ran = []

  def child(spec, *_):
    ran.append(spec)
    return ({"gflops": 100.0, "machine": where.as_dict()} if spec.startswith("peak")
            else {"examples_per_sec": 400.0})

  monkeypatch.setattr(throughput, "_run_child", child)
  fv = absl_flags.FlagValues()
  throughput.define_flags(fv)
  fv(["throughput", "--num_gpus=1", "--kinds=tf2", "--precisions=fp32,fp16",
      f"--out={tmp_path}"])
  monkeypatch.setattr(results, "chart", lambda rows, path: None)
  throughput.main(fv)
  out = capsys.readouterr().out
  assert "fp16: not measured: --precision=fp16 on this CPU runs oneDNN's float16" in out
  assert ran == ["peak:1:fp32", "tf2:1:fp32"]
  # The same CPU with a GPU: the steps run there, and fp16 is measured.
  where = dataclasses.replace(where, gpus=("NVIDIA H100 (compute 9.0)",))
  ran.clear()
  throughput.main(fv)
  assert "not measured" not in capsys.readouterr().out
  assert ran == ["peak:1:fp32", "tf2:1:fp32", "tf2:1:fp16"]


@pytest.mark.parametrize("flags,expected", [
    (("--threads=0",), "0 is not an integer in the range [1, 1024]"),
    (("--threads=99999",), "99999 is not an integer in the range [1, 1024]"),
    (("--threads=1000",), "--threads must lie in 1.."),  # this machine's cores
    (("--threads=one",), "flag --threads=one: invalid literal for int()"),
    (("--examples=0",), "0 is not an integer in the range [1, 2147483647]"),
])
def test_the_input_benchmarks_bad_flags_are_one_line(flags, expected):
  result = helpers.call("benchmarks.input_pipeline", *flags)
  assert result.returncode == 2 and expected in helpers.error_line(result)


@pytest.mark.slow
def test_the_input_benchmark_times_the_stream_on_one_core():
  result = helpers.run("benchmarks.input_pipeline", "--threads=1", "--batch_size=64",
                       "--examples=640", "--warmup_examples=128", "--target=1000")
  assert result.returncode == 0, result.stderr[-3000:]
  threads, rate, per_core, cores = result.stdout.strip().splitlines()[-1].split()
  assert int(threads) == 1 and float(rate) == float(per_core) > 0
  assert float(cores) == pytest.approx(1000 / float(per_core), abs=0.06)


@pytest.mark.parametrize("policy", [pytest.param("mixed_bfloat16", marks=pytest.mark.bfloat16),
                                    pytest.param("mixed_float16", marks=pytest.mark.float16)])
def test_the_keras_peer_runs_lrn_in_float32_under_mixed_precision(policy):
  # Before: LRN in the compute dtype, which has no bfloat16 kernel on any device (and runs
  # float16 on the CPU of a GPU machine, silently).
  import keras  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from benchmarks import keras_peer  # pylint: disable=g-import-not-at-top
  previous = keras.mixed_precision.global_policy()
  keras.mixed_precision.set_global_policy(policy)
  try:
    net = keras_peer.build(tf.distribute.OneDeviceStrategy("/cpu:0"))
    logits = net(np.zeros([2, 24, 24, 3], np.float32))
  finally:
    keras.mixed_precision.set_global_policy(previous)
  assert logits.shape == (2, 10) and np.all(np.isfinite(np.asarray(logits, np.float32)))


def test_nodeterministic_reaches_every_measurement(monkeypatch):
  # What the contract's GPU settings cost is measured by running without them: the flag goes
  # to each child process and into the device set-up of every kind.
  import subprocess  # pylint: disable=g-import-not-at-top
  from absl import flags as absl_flags  # pylint: disable=g-import-not-at-top
  from benchmarks import measure  # pylint: disable=g-import-not-at-top
  from benchmarks import throughput  # pylint: disable=g-import-not-at-top
  from cifar10 import config  # pylint: disable=g-import-not-at-top
  from strategies import devices  # pylint: disable=g-import-not-at-top
  fv = absl_flags.FlagValues()
  throughput.define_flags(fv)
  fv(["throughput", "--nodeterministic"])
  argv = []
  monkeypatch.setattr(subprocess, "run", lambda args, **_: argv.append(args) or
                      subprocess.CompletedProcess(args, 0, '{"examples_per_sec": 1}\n', ""))
  throughput._run_child("tf2:1:fp32", fv)  # pylint: disable=protected-access
  assert "--nodeterministic" in argv[0]
  asked = []
  monkeypatch.setattr(devices, "setup", lambda c: asked.append(c) or ["/cpu:0"])
  monkeypatch.setattr(devices, "get_strategy", lambda *_: None)
  monkeypatch.setitem(measure.SETTINGS, "deterministic", True)
  measure.configure(deterministic=False)
  measure._tf2_strategy(1, 0)  # pylint: disable=protected-access
  assert asked == [config.DeviceConfig(num_gpus=1, deterministic=False)]
