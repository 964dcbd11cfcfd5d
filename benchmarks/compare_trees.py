"""Run one benchmark script from two checkouts, interleaved, and compare every timed row.

Run from anywhere::

    python benchmarks/compare_trees.py OLD_TREE NEW_TREE --runs 7 -- bench_cpu.py --quick

``OLD_TREE`` and ``NEW_TREE`` are two checkouts of this repository (``git
worktree add ../old <commit>`` makes one).  The script ``benchmarks/<name>``
of each tree runs ``--runs`` times, alternating (old, new, old, new, ...), so
both see the same machine state; each run is a fresh process with
``PYTHONPATH`` at its own tree.  Every Markdown table row the script prints
is matched by its text cells, and each numeric cell under a header that
names a time unit (ns, us, ms, s) or ``time``, and each cell that carries its
own unit (``16.49 us``, compared in seconds), is compared: the table gives
the median of the runs for each tree and their ratio (new / old).  Nothing
is asserted; ``--fail-above`` makes the exit status 1 when a ratio exceeds it.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

TIME_HEADER = re.compile(r"\b(ns|us|µs|ms|s|time|seconds)\b", re.IGNORECASE)
NUMBER = re.compile(r"^[-+]?\d+(\.\d+)?([eE][-+]?\d+)?$")
#: A cell that carries its own unit ("16.49 us"), compared in seconds whatever its header says.
TIMED = re.compile(r"^(?P<value>\d+(\.\d+)?([eE][-+]?\d+)?) ?(?P<unit>ns|us|µs|ms|s)$")
SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}


def _cells(line: str) -> list:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def timed_cells(output: str) -> dict:
    """``{(row key, column header): value}`` for every timed numeric cell of the tables.

    A row's key is the line above its table (the table's title, so that two tables with the
    same rows stay apart), its first cell (``n`` for example) and its other text cells."""
    found = {}
    header = None
    title = ""
    for line in output.splitlines():
        if not line.strip().startswith("|"):
            header = None
            if line.strip():
                title = line.strip()
            continue
        cells = _cells(line)
        if all(set(cell) <= set("-: ") for cell in cells):
            continue  # the separator row
        if header is None:
            header = cells
            continue
        text = [cell for cell in cells[1:]
                if not (NUMBER.match(cell.replace(",", "")) or TIMED.match(cell) or cell.startswith(("+", "-")))]
        key = " | ".join([title[:60], cells[0], *text]) if title else " | ".join([cells[0], *text])
        for name, cell in zip(header, cells):
            value = cell.replace(",", "")
            timed = TIMED.match(value)
            if timed:  # (signed cells such as "+4.40 us" are differences, not times: left out)
                found[(key, name)] = float(timed["value"]) * SECONDS[timed["unit"]]
            elif TIME_HEADER.search(name) and NUMBER.match(value):
                found[(key, name)] = float(value)
    return found


def run(tree: Path, script: str, args: list) -> str:
    env = dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run([sys.executable, str(tree / "benchmarks" / script), *args], cwd=tree, env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: {script} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--fail-above", type=float, default=None, help="exit 1 if a ratio exceeds this")
    parser.add_argument("script", help="the benchmark script's file name in benchmarks/")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="its arguments (after --)")
    options = parser.parse_args(argv)
    args = [a for a in options.args if a != "--"]
    samples: dict = {"old": defaultdict(list), "new": defaultdict(list)}
    for _ in range(options.runs):
        for side in ("old", "new"):
            for cell, value in timed_cells(run(getattr(options, side), options.script, args)).items():
                samples[side][cell].append(value)
    print(f"{options.script} {' '.join(args)}: median of {options.runs} interleaved runs per tree")
    print(f"old: {options.old}\nnew: {options.new}\n")
    print("| row | column | old | new | new / old |\n|---|---|---:|---:|---:|")
    worst = 0.0
    for cell in sorted(set(samples["old"]) & set(samples["new"])):
        old, new = statistics.median(samples["old"][cell]), statistics.median(samples["new"][cell])
        ratio = new / old if old else float("nan")
        worst = max(worst, ratio)
        print(f"| {cell[0]} | {cell[1]} | {old:.4g} | {new:.4g} | {ratio:.3f} |")
    only = set(samples["old"]) ^ set(samples["new"])
    if only:
        print(f"\n{len(only)} cells appear in one tree's output only (not compared).")
    print(f"\nlargest ratio: {worst:.3f}")
    return 1 if options.fail_above is not None and worst > options.fail_above else 0


if __name__ == "__main__":
    sys.exit(main())
