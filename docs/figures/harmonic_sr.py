"""The harmonic series summed in fp16 and bfloat16: round to nearest stagnates, stochastic rounding does not.

``s = chop(s + chop(1/k))`` for k = 1, 2, ..., N (chop.m's ``demo_harmonic``
loop) with round to nearest (``round = 1``) and stochastic rounding
(``round = 5``, MATLAB's stream after ``rng(1)``), next to the partial sums
H_k computed in double.  Round to nearest stops growing at k = 513 in fp16
(sum 7.0859375) and k = 65 in bfloat16 (sum 5.0625), the numbers Higham and
Pranesh published; stochastic rounding keeps following H_k.  The curves are
drawn through about 600 values of k, evenly spaced on the log axis; the
stagnation points are found on every k.

Run ``python docs/figures/harmonic_sr.py`` (writes ``harmonic_sr.png`` and
``harmonic_sr.json`` here).
"""

from __future__ import annotations

import sys

from figure_common import plt, save  # first: it pins OpenBLAS's kernels

import numpy as np

from pychop_compat import Chop, rng  # noqa: E402

CASES = [("fp16", "h", "tab:blue"), ("bfloat16", "b", "tab:orange")]


def partial_sums(fmt: str, mode: int, terms: int) -> np.ndarray:
    """s_k = fl(s_{k-1} + fl(1/k)), k = 1..terms, with chop to ``fmt`` in rounding ``mode``."""
    c = Chop(format=fmt, round=mode)
    s, out = 0.0, np.empty(terms)
    for k in range(1, terms + 1):
        s = c(s + c(1 / k))
        out[k - 1] = s
    return out


def data(quick: bool = False) -> dict:
    """The partial sums of each format and mode at about 600 values of k (log-spaced), and where
    round to nearest stops growing (computed on every k)."""
    terms = 2000 if quick else 50000
    k = np.arange(1, terms + 1)
    exact = np.cumsum(1.0 / k)  # H_k in double: errors near 1e-14, invisible next to fp16's 1e-3
    shown = np.unique(np.round(np.geomspace(1, terms, 600)).astype(int)) - 1  # indices of the k drawn
    series, flat = [], {}
    for label, fmt, _ in CASES:
        rng(1)
        for mode in (1, 5):
            sums = partial_sums(fmt, mode, terms)
            series.append({"format": label, "round": mode, "sum": sums[shown].tolist()})
            if mode == 1:
                unchanged = np.nonzero(np.diff(sums) == 0)[0]  # s_k == s_(k-1): the term k was lost
                first = int(unchanged[0]) + 2 if unchanged.size else None
                flat[label] = {"k": first, "sum": float(sums[first - 1]) if first else None}
    return {"terms": terms, "k": k[shown].tolist(), "double": exact[shown].tolist(), "series": series,
            "nearest_stops_at": flat}


def caption_facts(d: dict) -> list:
    """Phrases the figure's caption in ``docs/migration.rst`` must contain: where round to nearest stops."""
    stops = [str(d["nearest_stops_at"][label]["k"]) for label, _, _ in CASES]
    return [f"stops growing at k = {' and '.join(stops)}"]


def main(out_dir=None, quick: bool = False):
    d = data(quick)
    k, exact = np.asarray(d["k"]), np.asarray(d["double"])
    colours = {label: colour for label, _, colour in CASES}
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.semilogx(k, exact, "k-", lw=1, label="double")
    for run in d["series"]:
        sums = np.asarray(run["sum"])
        name = "round to nearest" if run["round"] == 1 else "stochastic (round=5)"
        style = {"color": colours[run["format"]], "ls": "--" if run["round"] == 1 else "-"}
        left.semilogx(k, sums, label=f"{run['format']}, {name}", **style)
        right.loglog(k, np.abs(sums - exact) / exact, label=f"{run['format']}, {name.split(' (')[0]}", **style)
    left.set_xlabel("number of terms k")
    left.set_ylabel("partial sum")
    left.set_title("harmonic series  s = chop(s + chop(1/k))")
    left.legend(fontsize=8)
    right.set_ylim(1e-6, 2)
    right.set_xlabel("number of terms k")
    right.set_ylabel("relative error |s_k - H_k| / H_k")
    right.set_title("error against the double-precision sum")
    right.legend(fontsize=8)
    fig.tight_layout()
    return [save(fig, "harmonic_sr", out_dir, data=d)]


if __name__ == "__main__":
    print(*main(quick="--quick" in sys.argv[1:]), sep="\n")
