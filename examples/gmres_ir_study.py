"""GMRES-IR over MATLAB's randsvd matrices: iterations against the condition number.

The acceptance study of the mixed-precision refinement papers (Carson &
Higham 2017, 2018; Higham, Pranesh & Zounon 2019), run with gmresir3's
algorithm: ``n = 100``, ``gallery('randsvd', n, kappa, mode)`` for
``kappa = 1e2 .. 1e12`` and modes 2 and 3, right-hand side ``randn(n, 1)``,
LU factors in fp16, bfloat16 or single (``uf = h, b, s``), working
precision double (``u = d``), residuals and the preconditioned operator in
double-double (``ur = up = q``), stopping when the normwise backward error is
at most ``n u`` (``stop='backward'``), GMRES tolerance 1e-6 (``gtol``).

Prints a table (refinement steps / total GMRES iterations, or the status when
not converged) and saves ``examples/out/gmres_ir_study.png`` (iterations
against kappa; ``examples/out/`` is not under version control) when
matplotlib is installed.  About a minute with the defaults;
``python examples/gmres_ir_study.py --quick`` runs ``n = 50`` and fewer kappas.

The matrices and right-hand sides come from NumPy's generator, not MATLAB's
``randn``: the published tables cannot be matched number for number (to use
MATLAB's exact inputs, save them with ``save('in.mat', 'A', 'b', '-v7')``
and load them with ``scipy.io.loadmat``).  What can be compared is the
shape: with fp16 factors GMRES-IR converges in a few refinement steps up to
``kappa`` about ``1e12`` while its GMRES iterations grow with ``kappa``;
bfloat16 factors need more GMRES iterations than fp16; single factors very few.
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

from pychop_compat import linalg

NAMES = {"h": "fp16", "b": "bfloat16", "s": "single"}


def main(n: int = 100, kappas=tuple(10.0 ** np.arange(2, 13, 2)), modes=(2, 3), ufs=("h", "b", "s"),
         u: str = "d", ur: str = "q", seed: int = 1, gmres_tol: float = 1e-6, max_iter: int = 10,
         plot: str | None = None, verbose: bool = True) -> dict:
    """Run the study; returns ``{(mode, kappa, uf): {'A', 'b', 'result'}}``."""
    rng = np.random.default_rng(seed)
    out = {}
    for mode in modes:
        for kappa in kappas:
            A = linalg.gallery_randsvd(n, kappa, mode, rng=rng)
            b = rng.standard_normal(n)
            for uf in ufs:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", linalg.SingularMatrixWarning)
                    res = linalg.gmres_ir(A, b, uf, u, ur, max_iter=max_iter, gmres_tol=gmres_tol)
                out[(mode, kappa, uf)] = dict(A=A, b=b, result=res)
    if verbose:
        print(table(out, modes, kappas, ufs, n))
    if plot:
        _plot(out, modes, kappas, ufs, plot, verbose)
    return out


def cell(res) -> str:
    if res.converged:
        return f"{res.iterations} / {sum(res.gmres_iterations)}"
    return res.status


def table(out, modes, kappas, ufs, n) -> str:
    head = f"{'mode':>4} {'kappa_2':>8} {'kappa_inf':>10} " + " ".join(f"{NAMES[uf]:>12}" for uf in ufs)
    lines = [f"GMRES-IR, n = {n}: refinement steps / total GMRES iterations (or status)", head,
             "-" * len(head)]
    for mode in modes:
        for kappa in kappas:
            A = out[(mode, kappa, ufs[0])]["A"]
            kinf = linalg.cond(A, np.inf)
            cells = " ".join(f"{cell(out[(mode, kappa, uf)]['result']):>12}" for uf in ufs)
            lines.append(f"{mode:>4} {kappa:8.0e} {kinf:10.2e} {cells}")
    return "\n".join(lines)


def _plot(out, modes, kappas, ufs, filename, verbose):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        if verbose:
            print("(matplotlib not installed: no plot)")
        return
    fig, axes = plt.subplots(1, len(modes), figsize=(4.2 * len(modes), 3.4), squeeze=False)
    for ax, mode in zip(axes[0], modes):
        for uf, style in zip(ufs, ("o-", "s-", "^-")):
            its = [sum(out[(mode, k, uf)]["result"].gmres_iterations) if out[(mode, k, uf)]["result"].converged
                   else np.nan for k in kappas]
            ax.loglog(kappas, its, style, label=f"uf = {NAMES[uf]}")
        ax.set_title(f"randsvd mode {mode}")
        ax.set_xlabel("kappa_2(A)")
    axes[0][0].set_ylabel("total GMRES iterations")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    Path(filename).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(filename)
    plt.close(fig)
    if verbose:
        print(f"plot saved to {filename}")


if __name__ == "__main__":
    figure = Path(__file__).resolve().parent / "out" / "gmres_ir_study.png"
    if "--quick" in sys.argv:
        main(n=50, kappas=(1e2, 1e6, 1e10), plot=figure)
    else:
        main(plot=figure)
