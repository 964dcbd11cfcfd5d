"""CPU time per element against n: pychop_compat's chop next to NumPy, ml_dtypes and torch casts.

Reads the newest ``benchmarks/results/cpu_sizes_*.csv`` and the ``.json``
beside it (written by ``benchmarks/bench_cpu_sizes.py``; the JSON records the
machine, date and versions, which the figure repeats) and plots ns per element against
n on log axes.  PyPI pychop appears when it was installed for the run.
Nothing is measured here: rerun the benchmark to refresh the data.

Run ``python docs/figures/cpu_speed.py`` (writes ``cpu_speed.png`` here).
"""

from __future__ import annotations

import csv
import json
import sys
from collections import defaultdict
from pathlib import Path

from figure_common import ROOT, plt, save

RESULTS = ROOT / "benchmarks" / "results"
STYLES = {"pychop_compat": "-o", "NumPy": "--s", "ml_dtypes": "--^", "torch": ":d", "pychop": "-.v"}


def read_results(path: Path):
    """(metadata from ``<run>.json``, {method: [(n, ns per element), ...]}) of the run ``<run>.csv``."""
    meta = json.loads(path.with_suffix(".json").read_text())
    series = defaultdict(list)
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            n = int(row.pop("n"))
            for method, value in row.items():
                if value:
                    series[method].append((n, float(value)))
    return meta, dict(series)


def latest_results() -> Path:
    files = sorted(RESULTS.glob("cpu_sizes_*.csv"))
    if not files:
        raise FileNotFoundError(f"no benchmark output in {RESULTS}: run benchmarks/bench_cpu_sizes.py --out ...")
    return files[-1]


def main(out_dir=None, quick: bool = False, results: Path | None = None):
    path = results or latest_results()
    meta, series = read_results(path)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for method, points in series.items():
        n, ns = zip(*sorted(points))
        style = STYLES.get(method.split()[0], "-")
        ax.loglog(n, ns, style, label=method, lw=2 if method.startswith("pychop_compat") else 1)
    ax.set_xlabel("n (float64 elements, standard normal)")
    ax.set_ylabel("ns per element (median)")
    ax.set_title(f"round to fp16 / bfloat16 and back, CPU\n{meta.get('machine', '?')}; {meta.get('date', '?')}",
                 fontsize=8)
    ax.legend(fontsize=8, ncol=2)
    ax.grid(True, which="both", alpha=0.3)
    fig.text(0.01, 0.01, meta.get("versions", ""), fontsize=6, color="0.4")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return [save(fig, "cpu_speed", out_dir)]


if __name__ == "__main__":
    print(*main(quick="--quick" in sys.argv[1:]), sep="\n")
