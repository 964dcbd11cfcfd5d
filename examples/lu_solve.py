"""LU solves in simulated fp16, bfloat16 and fp8, with and without subnormals.

For random matrices of prescribed 2-norm condition number ``kappa``
(``randsvd``, geometrically distributed singular values), solves ``A x = b``
with :func:`pychop_compat.linalg.solve` -- LU with partial pivoting and
substitution, every operation rounded to the format -- and prints the
forward error ``||x - x_true|| / ||x_true||`` and the normwise backward error
``||b - A x|| / (||A|| ||x|| + ||b||)`` (infinity norms, measured in double)
against ``kappa``.

Each matrix is solved twice: as generated (entries of order ``1/sqrt(n)``)
and scaled by a power of two that puts its entries near the bottom of the
format's normal range (``scale = 2**(emin + 6)``), where the elimination
produces subnormal numbers: gradual underflow (``subnormal = 1``) keeps the
backward error at the level of the unscaled solve, flushing subnormals to
zero (``subnormal = 0``) does not.  (For fp8-e4m3, ``emin = -6`` and the
scale is 1: its normal range ends at ``2**-6``, so the unscaled matrices
already produce subnormals.)

Run ``python examples/lu_solve.py``; a plot is saved as
``examples/out/lu_solve.png`` when matplotlib is installed (``examples/out/``
is not under version control).
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np

try:
    import pychop_compat  # noqa: F401
except ImportError:  # running from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pychop_compat import Chop, linalg

FORMATS = ("fp16", "bfloat16", "fp8-e4m3")


def errors(A: np.ndarray, b: np.ndarray, x: np.ndarray, x_true: np.ndarray) -> tuple[float, float]:
    """Forward and normwise backward error (infinity norms, in double)."""
    if not np.all(np.isfinite(x)):
        return float("inf"), float("inf")
    ferr = np.linalg.norm(x - x_true, np.inf) / np.linalg.norm(x_true, np.inf)
    nbe = np.linalg.norm(b - A @ x, np.inf) / (
        np.linalg.norm(A, np.inf) * np.linalg.norm(x, np.inf) + np.linalg.norm(b, np.inf))
    return float(ferr), float(nbe)


def main(n: int = 100, kappas=tuple(10.0**k for k in range(1, 9)), formats=FORMATS,
         seed: int = 0, plot: str | None = None, verbose: bool = True) -> dict:
    """Run the experiment and print the tables.

    Returns
    -------
    dict
        ``{(format, scaled, subnormal, kappa): (forward_error, backward_error)}``
        and, under the key ``'u'``, the unit roundoff of each format.
    """
    rng = np.random.default_rng(seed)
    problems = []
    for kappa in kappas:
        A = linalg.randsvd(n, kappa, mode=3, rng=rng)
        x_true = rng.standard_normal(n)
        problems.append((kappa, A, x_true))

    results: dict = {"u": {}}
    configs = [(f, sc, sub) for f in formats for sc in (False, True) for sub in (1, 0)]
    for fmt in formats:
        o = Chop(format=fmt).options
        results["u"][fmt] = 2.0 ** -o.params[0]
    for fmt, scaled, sub in configs:
        emin = 1 - Chop(format=fmt).options.params[1]
        scale = 2.0 ** (emin + 6) if scaled else 1.0
        for kappa, A, x_true in problems:
            As = A * scale
            b = As @ x_true
            with warnings.catch_warnings():
                # fp8 factors of ill-conditioned matrices can be singular: the table shows
                # the resulting Inf/NaN errors, so the warning is not repeated here
                warnings.simplefilter("ignore", linalg.SingularMatrixWarning)
                x = linalg.solve(As, b, {"format": fmt, "subnormal": sub})
            results[(fmt, scaled, sub, kappa)] = errors(As, b, x, x_true)

    if verbose:
        heads = [f"{f}{' scaled' if sc else ''}{'' if sub else ' FTZ'}" for f, sc, sub in configs]
        for which, title in ((0, "Forward error"), (1, "Normwise backward error")):
            print(f"{title}, n = {n} (FTZ: subnormals flushed; scaled: entries near the underflow threshold)")
            for start in range(0, len(configs), 4):
                group = configs[start:start + 4]
                print(f"{'kappa':>7}" + "".join(f"{h:>22}" for h in heads[start:start + 4]))
                for kappa, _, _ in problems:
                    print(f"{kappa:7.0e}" + "".join(
                        f"{results[(f, sc, sub, kappa)][which]:22.2e}" for f, sc, sub in group))
            print()
        print("unit roundoff: " + ", ".join(f"{f} {u:.2e}" for f, u in results["u"].items()))
    if plot:
        _plot(results, configs, [p[0] for p in problems], plot, verbose)
    return results


def _plot(results, configs, kappas, filename, verbose):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        if verbose:
            print("(matplotlib not installed: no plot)")
        return
    colors = dict(zip(dict.fromkeys(f for f, _, _ in configs), ("C0", "C1", "C2", "C3", "C4")))
    styles = {(False, 1): "-o", (False, 0): "--x", (True, 1): ":s", (True, 0): "-.^"}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for which, ax, title in ((0, axes[0], "forward error"), (1, axes[1], "normwise backward error")):
        for f, sc, sub in configs:
            vals = [min(results[(f, sc, sub, k)][which], 1e3) for k in kappas]
            ax.loglog(kappas, vals, styles[(sc, sub)], color=colors[f],
                      label=f"{f}{' scaled' if sc else ''}{'' if sub else ' FTZ'}")
        ax.set_xlabel("kappa_2(A)")
        ax.set_title(title)
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    Path(filename).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(filename)
    plt.close(fig)
    if verbose:
        print(f"plot saved to {filename}")


if __name__ == "__main__":
    main(plot=Path(__file__).resolve().parent / "out" / "lu_solve.png")
