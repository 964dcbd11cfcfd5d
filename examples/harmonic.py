"""The harmonic series in simulated low precision (Higham & Pranesh, 2019).

Sums ``1 + 1/2 + 1/3 + ...`` as ``s = chop(s + chop(1/n))`` with chop's
persistent options, until the sum stops changing, for the custom format
``[t, emax] = [5, 3]``, bfloat16, fp16, fp8-e4m3 and fp8-e5m2 and all six
rounding modes -- the experiment of chop's ``demo_harmonic.m``.  ``1/n`` is
formed in double and rounded; "terms" is the ``n`` at which the sum first
failed to change.  The stochastic modes draw from MATLAB's random stream,
seeded with ``rng(1)`` as in the demo.

Run ``python examples/harmonic.py``; a plot of the partial sums (round to
nearest) is saved as ``examples/out/harmonic.png`` when matplotlib is
installed (``examples/out/`` is not under version control).
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

try:
    import pychop_compat  # noqa: F401
except ImportError:  # running from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pychop_compat import chop, clear_chop, rng

FORMATS = ("custom", "bfloat16", "fp16", "fp8-e4m3", "fp8-e5m2")
ROUND_NAMES = {1: "nearest", 2: "up", 3: "down", 4: "to zero", 5: "stoch-prop", 6: "stoch-equal"}


def options_for(fmt: str, mode: int) -> dict:
    """chop options of the experiment: custom means ``[t, emax] = [5, 3]``."""
    if fmt == "custom":
        return {"format": "c", "params": [5, 3], "round": mode}
    return {"format": fmt, "round": mode}


def harmonic_sum(max_terms: int | None = None, trajectory: list | None = None) -> tuple[float, int, bool]:
    """Run the loop with the persistent chop options.

    Returns ``(s, n, stagnated)``: the sum, the number of the term that left
    it unchanged (or the last term added when ``max_terms`` stopped the loop)
    and whether it stagnated.
    """
    s, n = 0.0, 1
    while True:
        sold = s
        s = chop(s + chop(1 / n))
        if trajectory is not None:
            trajectory.append(s)
        if s == sold:
            return s, n, True
        if max_terms is not None and n >= max_terms:
            return s, n, False
        n += 1


def main(formats=FORMATS, rounds=range(1, 7), seed: int = 1, max_terms: int | None = 10**6,
         plot: str | None = None, verbose: bool = True) -> dict:
    """Run the experiment and print the table.

    Parameters
    ----------
    formats : sequence of str
        Format names (``'custom'`` is ``[t, emax] = [5, 3]``).
    rounds : sequence of int
        Rounding modes (1-6).
    seed : int
        ``rng(seed)`` before the experiment (stochastic modes).
    max_terms : int or None
        Safety cap on the number of terms (None: none); a capped run is marked
        with ``*`` in the table.
    plot : str or None
        File to save a plot to (only if matplotlib is importable).

    Returns
    -------
    dict
        ``{(format, mode): (sum, terms, stagnated)}``.
    """
    rng(seed)
    results, paths = {}, {}
    lines = ["Format    Round mode          Sum            No. terms",
             "-" * 54]
    for fmt in formats:
        for mode in rounds:
            clear_chop()
            chop(None, options_for(fmt, mode))  # later calls reuse these options
            path = [] if (plot and mode == 1) else None
            s, n, stagnated = harmonic_sum(max_terms, path)
            results[(fmt, mode)] = (s, n, stagnated)
            if path is not None:
                paths[fmt] = path
            mark = "" if stagnated else "*"
            lines.append(f"{fmt:<9} {mode} {ROUND_NAMES[mode]:<12} {s:>14.10g}   {n:>9d}{mark}")
    clear_chop()
    if verbose:
        print("\n".join(lines))
    if plot:
        _plot(paths, plot, verbose)
    return results


def _plot(paths: dict, filename: str, verbose: bool) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        if verbose:
            print("(matplotlib not installed: no plot)")
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    for fmt, path in paths.items():
        ax.semilogx(range(1, len(path) + 1), path, label=fmt)
    n = max((len(p) for p in paths.values()), default=1)
    ax.semilogx(range(1, n + 1), list(itertools.accumulate(1 / k for k in range(1, n + 1))),
                "k--", label="double")
    ax.set_xlabel("n")
    ax.set_ylabel("partial sum (round to nearest)")
    ax.legend()
    fig.tight_layout()
    Path(filename).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(filename)
    plt.close(fig)
    if verbose:
        print(f"plot saved to {filename}")


if __name__ == "__main__":
    main(plot=Path(__file__).resolve().parent / "out" / "harmonic.png")
