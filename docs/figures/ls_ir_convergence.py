"""Least-squares GMRES-IR (``ls_ir``) with fp16 and single QR factors: errors per step.

``A = Q diag(sigma) V^T`` (``m = 40``, ``n = 10``; ``Q``, ``V`` from the QR factorization of
random matrices, ``sigma`` geometric from 1 to ``1/kappa``) with kappa_2 = 1e2, 1e4 and 1e6
and a random ``b``; precisions ``(uf, u, ur)`` = (half or single, double, quad) as in Carson,
Higham and Pranesh (2020).  ``stop='all'``: each run stops when the forward error of the
stacked iterate ``[r; x]`` (against the augmented system's extended-precision solution) and
both backward errors of the augmented system are at most ``u``, or when they stagnate, or
after ``MAX_ITER`` steps.  (The reference is accurate while ``kappa_2(A)^2 u`` is well below 1,
the augmented system's condition number being up to about ``kappa_2(A)^2``; hence kappa_2 at
most 1e6 here.)  GMRES iteration counts are in ``ls_ir_convergence.json`` and the
caption in ``docs/linalg.rst``.

Run ``python docs/figures/ls_ir_convergence.py`` (writes ``ls_ir_convergence.png`` and
``ls_ir_convergence.json`` here).
"""

from __future__ import annotations

import sys

from figure_common import every_run, iterations_legend, refinement_panels, save  # first: it pins OpenBLAS's kernels

import numpy as np

from pychop_compat import linalg  # noqa: E402

MAX_ITER = 10
FLOOR = 1e-18  # errors that are exactly 0 are drawn here (log axes)
RTOL, ATOL = 1e-3, 1e-13  # as ir_convergence: rounding-level errors compared loosely


def data(quick: bool = False) -> dict:
    """The errors and GMRES iterations per refinement step of LS-IR for each condition number."""
    m, n = (20, 5) if quick else (40, 10)
    kappas = (1e2, 1e6) if quick else (1e2, 1e4, 1e6)
    gen = np.random.default_rng(2)
    panels = []
    for kappa in kappas:
        Q = np.linalg.qr(gen.standard_normal((m, n)))[0]
        V = np.linalg.qr(gen.standard_normal((n, n)))[0]
        A = (Q * kappa ** (-np.arange(n) / (n - 1))) @ V.T
        b = gen.standard_normal(m)
        runs = []
        for uf, label in (("h", "fp16 QR"), ("s", "single QR")):
            res = linalg.ls_ir(A, b, uf, "d", "q", stop="all", max_iter=MAX_ITER)
            runs.append({"factorization": label, "status": res.status, "steps": res.iterations,
                         "gmres_iterations": list(res.gmres_iterations),
                         "forward_error": [float(e) for e in res.forward_error],
                         "backward_error": [float(e) for e in res.backward_error]})
        panels.append({"kappa": kappa, "runs": runs})
    return {"m": m, "n": n, "max_iter": MAX_ITER, "panels": panels}


def caption_facts(d: dict) -> list:
    """Phrases the figure's caption in ``docs/linalg.rst`` must contain (statuses and steps)."""
    return [f"with {run['factorization']} {run['status']} after {run['steps']} steps" for run in every_run(d)]


def main(out_dir=None, quick: bool = False):
    d = data(quick)
    fig = refinement_panels(d["panels"], ("r-x", "g-o"), iterations_legend("factorization", "gmres_iterations"),
                            lambda panel: f"m = {d['m']}, n = {d['n']}, kappa_2 = {panel['kappa']:.0e}",
                            ("forward error of [r; x]", "backward error, augmented system"),
                            "GMRES-LSIR: QR factors in fp16 or single, double working precision, "
                            "double-double residuals (dotted: u = 2^-53)", floor=FLOOR)
    return [save(fig, "ls_ir_convergence", out_dir, data=d)]


if __name__ == "__main__":
    print(*main(quick="--quick" in sys.argv[1:]), sep="\n")
