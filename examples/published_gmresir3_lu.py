"""LU residuals of the GMRES-IR SuiteSparse test: published and computed.

The test script ``gmresir3_ctest.m`` of github.com/SrikaraPranesh/Multi_precision_NLA_kernels
(the GMRES-IR codes of Carson & Higham and Higham, Pranesh & Zounon) takes
the 19 real square SuiteSparse matrices with 100 <= n <= 500 whose largest
entry exceeds fp16's ``xmax``, scales each one two-sidedly, squeezes it by
``mu = 0.1 * xmax``, factorizes ``chop(mu * D1 A D2)`` in fp16 with
``lutx_chop`` and reports the relative residual of the unscaled factors,
``||A - L U||_inf / ||A||_inf`` with ``L = (1/mu) D1^{-1} P^T L_h`` and
``U = U_h D2^{-1}``.  Its output, ``gmresir3_ctest.txt`` (commit 3265d72,
2020-06-01), prints the matrices' properties (n, ``cond(A, inf)``,
``max |a_ij|``, ``min |a_ij| > 0``) and, in its third block, that residual
(``'%6.2e'``, three significant digits).

The scaling is the script's ``scale_diag_2side_symm``: up to 10 sweeps of
``A <- diag(1./sqrt(row maxima)) * A * diag(1./sqrt(column maxima))``,
stopping when every row and column maximum (before the sweep) is within
1e-4 of 1.  (Despite its name it computes separate row and column factors.
Since 0.4.0 ``pychop_compat.linalg.scale_diag_2side_symm`` runs this algorithm
and ``linalg.lutx_chop`` the factorization, with today's chop; this script keeps
its own line-by-line port so that ``lutx_chop`` can run with the chop of the
study's date.)

The matrices are not shipped (they come from the SuiteSparse collection):
pass a folder of SuiteSparse ``.mat`` files (``Problem.A``, MATLAB v5/v7
format, e.g. ``HB/bcsstk03.mat`` saved as ``bcsstk03.mat``)::

    python examples/published_gmresir3_lu.py /path/to/matrices

Matrices not in the folder, or saved in v7.3 (HDF5) format, are listed as
skipped.  The factorization is computed twice: a line-by-line port of
``lutx_chop`` with ``chop_at('2020-06-01')`` (the chop of the study's date)
and today's ``pychop_compat.linalg.lu(A, 'h')``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Optional

import numpy as np

try:
    import pychop_compat  # noqa: F401
except ImportError:  # running from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pychop_compat import chop_at, float_params, linalg

SOURCE = ("github.com/SrikaraPranesh/Multi_precision_NLA_kernels, gmresir3_ctest.txt "
          "(commit 3265d72), first and third blocks")

#: The published rows: (name, n, cond(A, inf), max|a_ij|, min|a_ij| > 0, fp16 LU residual).
PUBLISHED = (
    ("bcsstk03", 112, "9.50e+06", "1.71e+11", "4.53e-06", "4.18e-04"),
    ("lns_131", 131, "3.26e+15", "6.32e+09", "3.45e-09", "2.59e-04"),
    ("lnsp_131", 131, "3.26e+15", "6.32e+09", "3.45e-09", "2.25e-04"),
    ("bcsstk04", 132, "5.61e+06", "8.04e+06", "8.67e-19", "1.41e-03"),
    ("bcsstk22", 138, "1.67e+05", "4.59e+06", "5.55e-17", "9.93e-04"),
    ("lund_a", 147, "5.44e+06", "1.50e+08", "1.22e-04", "1.22e-03"),
    ("bcsstk05", 153, "3.53e+04", "3.30e+06", "4.66e-10", "9.01e-04"),
    ("west0156", 156, "1.17e+31", "1.87e+07", "9.31e-22", "2.42e-04"),
    ("mcca", 180, "1.80e+17", "1.55e+19", "2.26e-02", "1.96e-04"),
    ("fs_183_1", 183, "1.08e+14", "8.23e+08", "1.81e-25", "2.44e-04"),
    ("fs_183_3", 183, "1.59e+14", "8.46e+08", "2.35e-10", "2.44e-04"),
    ("fs_183_4", 183, "1.10e+12", "8.16e+08", "2.03e-10", "2.44e-04"),
    ("fs_183_6", 183, "8.79e+11", "8.73e+08", "1.72e-53", "2.44e-04"),
    ("nos1", 237, "2.53e+07", "1.23e+09", "8.00e+04", "3.48e-04"),
    ("saylr1", 238, "1.59e+09", "3.06e+08", "7.20e-04", "9.52e-04"),
    ("tumorAntiAngiogenesis_2", 305, "1.99e+10", "5.15e+05", "8.51e-06", "2.44e-04"),
    ("tumorAntiAngiogenesis_3", 410, "3.74e+12", "3.70e+07", "5.39e-07", "2.44e-04"),
    ("bcsstk06", 420, "1.22e+07", "2.42e+09", "7.70e-34", "8.94e-04"),
    ("bcsstk07", 420, "1.22e+07", "2.42e+09", "7.70e-34", "8.94e-04"),
)

#: The chop of the study's date (the output was committed on 2020-06-01).
STUDY_DATE = "2020-06-01"
THETA = 0.1


def script_scaling(A: np.ndarray, tol: float = 1e-4, sweeps: int = 10):
    """The script's two-sided scaling: ``(B, d1prod, d2prod)`` with ``B = diag(d1prod) A diag(d2prod)``."""
    B = np.array(A, dtype=np.float64)
    n = B.shape[0]
    d1prod, d2prod = np.ones(n), np.ones(n)
    for _ in range(sweeps):
        row_max = np.max(np.abs(B), axis=1)
        col_max = np.max(np.abs(B), axis=0)
        d1, d2 = np.sqrt(row_max), np.sqrt(col_max)
        B = ((1 / d1)[:, None] * B) * (1 / d2)[None, :]  # diag(1./d1)*B*diag(1./d2)
        d1prod, d2prod = d1prod / d1, d2prod / d2
        if np.max(np.abs(np.concatenate([row_max, col_max]) - 1)) < tol:
            break
    return B, d1prod, d2prod


def lutx_chop(A: np.ndarray, ch: Callable) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Moler's ``lutx`` with every operation rounded by ``ch`` (persistent options set by the caller)."""
    A = np.array(A, dtype=np.float64)
    n = A.shape[0]
    p = np.arange(n)
    for k in range(n - 1):
        m = k + int(np.argmax(np.abs(A[k:, k])))  # the first largest, as MATLAB's max
        if A[m, k] != 0:
            if m != k:
                A[[k, m]] = A[[m, k]]
                p[[k, m]] = p[[m, k]]
            A[k + 1:, k] = ch(A[k + 1:, k] / A[k, k])
            A[k + 1:, k + 1:] = ch(A[k + 1:, k + 1:] - ch(np.outer(A[k + 1:, k], A[k, k + 1:])))
    return np.tril(A, -1) + np.eye(n), np.triu(A), p


def load_suitesparse(path: Path) -> Optional[np.ndarray]:
    """``Problem.A`` of a SuiteSparse ``.mat`` file as a dense array (None for v7.3 files)."""
    import scipy.io

    try:
        problem = scipy.io.loadmat(str(path))["Problem"]
    except NotImplementedError:  # MATLAB v7.3 (HDF5)
        return None
    A = problem["A"][0, 0]
    return np.asarray(A.toarray() if hasattr(A, "toarray") else A, dtype=np.float64)


def residuals(A: np.ndarray, ch: Optional[Callable] = None) -> tuple[float, float]:
    """``(study, today)`` relative residuals ``||A - L U||_inf / ||A||_inf`` of the unscaled fp16 factors.

    ``study`` factorizes with :func:`lutx_chop` and ``ch`` (default
    ``chop_at(STUDY_DATE)``), ``today`` with ``linalg.lu(., 'h')``.
    """
    xmax = float_params("h")[3]
    Ah, d1prod, d2prod = script_scaling(A)
    mu = THETA * xmax
    Ah = mu * Ah
    out = []
    if ch is None:
        ch = chop_at(STUDY_DATE)
    ch([], {"format": "h"})
    L, U, p = lutx_chop(ch(Ah), ch)
    F = linalg.lu(Ah, "h")
    for L, U, p in ((L, U, p), (F.L, F.U, F.perm)):
        PtL = np.zeros_like(L)
        PtL[p] = L  # Ph' * Lh
        Lu = (1 / mu) * ((1 / d1prod)[:, None] * PtL)
        Uu = U * (1 / d2prod)[None, :]
        out.append(float(np.linalg.norm(A - Lu @ Uu, np.inf) / np.linalg.norm(A, np.inf)))
    return out[0], out[1]


def properties(A: np.ndarray) -> tuple[str, str, str]:
    """``cond(A, inf)``, ``max |a_ij|``, ``min |a_ij| > 0`` as the script prints them."""
    absA = np.abs(A)
    cond = float(linalg.cond(A, np.inf))
    return f"{cond:.2e}", f"{absA.max():.2e}", f"{absA[absA > 0].min():.2e}"


def main(folder: Optional[str] = None, verbose: bool = True) -> dict:
    """Print published and computed rows side by side for the matrices found in ``folder``.

    Returns
    -------
    dict
        ``{name: (properties, study residual, today residual)}`` (strings as
        printed) for every matrix found; missing or v7.3 ones are left out.
    """
    results = {}
    lines = [f"Published: {SOURCE}", f"study = lutx_chop with chop_at('{STUDY_DATE}'); "
             "today = linalg.lu(A, 'h'); '!' marks a difference from the published number",
             f"{'matrix':<24} {'n':>4}  {'cond, max, min published':<28} {'computed':<28} "
             f"{'res. publ.':>10} {'study':>10} {'today':>10}"]
    skipped = []
    for name, n, cond, amax, amin, res in PUBLISHED:
        path = Path(folder) / f"{name}.mat" if folder else None
        if path is None or not path.exists():
            skipped.append(f"{name} (not found)")
            continue
        A = load_suitesparse(path)
        if A is None:
            skipped.append(f"{name} (v7.3 file)")
            continue
        props = properties(A)
        study, today = (f"{r:.2e}" for r in residuals(A))
        results[name] = (props, study, today)
        pub = (cond, amax, amin)
        shown = ", ".join(v + ("" if v == q else "!") for v, q in zip(props, pub))
        lines.append(f"{name:<24} {A.shape[0]:>4}  {', '.join(pub):<28} {shown:<28} {res:>10} "
                     f"{study + ('' if study == res else '!'):>10} {today + ('' if today == res else '!'):>10}")
    same = sum(r[1] == next(p[5] for p in PUBLISHED if p[0] == k) for k, r in results.items())
    lines.append(f"{same} of {len(results)} computed study residuals as published "
                 f"({len(PUBLISHED)} published; skipped: {', '.join(skipped) or 'none'})")
    if verbose:
        print("\n".join(lines))
    return results


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit("give the folder of SuiteSparse .mat files")
    main(sys.argv[1])
