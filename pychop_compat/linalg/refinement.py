"""Iterative refinement in three precisions: :func:`lu_ir` and :func:`gmres_ir`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
from numpy.typing import ArrayLike

from ._common import (OptionsLike, _float_array, _ieee, _make_rounder, _unit_roundoff)
from .kernels import dot, matvec
from .lu import LUResult, lu, solve
from .extended import _residual, _residual_dd, _norm_inf, _pow2_scale


@dataclass(eq=False)
class IRResult:
    """Outcome of :func:`lu_ir` or :func:`gmres_ir`.

    Attributes
    ----------
    x : ndarray
        The last iterate.
    converged : bool
        Whether a step changed the iterate by at most ``tol`` relative to it:
        ``||x_{i+1} - x_i|| <= tol ||x_{i+1}||`` (infinity norm; ``tol``
        defaults to the working precision's unit roundoff, so the iterate
        has stopped changing in that precision).
    status : str
        ``'converged'``, ``'diverged'`` (a non-finite iterate; it is not
        accepted) or ``'maxiter'``.
    backward_error : list of float
        Normwise backward error ``||b - A x_i|| / (||A|| ||x_i|| + ||b||)``
        (infinity norm; residual in double-double, rounded) of ``x_0, x_1,
        ...``, with ``A`` and ``b`` as stored in the working precision.
    forward_error : list of float or None
        ``||x_i - x_true|| / ||x_true||`` (infinity norm) when ``x_true`` was given.
    changes : list of float
        ``||x_{i+1} - x_i|| / ||x_{i+1}||`` of each accepted step.
    gmres_iterations : list of int
        GMRES iterations of each refinement step (empty for LU-IR; after a
        divergence, the last entry is that of the rejected step).
    factors : LUResult
        The LU factors computed in precision ``uf``.
    """

    x: np.ndarray
    converged: bool
    status: str
    backward_error: list = field(default_factory=list)
    forward_error: Optional[list] = None
    changes: list = field(default_factory=list)
    gmres_iterations: list = field(default_factory=list)
    factors: Optional[LUResult] = None

    @property
    def iterations(self) -> int:
        """Number of refinement steps done (accepted corrections)."""
        return len(self.backward_error) - 1

    def table(self) -> str:
        """The iteration history as a text table (one row per iterate ``x_i``)."""
        head = (f"{'iter':>4}  {'backward err':>12}  {'forward err':>12}  "
                f"{'rel. change':>11}  {'GMRES its':>9}")
        lines = [head, "-" * len(head)]
        for i, be in enumerate(self.backward_error):
            fe = self.forward_error[i] if self.forward_error is not None else float("nan")
            ch = f"{self.changes[i - 1]:11.3e}" if i else f"{'-':>11}"
            gi = str(self.gmres_iterations[i - 1]) if 0 < i <= len(self.gmres_iterations) else "-"
            lines.append(f"{i:>4}  {be:12.3e}  {fe:12.3e}  {ch}  {gi:>9}")
        return "\n".join(lines)


def _refine(A, b, uf, u, ur, correction, x_true, max_iter, tol, kind) -> IRResult:
    A = _float_array(A).astype(np.float64)
    b = _float_array(b).astype(np.float64)
    if A.ndim != 2 or A.shape[0] != A.shape[1] or b.shape != (A.shape[0],):
        raise ValueError("need a square A and a vector b of matching size")
    ru = _make_rounder(u)
    tol = _unit_roundoff(u) if tol is None else float(tol)
    Au, bu = ru(A), ru(b)  # the problem stored in the working precision

    F = lu(A, uf)
    x = solve(F, bu, uf)
    if not np.all(np.isfinite(x)):
        x = np.zeros_like(bu)
    x = ru(x)

    normA = _norm_inf(np.sum(np.abs(Au), axis=1)) if Au.size else 0.0
    normb = _norm_inf(bu)
    xt = None if x_true is None else np.asarray(x_true, dtype=np.float64)
    out = IRResult(x, False, "maxiter", forward_error=None if xt is None else [], factors=F)
    for it in range(max_iter + 1):
        denom = normA * _norm_inf(x) + normb
        out.backward_error.append(_norm_inf(_residual_dd(Au, x, bu)) / denom if denom else 0.0)
        if xt is not None:
            out.forward_error.append(_norm_inf(x - xt) / _norm_inf(xt))
        if out.status == "converged" or it == max_iter:
            break
        r = ru(_residual(Au, x, bu, ur))
        d, its = correction(F, Au, r)
        if kind == "gmres":
            out.gmres_iterations.append(its)
        x_new = ru(x + d)
        if not np.all(np.isfinite(x_new)):
            out.status = "diverged"
            break
        step, size = _norm_inf(x_new - x), _norm_inf(x_new)
        out.changes.append(step / size if size else (0.0 if step == 0 else math.inf))
        x = x_new
        if out.changes[-1] <= tol:
            out.status = "converged"
    out.x = x
    out.converged = out.status == "converged"
    return out


@_ieee
def lu_ir(
    A: ArrayLike,
    b: ArrayLike,
    uf: OptionsLike = "h",
    u: OptionsLike = "d",
    ur: OptionsLike = "q",
    *,
    x_true: Optional[ArrayLike] = None,
    max_iter: int = 10,
    tol: Optional[float] = None,
) -> IRResult:
    """LU-based iterative refinement in three precisions (Carson & Higham, 2018).

    Parameters
    ----------
    A, b : array_like
        Square system ``A x = b`` (double data).
    uf, u, ur : chop options or str, optional
        Factorization, working and residual precisions (default half, double,
        and ``'q'``).  ``ur`` may also be ``'q'`` (``'quad'``, ``'dd'``):
        the residual is then evaluated in double-double arithmetic (precision
        about ``u**2``, 106 bits, standing in for quadruple) and rounded to
        double; a chop format is simulated with :func:`matvec`.
    x_true : array_like, optional
        Exact solution, for the forward errors.
    max_iter : int, optional
        Maximum number of refinement steps (default 10).
    tol : float, optional
        Convergence: stop when a step changes the iterate by at most ``tol``
        relative to it (infinity norm; default: the unit roundoff of ``u``).

    Returns
    -------
    IRResult

    Notes
    -----
    1. ``P A = L U`` in precision ``uf`` (:func:`lu`; ``A`` rounded to ``uf``).
    2. ``x_0``: :func:`solve` with the factors in precision ``uf``, stored in
       ``u`` (zero if not finite).
    3. For ``i = 0, 1, ...``: ``r_i = b - A x_i`` in precision ``ur``, stored
       in ``u``; scaled by the power of two ``s <= ||r_i||`` (exact), solve
       ``A d_i = r_i / s`` with the factors in precision ``uf``;
       ``x_{i+1} = fl_u(x_i + s d_i)``.

    ``A`` and ``b`` are rounded to ``u`` first.  Stops when a step changes
    ``x`` by at most ``tol`` relative to it (converged), when an iterate is
    not finite (diverged; that iterate is rejected) or after ``max_iter``
    steps.  LU-IR is guaranteed to converge when ``kappa(A) u_f`` is
    sufficiently below 1.  ``A`` is not scaled: entries outside the range of
    ``uf`` overflow when it is rounded.

    References
    ----------
    E. Carson and N. J. Higham, Accelerating the solution of linear systems by
    iterative refinement in three precisions, SIAM J. Sci. Comput. 40(2),
    A817-A847, 2018.
    """

    def correction(F, Au, r):
        s = _pow2_scale(r)
        return _make_rounder(u)(solve(F, r / s, uf) * s), None

    return _refine(A, b, uf, u, ur, correction, x_true, max_iter, tol, "lu")


def _gmres(A, r, F, u, up, tol, maxit):
    """Left-preconditioned GMRES for ``M^{-1} A d = M^{-1} r``, ``M = P^T L U``.

    Working precision ``u`` (every operation rounded), except the application
    of ``M^{-1} A`` and of ``M^{-1}`` to ``r``, done in precision ``up``.
    Starts from ``d = 0``; Arnoldi with modified Gram-Schmidt, Givens rotations.
    Returns ``(d, iterations)``.
    """
    ru = _make_rounder(u)
    n = r.size
    maxit = n if maxit is None else int(maxit)

    def nrm2(v):
        return ru(np.sqrt(dot(v, v, u)))

    def apply(v):  # M^{-1} A v in precision up
        return ru(solve(F, matvec(A, v, up), up))

    z = ru(solve(F, r, up))
    beta = nrm2(z)
    if beta == 0 or not np.isfinite(beta):
        return np.zeros_like(r), 0
    V = np.zeros((n, maxit + 1))
    H = np.zeros((maxit + 1, maxit))
    cs, sn = np.zeros(maxit), np.zeros(maxit)
    g = np.zeros(maxit + 1)
    g[0] = beta
    V[:, 0] = ru(z / beta)
    k = 0
    for j in range(maxit):
        w = apply(V[:, j])
        for i in range(j + 1):
            H[i, j] = dot(w, V[:, i], u)
            w = ru(w - ru(H[i, j] * V[:, i]))
        H[j + 1, j] = nrm2(w)
        if H[j + 1, j] != 0:
            V[:, j + 1] = ru(w / H[j + 1, j])
        for i in range(j):  # previous rotations
            hi, hi1 = H[i, j], H[i + 1, j]
            H[i, j] = ru(ru(cs[i] * hi) + ru(sn[i] * hi1))
            H[i + 1, j] = ru(ru(-sn[i] * hi) + ru(cs[i] * hi1))
        hjj, hj1 = H[j, j], H[j + 1, j]
        rho = ru(np.sqrt(ru(ru(hjj * hjj) + ru(hj1 * hj1))))
        k = j + 1
        if rho == 0 or not np.isfinite(rho):
            k = j
            break
        cs[j], sn[j] = ru(hjj / rho), ru(hj1 / rho)
        H[j, j], H[j + 1, j] = rho, 0.0
        g[j + 1] = ru(-sn[j] * g[j])
        g[j] = ru(cs[j] * g[j])
        if abs(g[j + 1]) <= tol * beta or hj1 == 0:
            break
    if k == 0:
        return np.zeros_like(r), 0
    # back substitution H[:k, :k] y = g[:k] in precision u
    Hk = H[:k, :k]
    y = solve((np.eye(k), Hk, np.arange(k)), g[:k], u)
    return matvec(V[:, :k], y, u), k


@_ieee
def gmres_ir(
    A: ArrayLike,
    b: ArrayLike,
    uf: OptionsLike = "h",
    u: OptionsLike = "d",
    ur: OptionsLike = "q",
    *,
    up: OptionsLike = None,
    x_true: Optional[ArrayLike] = None,
    max_iter: int = 10,
    tol: Optional[float] = None,
    gmres_tol: float = 1e-6,
    gmres_maxit: Optional[int] = None,
) -> IRResult:
    """GMRES-based iterative refinement in three precisions (Carson & Higham 2018).

    As :func:`lu_ir`, but each correction solves the preconditioned system
    ``U^{-1} L^{-1} P A d_i = U^{-1} L^{-1} P r_i`` by GMRES in the working
    precision ``u``, preconditioned by the precision-``uf`` LU factors.

    Parameters
    ----------
    A, b, uf, u, ur, x_true, max_iter, tol
        As for :func:`lu_ir`.
    up : chop options or str, optional
        Precision in which GMRES applies ``U^{-1} L^{-1} P A`` and
        ``U^{-1} L^{-1} P`` (default: ``u``, i.e. GMRES entirely in the working
        precision).
    gmres_tol : float, optional
        GMRES stops when its (preconditioned, relative) residual norm is at
        most ``gmres_tol`` (default 1e-6).
    gmres_maxit : int, optional
        Maximum GMRES iterations per refinement step (default ``n``).

    Returns
    -------
    IRResult
        With ``gmres_iterations`` filled in.

    Notes
    -----
    The residual ``r_i`` is scaled by the power of two ``s <= ||r_i||``
    (exact) before GMRES, and the correction scaled back.  GMRES starts from
    zero, uses modified Gram-Schmidt Arnoldi and Givens rotations, every
    operation rounded to ``u`` (dot products and norms by :func:`dot`, vector
    updates elementwise), except the preconditioned operator, applied in
    ``up`` with :func:`matvec` and :func:`solve`.  Carson & Higham's
    convergence analysis assumes that operator applied in extra precision
    (``u**2``); here ``up`` can be any chop format up to double and defaults to
    ``u``.  GMRES-IR converges for much larger ``kappa(A)`` than LU-IR with the
    same ``uf`` (see ``examples/gmres_ir.py``).

    References
    ----------
    E. Carson and N. J. Higham, A new analysis of iterative refinement and its
    application to accurate solution of ill-conditioned sparse linear
    systems, SIAM J. Sci. Comput. 39(6), A2834-A2856, 2017.
    E. Carson and N. J. Higham, Accelerating the solution of linear systems by
    iterative refinement in three precisions, SIAM J. Sci. Comput. 40(2),
    A817-A847, 2018.
    """
    upp = u if up is None else up

    def correction(F, Au, r):
        s = _pow2_scale(r)
        d, its = _gmres(Au, r / s, F, u, upp, gmres_tol, gmres_maxit)
        return _make_rounder(u)(d * s), its

    return _refine(A, b, uf, u, ur, correction, x_true, max_iter, tol, "gmres")
