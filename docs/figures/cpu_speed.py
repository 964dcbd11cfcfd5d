"""CPU time per element against n: pychop_compat's chop next to NumPy, ml_dtypes and torch casts.

Reads the newest ``benchmarks/results/cpu_sizes_*.csv`` and the ``.json``
beside it (written by ``benchmarks/bench_cpu_sizes.py``; the JSON records the
machine, date and versions, which the figure repeats) and plots ns per element against
n on log axes, one panel per target format (fp16, bfloat16).  Each stored
point is already the median of 5 to 25 timed samples; nothing is smoothed or
measured here: rerun the benchmark to refresh the data.

The run was made on a shared machine, and a few points of the torch casts
are far above their neighbours (noise, not a property of torch).  The
y axis stops at ``Y_MAX`` so that those points do not squash the rest: a point
above it is drawn on the top edge as an open triangle with its value
written beside it.  PyPI pychop appears when it was installed for the run.
The legend sits below the panels, outside the data.

Run ``python docs/figures/cpu_speed.py`` (writes ``cpu_speed.png`` and
``cpu_speed.json`` here).
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
COLOURS = {"pychop_compat": "C0", "NumPy": "C1", "ml_dtypes": "C2", "torch": "C3", "pychop": "C4"}
PANELS = [("fp16", "round to fp16 and back"), ("bf16", "round to bfloat16 and back")]
Y_MIN, Y_MAX = 0.5, 100.0  # ns per element


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


def data(quick: bool = False, results: Path | None = None) -> dict:
    """The stored run's series, as plotted (``quick`` changes nothing: the data are read, not measured)."""
    path = results or latest_results()
    meta, series = read_results(path)
    plotted = {}
    for method, points in series.items():
        n, ns = zip(*sorted(points))
        plotted[method] = {"n": list(n), "ns_per_element": list(ns)}
    source = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
    return {"source": source, "machine": meta.get("machine", "?"), "date": meta.get("date", "?"),
            "versions": meta.get("versions", ""), "command": meta.get("command", ""), "series": plotted}


def caption_facts(d: dict) -> list:
    """Phrases the figure's caption in ``docs/performance.rst`` must contain: the run it shows."""
    return [d["source"], d["date"].split()[0]]


def main(out_dir=None, quick: bool = False, results: Path | None = None):
    d = data(quick, results)
    fig, axes = plt.subplots(1, len(PANELS), figsize=(9, 4.2), sharey=True)
    handles = {}
    for ax, (target, title) in zip(axes, PANELS):
        for method, points in d["series"].items():
            if not method.endswith(target):
                continue
            ours = method.startswith("pychop_compat")
            library = method.split()[0]
            line, = ax.loglog(points["n"], [min(v, Y_MAX) for v in points["ns_per_element"]],
                              STYLES.get(library, "-"), color=COLOURS.get(library), lw=2.2 if ours else 1.2,
                              markersize=6 if ours else 5, label=method.replace(f" {target}", ""))
            handles.setdefault(line.get_label(), line)
            for n, value in zip(points["n"], points["ns_per_element"]):
                if value > Y_MAX:  # off the scale: an open triangle on the edge, the value beside it
                    ax.plot([n], [Y_MAX], "^", color=line.get_color(), markerfacecolor="white", markersize=8,
                            clip_on=False, zorder=5)
                    ax.annotate(f"{value:.0f} (noise)", (n, Y_MAX), textcoords="offset points", xytext=(7, 2), va="bottom",
                                fontsize=7, color=line.get_color())
        ax.set_ylim(Y_MIN, Y_MAX)
        ax.set_title(title, fontsize=9, pad=14)
        ax.set_xlabel("n (float64 elements, standard normal)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("ns per element (median)")
    fig.suptitle(f"CPU, {d['machine']}; {d['date']}", fontsize=8)
    fig.legend(handles.values(), handles.keys(), loc="lower center", ncol=len(handles), fontsize=8, frameon=False,
               bbox_to_anchor=(0.5, 0.04))
    fig.text(0.01, 0.01, d["versions"], fontsize=6, color="0.4")
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return [save(fig, "cpu_speed", out_dir, data=d)]


if __name__ == "__main__":
    print(*main(quick="--quick" in sys.argv[1:]), sep="\n")
