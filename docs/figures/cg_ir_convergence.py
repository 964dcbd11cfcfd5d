"""CG-IR and GMRES-IR with an fp16 Cholesky preconditioner: forward and backward error per step.

``A = gallery_randsvd(n, -kappa, 3)`` (symmetric positive definite, symmetrized to the last
bit) with kappa_2 = 1e2, 1e4 and 1e6 and a random ``b``; precisions ``(uf, u, ur) = (half,
double, quad)`` as in Higham and Pranesh (2021): the matrix is scaled to unit diagonal,
perturbed by ``c u_f I`` (``c = 10``) and squeezed to ``0.1 xmax`` before ``chol_lp``
factorizes it in fp16; CG (``cg_ir``) or GMRES (``gmres_ir(factorization='cholesky')``),
preconditioned by that factor, computes each correction.  Forward errors are against
``extended_solution``.  Each method stops at its convergence test (normwise backward error at
most ``n u``) or after ``MAX_ITER`` steps; the inner iteration counts are in
``cg_ir_convergence.json`` and the caption in ``docs/linalg.rst``.

Run ``python docs/figures/cg_ir_convergence.py`` (writes ``cg_ir_convergence.png`` and
``cg_ir_convergence.json`` here).
"""

from __future__ import annotations

import sys

from figure_common import every_run, iterations_legend, refinement_panels, save  # first: it pins OpenBLAS's kernels

import numpy as np

from pychop_compat import linalg  # noqa: E402
from pychop_compat.linalg.refinement import extended_solution  # noqa: E402

MAX_ITER = 10
PERTURBATION = 10.0
FLOOR = 1e-18  # errors that are exactly 0 are drawn here (log axes)
# Converged errors lie near double's unit roundoff, where BLAS's order of sums (in the
# reference solution) moves their last digits between machines.
RTOL, ATOL = 1e-3, 1e-13


def _gmres_cholesky(*args, **kwargs):
    return linalg.gmres_ir(*args, factorization="cholesky", **kwargs)


def data(quick: bool = False) -> dict:
    """The errors and inner iterations per refinement step of CG-IR and GMRES-IR."""
    n = 20 if quick else 50
    kappas = (1e2, 1e6) if quick else (1e2, 1e4, 1e6)
    gen = np.random.default_rng(1)
    panels = []
    for kappa in kappas:
        A = linalg.gallery_randsvd(n, -kappa, 3, rng=gen)
        A = np.triu(A) + np.triu(A, 1).T  # chol_lp needs A == A.T exactly
        b = gen.standard_normal(n)
        x_ref = extended_solution(A, b)
        runs = []
        for method, solve in (("CG-IR", linalg.cg_ir), ("GMRES-IR", _gmres_cholesky)):
            res = solve(A, b, "h", "d", "q", x_true=x_ref, max_iter=MAX_ITER, scaling="positive",
                        perturbation=PERTURBATION)
            runs.append({"method": method, "status": res.status, "steps": res.iterations,
                         "inner_iterations": list(res.gmres_iterations),
                         "forward_error": [float(e) for e in res.forward_error],
                         "backward_error": [float(e) for e in res.backward_error]})
        panels.append({"kappa": kappa, "runs": runs})
    return {"n": n, "max_iter": MAX_ITER, "perturbation": PERTURBATION, "panels": panels}


def caption_facts(d: dict) -> list:
    """Phrases the figure's caption in ``docs/linalg.rst`` must contain (steps and inner iterations)."""
    return [f"{run['method']} {run['status']} after {run['steps']} steps "
            f"({', '.join(map(str, run['inner_iterations']))})" for run in every_run(d)]


def main(out_dir=None, quick: bool = False):
    d = data(quick)
    fig = refinement_panels(d["panels"], ("m-x", "b-o"), iterations_legend("method", "inner_iterations"),
                            lambda panel: f"SPD, n = {d['n']}, kappa_2 = {panel['kappa']:.0e}",
                            ("forward error", "normwise backward error"),
                            "fp16 Cholesky factor (scaled, perturbed, squeezed), double working precision, "
                            "double-double residuals (dotted: u = 2^-53)", floor=FLOOR)
    return [save(fig, "cg_ir_convergence", out_dir, data=d)]


if __name__ == "__main__":
    print(*main(quick="--quick" in sys.argv[1:]), sep="\n")
