"""LU-IR and GMRES-IR with fp16 LU factors: forward and backward error per refinement step.

``A = randsvd(100, kappa, mode=2)`` with kappa_2 = 1e2, 1e4 and 1e6 and a random
``b``; precisions ``(uf, u, ur) = (half, double, quad)`` as in Carson and
Higham (2018): LU factors in simulated fp16, working precision double,
residuals in double-double.  LU-IR converges only while kappa * uf is well
below 1 (uf = 2^-11); GMRES-IR, which uses the same factors as a
preconditioner, reaches double-precision accuracy at every condition number
shown.  Forward errors are against a solution computed with SciPy's double LU
and refinement with correctly rounded residuals (``examples/gmres_ir.py``).
Each method stops at its own convergence test or after ``MAX_ITER`` steps;
the step counts are in ``ir_convergence.json`` and the caption in
``docs/linalg.rst``.

Run ``python docs/figures/ir_convergence.py`` (writes ``ir_convergence.png``
and ``ir_convergence.json`` here).
"""

from __future__ import annotations

import importlib.util
import sys

from figure_common import ROOT, refinement_panels, save  # first: it pins OpenBLAS's kernels

import numpy as np

from pychop_compat import linalg  # noqa: E402

MAX_ITER = 10
FLOOR = 1e-18  # errors that are exactly 0 are drawn here (log axes)
# The converged errors lie near double's unit roundoff, where the order of BLAS's sums moves
# their last digits between machines: below ATOL only "at rounding level" is compared.
RTOL, ATOL = 1e-3, 1e-13


def _reference_solution():
    spec = importlib.util.spec_from_file_location("gmres_ir_example", ROOT / "examples" / "gmres_ir.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.reference_solution


def data(quick: bool = False) -> dict:
    """The errors per refinement step of LU-IR and GMRES-IR for each condition number."""
    n = 40 if quick else 100
    kappas = (1e2, 1e6) if quick else (1e2, 1e4, 1e6)
    reference_solution = _reference_solution()
    gen = np.random.default_rng(1)
    panels = []
    for kappa in kappas:
        A = linalg.randsvd(n, kappa, mode=2, rng=gen)
        b = gen.standard_normal(n)
        x_ref = reference_solution(A, b)
        runs = []
        for method, solve in (("LU-IR", linalg.lu_ir), ("GMRES-IR", linalg.gmres_ir)):
            res = solve(A, b, "h", "d", "q", x_true=x_ref, max_iter=MAX_ITER)
            runs.append({"method": method, "status": res.status, "steps": len(res.forward_error) - 1,
                         "forward_error": [float(e) for e in res.forward_error],
                         "backward_error": [float(e) for e in res.backward_error]})
        panels.append({"kappa": kappa, "runs": runs})
    return {"n": n, "max_iter": MAX_ITER, "panels": panels}


def _steps(counts) -> str:
    low, high = min(counts), max(counts)
    return f"{low} steps" if low == high else f"{low} to {high} steps"


def caption_facts(d: dict) -> list:
    """Phrases the figure's caption in ``docs/linalg.rst`` must contain (the step counts)."""
    runs = [run for panel in d["panels"] for run in panel["runs"]]
    facts = []
    for method in ("LU-IR", "GMRES-IR"):
        converged = [run["steps"] for run in runs if run["method"] == method and run["status"] == "converged"]
        if converged:
            facts.append(f"{method} converges after {_steps(converged)}")
        if any(run["method"] == method and run["status"] == "maxiter" for run in runs):
            facts.append(f"{method} stops at the limit of {d['max_iter']} steps")
    return facts


def main(out_dir=None, quick: bool = False):
    d = data(quick)
    fig = refinement_panels(
        d["panels"], ("r-x", "b-o"),
        lambda run, row: f"{run['method']} ({run['status']}, {run['steps']} steps)" if row == 0 else run["method"],
        lambda panel: f"n = {d['n']}, kappa_2 = {panel['kappa']:.0e}",
        ("forward error", "normwise backward error"),
        "fp16 LU factors, double working precision, double-double residuals (dotted: u = 2^-53)",
        xlim=(-0.5, d["max_iter"] + 0.5), floor=FLOOR)
    return [save(fig, "ir_convergence", out_dir, data=d)]


if __name__ == "__main__":
    print(*main(quick="--quick" in sys.argv[1:]), sep="\n")
