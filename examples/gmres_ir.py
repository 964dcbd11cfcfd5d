"""GMRES-IR versus LU-IR with an fp16 LU factorization (Carson & Higham, 2018).

Solves ``A x = b`` for ``randsvd`` matrices with ``n = 100`` and condition
numbers ``1e6 .. 1e8``, with precisions ``(uf, u, ur) = (half, double,
quad)``: the LU factors are computed in simulated fp16, the working precision
is double and residuals are computed in double-double (standing in for quad).

* LU-IR corrects with the fp16 factors directly; it can only converge when
  ``kappa(A) * uf`` is below 1 (``uf = 2**-11``), so it fails here.
* GMRES-IR solves each correction equation with GMRES in double,
  preconditioned by the same fp16 factors, and converges to double-precision
  accuracy.

The forward errors are measured against a reference solution computed with
SciPy's double LU and refinement with exactly rounded residuals (math.fsum).

Run ``python examples/gmres_ir.py``; a plot is saved as
``examples/out/gmres_ir.png`` when matplotlib is installed (``examples/out/``
is not under version control).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import scipy.linalg

try:
    import pychop_compat  # noqa: F401
except ImportError:  # running from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pychop_compat import linalg


def exact_residual(A: np.ndarray, x: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``b - A x`` correctly rounded to double (exact products, math.fsum)."""
    P = A * x  # products a_ij x_j, split exactly into hi + lo (Dekker)
    c = 134217729.0
    ca, cx = c * A, c * x
    ah, xh = ca - (ca - A), cx - (cx - x)
    al, xl = A - ah, x - xh
    lo = al * xl - (((P - ah * xh) - al * xh) - ah * xl)
    return np.array([math.fsum([b[i], *(-P[i]), *(-lo[i])]) for i in range(A.shape[0])])


def reference_solution(A: np.ndarray, b: np.ndarray, steps: int = 10) -> np.ndarray:
    """Solution of ``A x = b`` to double accuracy: double LU + exact-residual refinement."""
    F = scipy.linalg.lu_factor(A)
    x = scipy.linalg.lu_solve(F, b)
    for _ in range(steps):
        d = scipy.linalg.lu_solve(F, exact_residual(A, x, b))
        x = x + d
        if np.linalg.norm(d, np.inf) <= 2.0**-53 * np.linalg.norm(x, np.inf):
            break
    return x


def main(n: int = 100, kappas=(1e6, 1e7, 1e8), modes=(2, 3), seed: int = 1,
         uf="h", u="d", ur="q", max_iter: int = 10, gmres_tol: float = 1e-6,
         plot: str | None = None, verbose: bool = True) -> dict:
    """Run LU-IR and GMRES-IR on each matrix and print the iteration tables.

    Returns
    -------
    dict
        ``{(mode, kappa): {'A', 'b', 'x_ref', 'kappa_inf', 'lu_ir', 'gmres_ir'}}``
        with the :class:`~pychop_compat.linalg.IRResult` of each method.
    """
    rng = np.random.default_rng(seed)
    out = {}
    for mode in modes:
        for kappa in kappas:
            A = linalg.randsvd(n, kappa, mode=mode, rng=rng)
            b = rng.standard_normal(n)
            x_ref = reference_solution(A, b)
            kinf = float(np.linalg.cond(A, np.inf))
            # stop='all': forward, normwise and componentwise backward errors <= u
            # (gmresir3's cri = 1), so "converged" means double accuracy.
            lu_res = linalg.lu_ir(A, b, uf, u, ur, x_true=x_ref, max_iter=max_iter, stop="all")
            gm_res = linalg.gmres_ir(A, b, uf, u, ur, x_true=x_ref, max_iter=max_iter,
                                     gmres_tol=gmres_tol, stop="all")
            out[(mode, kappa)] = dict(A=A, b=b, x_ref=x_ref, kappa_inf=kinf,
                                      lu_ir=lu_res, gmres_ir=gm_res)
            if verbose:
                print(f"randsvd mode {mode}, n = {n}, kappa_2 = {kappa:.0e}, "
                      f"kappa_inf = {kinf:.2e}; (uf, u, ur) = ({uf}, {u}, {ur})")
                for name, res in (("LU-IR", lu_res), ("GMRES-IR", gm_res)):
                    print(f"{name}: {res.status} after {res.iterations} steps")
                    print(res.table())
                print()
    if verbose:
        print(f"{'mode':>4} {'kappa_inf':>10} {'LU-IR ferr':>11} {'GMRES-IR ferr':>14} "
              f"{'steps':>5} {'GMRES its':>10}")
        for (mode, kappa), r in out.items():
            gm = r["gmres_ir"]
            print(f"{mode:>4} {r['kappa_inf']:10.2e} {r['lu_ir'].forward_error[-1]:11.2e} "
                  f"{gm.forward_error[-1]:14.2e} {gm.iterations:>5} {sum(gm.gmres_iterations):>10}")
    if plot:
        _plot(out, plot, verbose)
    return out


def _plot(out, filename, verbose):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        if verbose:
            print("(matplotlib not installed: no plot)")
        return
    fig, axes = plt.subplots(1, len(out), figsize=(3.2 * len(out), 3.2), squeeze=False)
    for ax, ((mode, kappa), r) in zip(axes[0], out.items()):
        for name, style in (("lu_ir", "r-x"), ("gmres_ir", "b-o")):
            fe = np.clip(np.asarray(r[name].forward_error), 1e-17, 1e3)  # 0 shown at 1e-17
            ax.semilogy(range(len(fe)), fe, style, label=name)
        ax.axhline(2.0**-53, color="k", ls="--")
        ax.set_title(f"mode {mode}, kappa {kappa:.0e}", fontsize=8)
        ax.set_xlabel("refinement step")
    axes[0][0].set_ylabel("forward error")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    Path(filename).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(filename)
    plt.close(fig)
    if verbose:
        print(f"plot saved to {filename}")


if __name__ == "__main__":
    main(plot=Path(__file__).resolve().parent / "out" / "gmres_ir.png")
