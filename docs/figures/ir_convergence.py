"""LU-IR and GMRES-IR with fp16 LU factors: forward and backward error per refinement step.

``A = randsvd(100, kappa, mode=2)`` with kappa_2 = 1e2, 1e4 and 1e6 and a random
``b``; precisions ``(uf, u, ur) = (half, double, quad)`` as in Carson and
Higham (2018): LU factors in simulated fp16, working precision double,
residuals in double-double.  LU-IR converges only while kappa * uf is well
below 1 (uf = 2^-11); GMRES-IR, which uses the same factors as a
preconditioner, reaches double-precision accuracy at every condition number
shown.  Forward errors are against a solution computed with SciPy's double LU
and refinement with correctly rounded residuals (``examples/gmres_ir.py``).

Run ``python docs/figures/ir_convergence.py`` (writes ``ir_convergence.png`` here).
"""

from __future__ import annotations

import importlib.util
import sys

import numpy as np

from figure_common import ROOT, plt, save

from pychop_compat import linalg  # noqa: E402


def _reference_solution():
    spec = importlib.util.spec_from_file_location("gmres_ir_example", ROOT / "examples" / "gmres_ir.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.reference_solution


def main(out_dir=None, quick: bool = False):
    n = 40 if quick else 100
    kappas = (1e2, 1e6) if quick else (1e2, 1e4, 1e6)
    reference_solution = _reference_solution()
    gen = np.random.default_rng(1)
    fig, axes = plt.subplots(2, len(kappas), figsize=(3.6 * len(kappas), 6), squeeze=False, sharey="row")
    for col, kappa in enumerate(kappas):
        A = linalg.randsvd(n, kappa, mode=2, rng=gen)
        b = gen.standard_normal(n)
        x_ref = reference_solution(A, b)
        runs = {"LU-IR": linalg.lu_ir(A, b, "h", "d", "q", x_true=x_ref, max_iter=10),
                "GMRES-IR": linalg.gmres_ir(A, b, "h", "d", "q", x_true=x_ref, max_iter=10)}
        for (name, res), style in zip(runs.items(), ("r-x", "b-o")):
            ferr = np.maximum(np.asarray(res.forward_error, dtype=float), 1e-18)  # 0 drawn at 1e-18
            berr = np.maximum(np.asarray(res.backward_error, dtype=float), 1e-18)
            axes[0, col].semilogy(range(len(ferr)), ferr, style, label=f"{name} ({res.status})")
            axes[1, col].semilogy(range(len(berr)), berr, style, label=name)
        for row in (0, 1):
            axes[row, col].axhline(2.0**-53, color="k", ls=":", lw=1)
            axes[row, col].set_xlabel("refinement step")
        axes[0, col].set_title(f"n = {n}, kappa_2 = {kappa:.0e}", fontsize=9)
        axes[0, col].legend(fontsize=7)
    axes[0, 0].set_ylabel("forward error")
    axes[1, 0].set_ylabel("normwise backward error")
    fig.suptitle("fp16 LU factors, double working precision, double-double residuals (dotted: u = 2^-53)",
                 fontsize=9)
    fig.tight_layout()
    return [save(fig, "ir_convergence", out_dir)]


if __name__ == "__main__":
    print(*main(quick="--quick" in sys.argv[1:]), sep="\n")
