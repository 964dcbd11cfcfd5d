"""The harmonic series summed in fp16 and bfloat16: round to nearest stagnates, stochastic rounding does not.

``s = chop(s + chop(1/k))`` for k = 1, 2, ..., N (chop.m's ``demo_harmonic``
loop) with round to nearest (``round = 1``) and stochastic rounding
(``round = 5``, MATLAB's stream after ``rng(1)``), next to the partial sums
H_k computed in double.  Round to nearest stops growing at k = 513 in fp16
(sum 7.0859375) and k = 65 in bfloat16 (sum 5.0625), the numbers Higham and
Pranesh published; stochastic rounding keeps following H_k.

Run ``python docs/figures/harmonic_sr.py`` (writes ``harmonic_sr.png`` here).
"""

from __future__ import annotations

import sys

import numpy as np

from figure_common import plt, save

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


def main(out_dir=None, quick: bool = False):
    terms = 2000 if quick else 50000
    k = np.arange(1, terms + 1)
    exact = np.cumsum(1.0 / k)  # H_k in double: errors near 1e-14, invisible next to fp16's 1e-3
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.semilogx(k, exact, "k-", lw=1, label="double")
    for label, fmt, colour in CASES:
        rng(1)
        nearest = partial_sums(fmt, 1, terms)
        stochastic = partial_sums(fmt, 5, terms)
        left.semilogx(k, nearest, color=colour, ls="--", label=f"{label}, round to nearest")
        left.semilogx(k, stochastic, color=colour, ls="-", label=f"{label}, stochastic (round=5)")
        right.loglog(k, np.abs(nearest - exact) / exact, color=colour, ls="--", label=f"{label}, nearest")
        right.loglog(k, np.abs(stochastic - exact) / exact, color=colour, ls="-", label=f"{label}, stochastic")
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
    return [save(fig, "harmonic_sr", out_dir)]


if __name__ == "__main__":
    print(*main(quick="--quick" in sys.argv[1:]), sep="\n")
