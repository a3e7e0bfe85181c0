"""The rows of benchmarks.throughput: what each measured kind's runs come to, its table line,
results.json and the chart.

A group is one (precision, batch size, N); its kinds ran `repeats` rounds, each kind once a
round. A row holds the median rate, the ratio to v1 (the median of each round's ratio), the
share of the matmul peak, the process's CPU milliseconds per example (median), a global
step's milliseconds and, at N = 1, what that step costs over the bare step of the same
precision and batch size.
"""

import json
import os
import statistics

LABELS = {"tf2": "TF2", "tf2_central": "TF2 central", "tf2_loop": "TF2 K", "v1": "v1",
          "keras_path": "Keras path", "keras_peer": "Keras peer", "bare_step": "bare step"}

HEADER = (f"{'precision':>9} {'batch':>5} {'N':>2} {'kind':>11} {'ex/s':>9} {'/ v1':>6} "
          f"{'% peak':>7} {'cpu ms/ex':>9} {'ms/step':>8} {'over bare':>9}")


def group_rows(precision, batch, n, rates, flops, peak, bare_ms, cpu=None):
  """The rows of one group, the bare step first. rates: {kind: [examples/sec, a round
  each]}; bare_ms: {(precision, batch): the bare step's ms}, filled in here at N = 1;
  cpu: {kind: [the process's CPU ms per example, a round each]} (None: not measured)."""
  rows = []
  for kind in sorted(rates, key=lambda k: k != "bare_step"):  # the yardstick first
    rate = statistics.median(rates[kind])
    # The median of each round's ratio: a round runs every kind once, minutes apart at most,
    # so the machine's drift between rounds (10-30%) leaves it, where the ratio of two
    # medians taken from different rounds keeps it. None where there is nothing to compare
    # with (no v1 run; no bare step at N > 1): `-` in the table, null in results.json (NaN
    # is not JSON).
    ratio = (statistics.median(a / b for a, b in zip(rates[kind], rates["v1"]))
             if "v1" in rates else None)
    # A global step's time, and what it costs over the bare step of one replica's batch
    # (N = 1; the fixed cost of a step, which decides the speed where steps are cheap).
    step_ms = 1000 * batch * n / rate
    bare = bare_ms.get((precision, batch)) if n == 1 else None
    if kind == "bare_step":
      bare_ms[precision, batch] = bare = step_ms
    spent = [c for c in (cpu or {}).get(kind, []) if c is not None]
    rows.append({"precision": precision, "batch_size": batch, "n": n, "kind": kind,
                 "examples_per_sec": rate, "runs": rates[kind], "ratio_to_v1": ratio,
                 "cpu_ms_per_example": statistics.median(spent) if spent else None,
                 "percent_of_peak": 100 * rate * flops / (peak * 1e9), "ms_per_step": step_ms,
                 "ms_over_bare_step": step_ms - bare if bare is not None else None})
  return rows


def _cell(value, digits=2):
  return "-" if value is None else f"{value:.{digits}f}"


def line(row):
  """A row as a line of the table under HEADER."""
  return (f"{row['precision']:>9} {row['batch_size']:>5} {row['n']:>2} "
          f"{LABELS[row['kind']]:>11} {row['examples_per_sec']:>9.1f} "
          f"{_cell(row['ratio_to_v1']):>6} {row['percent_of_peak']:>6.1f}% "
          f"{_cell(row['cpu_ms_per_example'], 3):>9} {row['ms_per_step']:>8.2f} "
          f"{_cell(row['ms_over_bare_step']):>9}")


def write(folder, run, rows):
  """results.json in `folder`: the run's settings (`run`, a dict) and the rows."""
  path = os.path.join(folder, "results.json")
  with open(path, "w", encoding="utf-8") as f:
    json.dump({**run, "rows": rows}, f, indent=1, allow_nan=False)
  print(f"wrote {path}")


def chart(rows, path):
  """A bar per row at `path`, where matplotlib is installed."""
  try:
    import matplotlib  # pylint: disable=g-import-not-at-top
  except ImportError:
    print("(no chart: matplotlib is not installed; pip install -e '.[bench]')")
    return
  matplotlib.use("Agg")
  from matplotlib import pyplot  # pylint: disable=g-import-not-at-top
  labels = [f"{LABELS[r['kind']]}\nN={r['n']} b{r['batch_size']} {r['precision']}"
            for r in rows]
  figure, axes = pyplot.subplots(figsize=(max(6, len(rows) * 0.9), 4))
  axes.bar(range(len(rows)), [r["examples_per_sec"] for r in rows],
           color=["tab:orange" if r["kind"] == "v1" else "tab:blue" for r in rows])
  axes.set_xticks(range(len(rows)), labels, fontsize=7)
  axes.set_ylabel("examples / sec")
  axes.set_title("CIFAR-10 training throughput (benchmarks.throughput)")
  figure.tight_layout()
  figure.savefig(path, dpi=120)
  print(f"wrote {path}")
