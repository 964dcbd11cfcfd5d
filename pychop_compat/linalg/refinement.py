"""Iterative refinement in three precisions: :func:`lu_ir`, :func:`gmres_ir` (LU or Cholesky
factors), :func:`cg_ir` for symmetric positive definite systems and :func:`ls_ir` for least squares.

:func:`cg_ir`, :func:`ls_ir` and the Cholesky route of :func:`gmres_ir` compute on the host
(their factorizations are the research codes' NumPy ports).

GMRES's Hessenberg matrix, Givens rotations and triangular solve are host scalars for every
library; LAPACK or scaled factors, binary128 and ``stop='all'`` without ``x_true`` run on a host
copy (:func:`~pychop_compat.linalg.arrays.on_host`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np
from numpy.typing import ArrayLike

from .arrays import HOST, Arrays, arrays_for, host_computed, ieee, on_host
from .cholesky import cholesky_rounded
from .errors import warn_at_caller
from .common import (OptionsLike, Rounder, check_lapack_rounding, extended_kind, float_operands, safe_two_norm,
                     unit_roundoff)
from .extended import arithmetic, ext_lu_solve, ext_matvec, quick_two_sum, residual_dd, two_sum
from .lu import LUResult, factorize, needs_host, solve_on
from .products import HardwareLike, matmul_on
from .qr import house_qr_rounded
from .scaling import Scaling, checked_theta, spd_diag_scale

__all__ = ["IRResult", "LSIRResult", "lu_ir", "gmres_ir", "cg_ir", "ls_ir", "extended_solution", "STATUSES",
           "STOPS"]

STATUSES = ("converged", "singular", "diverged", "stagnated", "maxiter")
STOPS = ("backward", "all", "change")


@dataclass(eq=False)
class IRResult:
    """Outcome of :func:`lu_ir` or :func:`gmres_ir`.

    Attributes
    ----------
    x : ndarray
        The last accepted iterate (all NaN when ``status == 'singular'``).
    converged : bool
        True exactly when ``status == 'converged'``: the rule of ``stop`` holds
        for the returned ``x``.
    status : str
        ``'converged'``, ``'singular'`` (the ``uf`` factors have a zero or
        non-finite entry; no iterate), ``'diverged'`` (a non-finite iterate,
        rejected, or a growing backward error), ``'stagnated'`` or ``'maxiter'``:
        see :doc:`/linalg`, "Iterative refinement: stopping rules and outcomes".
    backward_error, componentwise_error : list of float
        Normwise ``||b - A x_i|| / (||A|| ||x_i|| + ||b||)`` (infinity norm,
        double-double residual) and componentwise ``max_i |b - A x|_i / (|A||x| + |b|)_i``
        backward errors of ``x_0, x_1, ...`` (``0/0`` read as 0; ``A``, ``b`` stored in ``u``).
    forward_error : list of float or None
        ``||x_i - x_true|| / ||x_true||`` when ``x_true`` was given, or computed (``stop='all'``).
    changes : list of float
        ``||x_{i+1} - x_i|| / ||x_{i+1}||`` of each accepted step.
    gmres_iterations : list of int
        GMRES iterations of each step, CG iterations for :func:`cg_ir` (empty for LU-IR; after
        a divergence, the last entry is that of the rejected step).
    factors : LUResult
        The LU factors computed in precision ``uf``.
    stop, tol : str, float
        The stopping rule and tolerance used.
    inner_solver : str
        ``'GMRES'``, or ``'CG'`` for :func:`cg_ir` (the heading of :meth:`table`'s last column).
    """

    x: np.ndarray
    converged: bool
    status: str
    backward_error: list = field(default_factory=list)
    forward_error: Optional[list] = None
    changes: list = field(default_factory=list)
    gmres_iterations: list = field(default_factory=list)
    factors: Optional[LUResult] = None
    componentwise_error: list = field(default_factory=list)
    stop: str = "backward"
    tol: float = 0.0
    inner_solver: str = "GMRES"

    @property
    def iterations(self) -> int:
        """Number of refinement steps done (accepted corrections)."""
        return max(len(self.backward_error) - 1, 0)

    def table(self) -> str:
        """The iteration history as a text table (one row per iterate ``x_i``)."""
        head = (f"{'iter':>4}  {'backward err':>12}  {'forward err':>12}  "
                f"{'rel. change':>11}  {self.inner_solver + ' its':>9}")
        lines = [head, "-" * len(head)]
        for i, be in enumerate(self.backward_error):
            fe = self.forward_error[i] if self.forward_error is not None else float("nan")
            ch = f"{self.changes[i - 1]:11.3e}" if i else f"{'-':>11}"
            gi = str(self.gmres_iterations[i - 1]) if 0 < i <= len(self.gmres_iterations) else "-"
            lines.append(f"{i:>4}  {be:12.3e}  {fe:12.3e}  {ch}  {gi:>9}")
        lines.append(f"status: {self.status}")
        return "\n".join(lines)


def _inf_norm(abs_a: np.ndarray) -> tuple:
    """``||A||_inf`` of a host matrix of absolute values as ``(m, k)``, the norm ``m 2^k``: NumPy's
    row sums (pairwise order) with ``k = 0`` where they are finite or an entry is not; else, for
    finite entries whose row sums overflow, the row sums of ``2^-k |A|`` with ``2^k >= 2n`` (exact
    but for entries below ``2^(k - 1022)``, far below the norm's last bit)."""
    if not abs_a.size:
        return 0.0, 0
    plain = float(np.max(np.sum(abs_a, axis=1)))
    if math.isfinite(plain) or not np.all(np.isfinite(abs_a)):
        return plain, 0
    k = (2 * abs_a.shape[1] - 1).bit_length()
    return float(np.max(np.sum(abs_a * 2.0**-k, axis=1))), k


def _overflow_shift(m: float, k: int, xn: float) -> int:
    """The ``s >= 1`` with ``2^-s ||A|| ||x|| < 2^1022`` (``||A|| = m 2^k`` as :func:`_inf_norm`
    gives it, ``m`` and ``xn`` finite): in the problem scaled by ``2^-s`` nothing overflows."""
    return max(k + max(0, math.frexp(m)[1] + math.frexp(xn)[1] - 1022), 1)


def _normwise(rn: float, m: float, k: int, xn: float, normb: float) -> float:
    """``rn / (||A|| xn + normb)`` (0 for ``rn = 0``, Inf for a zero denominator), ``||A|| = m 2^k``
    as :func:`_inf_norm` gives it.  Where the denominator overflows although its terms are finite,
    the same ratio for ``A``, ``b`` and the residual scaled by ``2^-s`` (:func:`_overflow_shift`):
    exact scalings, so it is the value of that scaled problem, where nothing overflows (an
    overflowed denominator read as Inf gave 0, and ``0 Inf`` for ``x = 0`` NaN)."""
    if rn == 0:
        return 0.0
    if k == 0:
        denom = m * xn + normb
        if math.isfinite(denom) or not all(math.isfinite(v) for v in (m, xn, normb, rn)):
            return rn / denom if denom else math.inf
    s = _overflow_shift(m, k, xn)
    denom = math.ldexp(m, k - s) * xn + math.ldexp(normb, -s)
    return math.ldexp(rn, -s) / denom if denom else math.inf


def _errors(arrays: Arrays, Au: Any, bu: Any, x: Any, normA: float, normb: float, absA: Any,
            balance: Optional[tuple] = None, shift: int = 0) -> tuple:
    """Normwise and componentwise backward errors of ``x`` (residual in double-double; the
    componentwise denominator ``|A||x|`` is the library's matrix-vector product).  ``||A||_inf`` is
    ``normA 2^shift`` (:func:`_inf_norm`).  ``balance``: ``(row, col)``, the normwise error is that of
    ``diag(row)^{-1} A diag(col)`` at ``x / col`` (``normA``, ``shift`` and ``normb`` are then of that system)."""
    n = Au.shape[0]
    r = residual_dd(arrays, Au, x, bu) if n else arrays.zeros((0,), Au.dtype)
    if balance is None:
        rn, xn = arrays.max_abs(r), arrays.max_abs(x)
    else:
        rn, xn = arrays.max_abs(r / balance[0]), arrays.max_abs(x / balance[1])
    nbe = _normwise(rn, normA, shift, xn, normb)
    if not arrays.all_finite(x):
        nbe = math.nan
    if not n:
        return nbe, 0.0
    xp = arrays.xp
    ax, ab, ar = xp.abs(x), xp.abs(bu), xp.abs(r)
    cden = absA @ ax + ab
    ratio = xp.where(ar == 0, xp.zeros_like(ar), ar / cden)  # equal shapes: IEEE division
    if not arrays.all_finite(cden) and all(map(arrays.all_finite, (absA, x, bu, r))):
        # rows of |A||x| that overflowed (ar / Inf gave 0): the ratio of those rows scaled by 2^-k, exact, with
        # 2^k >= 2n (a finite residual has finite products a_ij x_j, so the scaled sums are at most realmax / 2)
        scale = 2.0 ** -(2 * n - 1).bit_length()
        ratio = xp.where(xp.isfinite(cden), ratio, (ar * scale) / ((absA * scale) @ ax + ab * scale))
    return nbe, float(xp.max(ratio))


def extended_solution(A: np.ndarray, b: np.ndarray, steps: int = 8) -> np.ndarray:
    """``A^{-1} b`` to about twice double's precision, rounded to double: double LU (LAPACK) and
    refinement of a double-double iterate with double-double residuals (``kappa(A) u`` below 1)."""
    import scipy.linalg

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scipy.linalg.LinAlgWarning)
        F = scipy.linalg.lu_factor(A, check_finite=False)
    hi = scipy.linalg.lu_solve(F, b, check_finite=False)
    lo = np.zeros_like(hi)
    for _ in range(steps):
        # b - A (hi + lo): the residual of hi in double-double, rounded to double, minus A lo in
        # double (lo is below half an ulp of hi: the error of this step is of order u**2 ||A|| ||x||)
        r = residual_dd(HOST, A, hi, b) - A @ lo
        d = scipy.linalg.lu_solve(F, r, check_finite=False)
        if not np.all(np.isfinite(d)):
            break
        s, e = two_sum(hi, d)
        hi, lo = quick_two_sum(s, e + lo)
    return hi + lo


def _verdict(it: int, nbe: float, cbe: float, fe: float, stop: str, tol: float, out: IRResult,
             measures: list, n: int, uw: float) -> Optional[str]:
    """The stopping rule after the errors of iterate ``it`` are known: the final status
    (``'converged'``, ``'diverged'``, ``'stagnated'``) or None to go on; appends this iterate's
    convergence measure to ``measures``."""
    if not math.isfinite(nbe):
        return "diverged"
    m: Optional[float] = nbe
    if stop == "all":
        # All three errors <= tol: a NaN error (x_true or the reference solution not finite) fails the
        # rule; Python's max would drop a NaN that is not its first argument.  An empty x has no forward
        # error (fe is NaN then): its backward errors decide.
        errors = (nbe, cbe, fe) if n else (nbe, cbe)
        m = math.nan if any(math.isnan(e) for e in errors) else max(errors)
    if stop == "change":
        m = out.changes[-1] if it else None
        if m is not None and m <= tol:
            return "converged" if nbe <= max(n, 1) * uw else "stagnated"
    elif m is not None and m <= tol:
        return "converged"
    if it and nbe > max(10 * min(out.backward_error[:-1]), max(n, 1) * uw):
        return "diverged"
    if m is not None:
        measures.append(m)
    if len(measures) >= 3 and measures[-1] >= measures[-2] >= measures[-3]:
        return "stagnated"
    return None


def _residual(arrays: Arrays, A: Any, x: Any, b: Any, ur: OptionsLike) -> Any:
    """``b - A x`` in precision ``ur``, rounded to double."""
    kind = extended_kind(ur)
    if kind == "binary128":
        arith = arithmetic(kind)
        return arith.to_double(arith.sub(arith.from_double(b), ext_matvec(arith, A, x)))
    if kind == "dd":
        return residual_dd(arrays, A, x, b)
    rr = Rounder(ur, arrays)
    return rr(rr(b) - matmul_on(arrays, A, x, ur))


def _solve_precision(F: LUResult, uf: OptionsLike, u: OptionsLike) -> OptionsLike:
    """Precision of the solves with the factors: ``uf``, but the working precision ``u``
    for factors of a scaled matrix (unscaled, they and the solution need not fit in
    ``uf``'s range; gmresir3 solves with them in the working precision)."""
    return u if F.scaling is not None else uf


def _checked_count(value: Any, name: str) -> int:
    """An iteration count as an int, refused when negative (0 is allowed: no step)."""
    count = int(value)
    if count < 0:
        raise ValueError(f"{name} must be a nonnegative integer, got {value!r}")
    return count


def _host_only(up: OptionsLike, ur: OptionsLike, x_true: Any, scaling: Any, theta: Any, lu_method: str,
               stop: str, hardware: HardwareLike = None) -> bool:
    """Whether a refinement needs the host: LAPACK, scaled or ``hardware=`` factors, binary128
    arithmetic, or ``stop='all'`` without ``x_true`` (a LAPACK reference solution)."""
    return (needs_host(scaling, theta, lu_method, hardware) or "binary128" in (extended_kind(ur), extended_kind(up))
            or (stop == "all" and x_true is None))


def _refine(arrays: Arrays, A: Any, b: Any, uf: OptionsLike, u: OptionsLike, ur: OptionsLike,
            correction: Callable, x_true: Any, max_iter: int, tol: Optional[float], stop: str,
            factor: Callable, initial: Optional[Callable] = None,
            balance: Optional[Callable] = None) -> IRResult:
    """The loop of every refinement here: ``factor(A)`` gives the factors ``F`` (``F.singular``),
    ``initial(F, b)`` the first iterate (default: solved with ``F`` as LU factors) and
    ``correction(F, Au, r)`` ``(d, inner iterations or None)``; ``balance(F)``, when given,
    ``(K, row, col)`` with ``K = diag(row)^{-1} Au diag(col)`` (host arrays): the normwise backward
    errors are those of ``K y = diag(row)^{-1} b`` at ``y = x / col``."""
    A, b = (arrays.float_copy(v, False) for v in float_operands(arrays, A, b))
    if A.ndim != 2 or A.shape[0] != A.shape[1] or tuple(b.shape) != (A.shape[0],):
        raise ValueError("need a square A and a vector b of matching size")
    if stop not in STOPS:
        raise ValueError(f"stop must be one of {STOPS}, got {stop!r}")
    max_iter = _checked_count(max_iter, "max_iter")
    n = A.shape[0]
    ru = Rounder(u, arrays)
    uw = unit_roundoff(u)
    if tol is None:
        tol = max(n, 1) * uw if stop == "backward" else uw
    tol = float(tol)
    Au, bu = ru(A), ru(b)  # the problem stored in the working precision
    absA = arrays.xp.abs(Au)
    # ||A||_inf as NumPy sums it (np.sum's pairwise order): on the host, once; scaled where it overflows.
    normA, shift = _inf_norm(np.abs(arrays.to_host(Au)))
    normb = arrays.max_abs(bu)
    xt = None if x_true is None else arrays.float_copy(x_true, False)
    if xt is not None and tuple(xt.shape) != (n,):  # it would broadcast against x, or not compare at all
        raise ValueError(f"x_true must be a vector of {n} entries (as b), got shape {tuple(xt.shape)}")
    F = factor(Au)  # the codes factorize A stored in the working precision (gmresir3: A = single(A))
    if xt is None and stop == "all" and not F.singular:
        if n and arrays.all_finite(Au) and arrays.all_finite(bu):
            xt = arrays.asarray(extended_solution(arrays.to_host(Au), arrays.to_host(bu)))
    out = IRResult(arrays.asarray(np.full(n, np.nan)), False, "maxiter",
                   forward_error=None if xt is None else [], factors=F, stop=stop, tol=tol)
    if F.singular:
        out.status = "singular"
        return out
    weights: Optional[tuple] = None
    if balance is not None:
        K, row, col = balance(F)
        weights = (row, col)
        (normA, shift), normb = _inf_norm(np.abs(K)), arrays.max_abs(bu / row)
    x = solve_on(arrays, F, bu, _solve_precision(F, uf, u)) if initial is None else initial(F, bu)
    if not arrays.all_finite(x):
        x = arrays.zeros(bu.shape, bu.dtype)  # as gmresir3: start from 0 when x_0 overflowed
    x = ru(x)

    def forward(v: Any) -> float:
        if xt is None:
            return math.nan
        nt = arrays.max_abs(xt)
        dv = arrays.max_abs(v - xt)
        return dv / nt if nt else (0.0 if dv == 0 else math.inf)

    measures: list = []
    status = None
    for it in range(max_iter + 1):
        nbe, cbe = _errors(arrays, Au, bu, x, normA, normb, absA, weights, shift)
        out.backward_error.append(nbe)
        out.componentwise_error.append(cbe)
        fe = forward(x)
        if out.forward_error is not None:
            out.forward_error.append(fe)
        status = _verdict(it, nbe, cbe, fe, stop, tol, out, measures, n, uw)
        if status is not None or it == max_iter:
            break
        r = ru(_residual(arrays, Au, x, bu, ur))
        d, its = correction(F, Au, r)
        if its is not None:
            out.gmres_iterations.append(its)
        x_new = ru(x + d)
        if not arrays.all_finite(x_new):
            status = "diverged"
            break
        step, size = arrays.max_abs(x_new - x), arrays.max_abs(x_new)
        out.changes.append(step / size if size else (0.0 if step == 0 else math.inf))
        x = x_new
    out.x = x
    out.status = status or "maxiter"
    out.converged = out.status == "converged"
    return out


@ieee
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
    stop: str = "backward",
    scaling: Optional[str] = None,
    theta: Optional[float] = None,
    lu_method: str = "chopped",
    hardware: HardwareLike = None,
    block_size: Optional[int] = None,
) -> IRResult:
    """LU-based iterative refinement in three precisions (Carson & Higham, 2018).

    Source: the paper (SIAM J. Sci. Comput. 40(2), 2018); checked against GNU Octave runs of
    the research code ``sir3.m`` (github.com/SrikaraPranesh/Multi_precision_NLA_kernels, commit
    fb3a2d7; ``tests/data/research_ir``), which departs from the paper where :doc:`/linalg` says
    (it refines ``chop(A)`` for fp16 factors, stops at ``n eps = n 2^-52``, solves corrections with
    fp16 factors in double and scales residuals by ``||r||_inf``).  Audit: :doc:`/linalg`,
    "Research codes by name".

    Parameters
    ----------
    A, b : array_like
        Square system ``A x = b`` (double data).
    uf, u, ur : chop options or str, optional
        Factorization, working and residual precisions (default half, double,
        and ``'q'``: double-double, 106 bits; also ``'quad'``, ``'dd'``,
        ``'binary128'``); a chop format ``ur`` is simulated with :func:`matvec`.
        The double-double residuals (and backward errors) need ``A x`` in
        double's range: entries of ``A`` up to ``realmax`` are scaled by powers
        of two for Dekker's splitting, but a product ``a_ij x_j`` that
        overflows gives a non-finite residual (status ``'diverged'``).
    x_true : array_like, optional
        Exact solution, for the forward errors.
    max_iter : int, optional
        Maximum number of refinement steps, ``>= 0`` (default 10; a negative count is refused).
    tol : float, optional
        Tolerance of the stopping rule (default ``n u`` for ``stop='backward'``,
        else ``u``, the unit roundoff of the working precision).
    stop : {'backward', 'all', 'change'}, optional
        Checked on each iterate before a correction (gmresir3's order): normwise
        backward error ``<= tol`` (default); forward and both backward errors
        ``<= tol`` (gmresir3's ``cri = 1``; against ``x_true`` or an
        extended-precision solution); or the last relative change ``<= tol``,
        converged only if the backward error is at most ``n u`` (see :doc:`/linalg`).
    scaling, theta : optional
        Scaling and squeeze of ``A`` before it is rounded to ``uf`` (see
        :func:`lu`); the factors of ``mu R A S`` serve as factors of ``A``.
    lu_method : {'chopped', 'lapack'}, optional
        How the ``uf`` factors are computed (see :func:`lu`).
    hardware, block_size : optional
        The ``uf`` factors by the blocked LU whose trailing updates a GPU's
        matrix units compute (``hardware='H100'``; see :func:`lu`); the
        residuals, solves and corrections keep their precisions.

    Returns
    -------
    IRResult
        ``status`` says why it stopped.

    Notes
    -----
    ``A`` and ``b`` are rounded to ``u``; ``P A = L U`` in ``uf``; ``x_0`` solves
    with the factors in ``uf`` (in ``u`` for a scaled matrix), stored in ``u``
    (zero if not finite); then ``r_i = b - A x_i`` in ``ur``, stored in ``u``,
    scaled by the power of two ``s <= ||r_i||``; ``A d_i = r_i / s`` solved with
    the factors in ``uf``; ``x_{i+1} = fl_u(x_i + s d_i)``.

    References
    ----------
    E. Carson and N. J. Higham, Accelerating the solution of linear systems by
    iterative refinement in three precisions, SIAM J. Sci. Comput. 40(2),
    A817-A847, 2018.
    """

    arrays = arrays_for(A, b, x_true)
    if arrays is not HOST and _host_only(None, ur, x_true, scaling, theta, lu_method, stop, hardware):
        return on_host(lu_ir, arrays, A, b, uf, u, ur, x_true=x_true, max_iter=max_iter, tol=tol, stop=stop,
                       scaling=scaling, theta=theta, lu_method=lu_method, hardware=hardware, block_size=block_size)

    def correction(F: LUResult, Au: Any, r: Any) -> tuple:
        s = _residual_scale(arrays, r, power_of_two=True)
        return Rounder(u, arrays)(solve_on(arrays, F, arrays.divide(r, s), _solve_precision(F, uf, u)) * s), None

    return _refine(arrays, A, b, uf, u, ur, correction, x_true, max_iter, tol, stop,
                   lambda a: factorize(arrays, a, uf, scaling=scaling, theta=theta, method=lu_method,
                                       hardware=hardware, block_size=block_size))


def _unit_residual_correction(arrays: Arrays, u: OptionsLike, inner: Callable) -> Callable:
    """The correction of gmresir3 and cgir3: ``inner(F, Au, v)`` (``(d, iterations)``) solves
    for ``v = fl_u(r / ||r||_inf)`` and ``d`` is scaled back, ``fl_u(||r||_inf d)``."""
    ru = Rounder(u, arrays)

    def correction(F: LUResult, Au: Any, r: Any) -> tuple:
        s = _residual_scale(arrays, r, power_of_two=False)
        d, its = inner(F, Au, ru(arrays.divide(r, s)))
        return ru(d * s), its

    return correction


def _residual_scale(arrays: Arrays, r: Any, power_of_two: bool) -> float:
    """``||r||_inf``, or the power of two at or below it (exact); 1 for a zero or non-finite norm."""
    nrm = arrays.max_abs(r)
    if nrm == 0 or not math.isfinite(nrm):
        return 1.0
    return math.ldexp(1.0, math.frexp(nrm)[1] - 1) if power_of_two else nrm


def _givens_column(H: np.ndarray, cs: np.ndarray, sn: np.ndarray, g: np.ndarray, j: int,
                   ru: Rounder) -> Optional[float]:
    """GMRES's Givens step on column ``j`` of ``H`` (host scalars, rounded by ``ru``): the
    subdiagonal entry before rotation (0: a lucky breakdown), or None when the new rotation's
    norm is 0 or not finite (the caller stops with ``k = j``)."""
    for i in range(j):
        hi, hi1 = H[i, j], H[i + 1, j]
        H[i, j] = ru(ru(cs[i] * hi) + ru(sn[i] * hi1))
        H[i + 1, j] = ru(ru(-sn[i] * hi) + ru(cs[i] * hi1))
    hjj, hj1 = H[j, j], H[j + 1, j]
    rho = ru(np.sqrt(ru(ru(hjj * hjj) + ru(hj1 * hj1))))
    if rho == 0 or not np.isfinite(rho):
        return None
    cs[j], sn[j] = ru(hjj / rho), ru(hj1 / rho)
    H[j, j], H[j + 1, j] = rho, 0.0
    g[j + 1] = ru(-sn[j] * g[j])
    g[j] = ru(cs[j] * g[j])
    return hj1


class _ChoppedOps:
    """The operations of a preconditioner in a chop format ``up``: every result rounded to ``up``."""

    def __init__(self, up: OptionsLike, arrays: Arrays) -> None:
        self.round = Rounder(up, arrays)
        self.matvec = self.product = functools.partial(matmul_on, arrays, options=up)
        self.solve = functools.partial(solve_on, arrays, options=up)

    def lift(self, v: Any) -> Any:
        return v

    lower = lift

    def constant(self, c: float) -> float:
        return float(self.round(np.array([c]))[0])

    def add(self, a: Any, b: Any) -> Any:
        return self.round(a + b)

    def sub(self, a: Any, b: Any) -> Any:
        return self.round(a - b)

    def scale(self, v: Any, c: float) -> Any:
        return self.round(c * v)

    def divide(self, v: Any, c: float) -> Any:
        return self.round(v / c)

    def take(self, v: Any, index: Any) -> Any:
        return v[index]


class _ExtendedOps:
    """The same operations in an extended arithmetic (double-double or binary128), nothing rounded:
    :meth:`lift` a double vector, :meth:`lower` the result back to double."""

    def __init__(self, kind: str, arrays: Arrays) -> None:
        self.arith = arith = arithmetic(kind, arrays)
        self.lift, self.lower, self.add, self.sub = arith.from_double, arith.to_double, arith.add, arith.sub
        self.scale, self.divide, self.take = arith.mul_double, arith.div_double, arith.take
        self.matvec = functools.partial(ext_matvec, arith)  # M v for a double vector v
        self.solve = functools.partial(ext_lu_solve, arith)

    def product(self, M: np.ndarray, v: Any) -> Any:
        """``M v`` for an extended vector ``v``: the columns of ``M`` times the entries of ``v``,
        added in order ``k = 0, 1, ...``."""
        arith, rows = self.arith, M.shape[0]
        s = arith.from_double(np.zeros(rows))
        for k in range(M.shape[1]):
            s = arith.add(s, arith.mul_double(arith.take(v, np.full(rows, k)), M[:, k]))
        return s

    def constant(self, c: float) -> float:
        return c


def _operations(up: OptionsLike, arrays: Arrays) -> Any:
    """The operations in precision ``up``: a chop format, or an extended arithmetic."""
    kind = extended_kind(up)
    return _ChoppedOps(up, arrays) if kind is None else _ExtendedOps(kind, arrays)


def _factor_preconditioner(arrays: Arrays, A: Any, F: LUResult, u: OptionsLike, up: OptionsLike) -> tuple:
    """GMRES's operator for the factors ``F`` (``M = P^T L U``, scaled or not): ``(apply,
    precondition)``, ``apply(v) = M^{-1} A v`` and ``precondition(r) = M^{-1} r`` in precision
    ``up``, rounded to ``u``."""
    ru, ops = Rounder(u, arrays), _operations(up, arrays)
    return (lambda v: ru(ops.lower(ops.solve(F, ops.matvec(A, v)))),
            lambda r: ru(ops.lower(ops.solve(F, ops.lift(r)))))


def _nrm2(arrays: Arrays, v: Any, u: OptionsLike, ru: Rounder) -> Any:
    """``||v||_2`` in precision ``u`` (``ru``): ``fl(sqrt(fl(v . v)))`` (a 0-d array), or, where
    ``v . v`` overflows or underflows (the plain result Inf or 0 for finite nonzero ``v``), as MATLAB's
    ``norm`` gives it without overflow: ``fl(s fl(sqrt(w . w)))``, ``w = v / s`` with ``s`` the power of
    two at or above ``max |v|`` (exact scalings).  Every other result is the plain formula's."""
    plain = ru(arrays.xp.sqrt(matmul_on(arrays, v, v, u)))
    value = float(plain)
    if value != 0 and math.isfinite(value):
        return plain
    largest = arrays.max_abs(v)
    if largest == 0 or not math.isfinite(largest):
        return plain
    s = math.ldexp(1.0, min(math.frexp(largest)[1], 1023))  # 2**1024 is past double
    w = arrays.divide(v, s)
    return ru(ru(arrays.xp.sqrt(matmul_on(arrays, w, w, u))) * s)


def _gmres(arrays: Arrays, r: Any, u: OptionsLike, tol: float, maxit: Optional[int],
           preconditioned: tuple) -> tuple:
    """Left-preconditioned GMRES for ``M^{-1} A d = M^{-1} r`` from ``d = 0``: ``(d, iterations)``;
    every operation rounded to ``u`` but ``preconditioned = (apply, precondition)``, the maps
    ``v -> M^{-1} A v`` and ``r -> M^{-1} r`` (:func:`_factor_preconditioner`, or the augmented
    system's of :func:`ls_ir`)."""
    ru = Rounder(u, arrays)
    ru_host = Rounder(u, HOST)
    n = r.shape[0]
    maxit = n if maxit is None else int(maxit)
    apply, precondition = preconditioned

    def nrm2(v: Any) -> Any:
        return _nrm2(arrays, v, u, ru)

    z = precondition(r)
    beta_array = nrm2(z)
    beta = float(beta_array)
    if beta == 0 or not math.isfinite(beta):
        return arrays.zeros(r.shape, r.dtype), 0
    V = arrays.zeros((n, maxit + 1), r.dtype)
    H = np.zeros((maxit + 1, maxit))
    cs, sn = np.zeros(maxit), np.zeros(maxit)
    g = np.zeros(maxit + 1)
    g[0] = beta
    V = arrays.put(V, (slice(None), 0), ru(arrays.divide(z, beta_array)))
    k = 0
    for j in range(maxit):
        w = apply(V[:, j])
        for i in range(j + 1):
            h = matmul_on(arrays, w, V[:, i], u)
            H[i, j] = float(h)
            w = ru(w - ru(h * V[:, i]))
        h = nrm2(w)
        H[j + 1, j] = float(h)
        if H[j + 1, j] != 0:
            V = arrays.put(V, (slice(None), j + 1), ru(arrays.divide(w, h)))
        hj1 = _givens_column(H, cs, sn, g, j, ru_host)
        if hj1 is None:
            k = j
            break
        k = j + 1
        if abs(g[j + 1]) <= tol * beta or hj1 == 0:
            break
    if k == 0:
        return arrays.zeros(r.shape, r.dtype), 0
    # back substitution H[:k, :k] y = g[:k] in precision u, on the host
    y = solve_on(HOST, (np.eye(k), H[:k, :k], np.arange(k)), g[:k], u)
    return matmul_on(arrays, V[:, :k], arrays.asarray(y), u), k


@ieee
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
    stop: str = "backward",
    scaling: Optional[str] = None,
    theta: Optional[float] = None,
    lu_method: str = "chopped",
    factorization: str = "lu",
    perturbation: float = 0.0,
    hardware: HardwareLike = None,
    block_size: Optional[int] = None,
) -> IRResult:
    """GMRES-based iterative refinement in three precisions (Carson & Higham 2018).

    Source: ``gmresir3.m`` of github.com/SrikaraPranesh/Multi_precision_NLA_kernels (commit
    fb3a2d7) as described in the papers; checked against an independent implementation of that
    description (``tests/test_gmresir3.py``) and against GNU Octave runs of the code
    (``tests/data/research_ir``: the same steps and, from the code's iterates, the same GMRES
    iterations; gmresir3 solves for ``x_0`` with fp16 factors in double, this function in ``uf``).
    Audit: :doc:`/linalg`, "Research codes by name".

    As :func:`lu_ir`, but each correction solves ``U^{-1} L^{-1} P A d_i = U^{-1} L^{-1} P r_i``
    by GMRES in the working precision ``u``, preconditioned by the ``uf`` factors.

    Parameters
    ----------
    A, b, uf, u, ur, x_true, max_iter, tol, stop, scaling, theta, lu_method, hardware, block_size
        As for :func:`lu_ir` (``hardware=``: the LU preconditioner only; GMRES keeps ``u`` and ``up``).
    up : chop options or str, optional
        Precision in which GMRES applies ``U^{-1} L^{-1} P A`` and
        ``U^{-1} L^{-1} P`` (default: ``ur``, as gmresir3): a chop format
        (simulated), ``'q'`` (double-double) or ``'binary128'`` (mpmath; slow).
    gmres_tol : float, optional
        GMRES stops at a relative preconditioned residual norm ``<= gmres_tol`` (default 1e-6).
    gmres_maxit : int, optional
        Maximum GMRES iterations per refinement step, ``>= 0`` (default ``n``).
    factorization : {'lu', 'cholesky'}, optional
        ``'cholesky'``: the preconditioner is a Cholesky factorization in ``uf`` (``'h'`` or
        ``'b'``, with all of ``uf``'s chop options), computed as :func:`cg_ir` computes it
        (gmresir3's ``scale.type = 'p'``; Higham & Pranesh 2021); ``scaling`` is then None or
        ``'positive'`` (``'p'``), and ``theta`` and ``perturbation`` are those of :func:`cg_ir`.
    perturbation : float, optional
        That of :func:`cg_ir` (``factorization='cholesky'`` only, else refused if not 0; default 0).

    Returns
    -------
    IRResult
        With ``gmres_iterations`` filled in.

    Notes
    -----
    The residual is scaled to unit infinity norm, ``fl_u(r_i / s)``, before
    GMRES, and the correction scaled back, ``fl_u(s d)`` (gmresir3).  GMRES
    starts from zero (modified Gram-Schmidt Arnoldi, Givens rotations), every
    operation rounded to ``u`` except the preconditioned operator, applied in
    ``up``.  With scaling, ``M^{-1} v = S U^{-1} L^{-1} P (mu R v)``.

    References
    ----------
    N. J. Higham, S. Pranesh and M. Zounon, Squeezing a matrix into half
    precision, with an application to solving linear systems, SIAM J. Sci.
    Comput. 41(4), A2536-A2551, 2019.
    E. Carson and N. J. Higham, A new analysis of iterative refinement and its
    application to accurate solution of ill-conditioned sparse linear
    systems, SIAM J. Sci. Comput. 39(6), A2834-A2856, 2017.
    """
    arrays = arrays_for(A, b, x_true)
    upp = ur if up is None else up
    if factorization not in ("lu", "cholesky"):
        raise ValueError(f"factorization must be 'lu' or 'cholesky', got {factorization!r}")
    cholesky = factorization == "cholesky"
    if gmres_maxit is not None:
        _checked_count(gmres_maxit, "gmres_maxit")
    if perturbation != 0 and not cholesky:  # the LU factorization has no perturbation: refuse, not ignore
        raise ValueError(f"perturbation is for factorization='cholesky' only, got perturbation={perturbation!r} "
                         f"with factorization={factorization!r}")
    if arrays is not HOST and (cholesky or _host_only(upp, ur, x_true, scaling, theta, lu_method, stop, hardware)):
        return on_host(gmres_ir, arrays, A, b, uf, u, ur, up=up, x_true=x_true, max_iter=max_iter, tol=tol,
                       gmres_tol=gmres_tol, gmres_maxit=gmres_maxit, stop=stop, scaling=scaling, theta=theta,
                       lu_method=lu_method, factorization=factorization, perturbation=perturbation,
                       hardware=hardware, block_size=block_size)
    if cholesky and lu_method != "chopped":
        raise ValueError("factorization='cholesky' computes its factor with chol_lp (lu_method='chopped')")
    if cholesky and (hardware is not None or block_size is not None):
        raise ValueError("hardware= and block_size= choose how the LU factors are computed: not with "
                         "factorization='cholesky'")
    correction = _unit_residual_correction(arrays, u, lambda F, Au, v: _gmres(
        arrays, v, u, gmres_tol, gmres_maxit, _factor_preconditioner(arrays, Au, F, u, upp)))
    factor = ((lambda a: _cholesky_factors(a, uf, scaling, theta, perturbation)) if cholesky else
              (lambda a: factorize(arrays, a, uf, scaling=scaling, theta=theta, method=lu_method,
                                   hardware=hardware, block_size=block_size)))
    return _refine(arrays, A, b, uf, u, ur, correction, x_true, max_iter, tol, stop, factor)


def _cholesky_factors(A: np.ndarray, uf: OptionsLike, scaling: Optional[str], theta: Optional[float],
                      perturbation: float) -> LUResult:
    """The Cholesky preconditioner of gmresir3.m and cgir3.m (``scale.type = 'p'``) as LU factors.

    ``scaling='positive'``: ``A_s = mu (D A D + c u_f I)`` (:func:`spd_diag_scale`, ``mu = theta
    xmax``); else ``A_s = A + c u_f diag(A)``; then ``R = chol_lp(A_s, uf)``, every operation
    rounded with all of ``uf``'s options.  ``R^T R`` is stored
    as ``L = R^T diag(R)^{-1}`` (unit lower, one double rounding per entry) and ``U = diag(R) R``
    (exact), with the scaling ``(d, d, mu)`` undone by the solves; ``info = 1`` when ``chol_lp``
    met a pivot ``<= 0``, and (``R = 0``, as chol_lp's failed factor) for Inf or NaN entries of ``A``
    and, with scaling, a diagonal entry ``<= 0``."""
    if scaling not in (None, "none", "positive", "p"):
        raise ValueError(f"the Cholesky factorization's scaling must be None or 'positive' ('p'), "
                         f"got {scaling!r}")
    rounded = Rounder(uf, HOST)
    params = tuple(rounded.options.params or ())
    fmt = "h" if params == (11, 15) else "b" if params == (8, 127) else None
    if fmt is None:
        raise ValueError(f"the Cholesky factorization runs in fp16 or bfloat16 (chol_lp), got uf={uf!r}")
    if theta is not None:
        theta = checked_theta(theta)  # as lu's squeeze checks it
    a = np.array(A, dtype=np.float64)
    n = a.shape[0]
    finite = bool(np.all(np.isfinite(a)))
    if finite and np.any(a != a.T):
        raise ValueError("Input matrix is not symmetric")
    shift = float(perturbation) * unit_roundoff(fmt)
    scale = None
    positive = scaling in ("positive", "p")
    # Inf or NaN entries (chol_lp's symmetry test, Inf - Inf, would call them not symmetric) and, for
    # spd_diag_scale, which raises on them, diagonal entries <= 0: status 'singular', as with LU factors
    if not finite or (positive and n and np.min(np.diag(a)) <= 0):
        R, flag = np.zeros((n, n)), 1
    else:
        if positive:
            from ..formats import lookup_format

            a, d, _ = spd_diag_scale(a)
            mu = (0.1 if theta is None else float(theta)) * lookup_format(fmt).xmax
            a = mu * (a + shift * np.eye(n))
            scale = Scaling(d, d.copy(), mu)
        else:
            a = a + shift * np.diag(np.diag(a))
        R, flag = cholesky_rounded(a, rounded)
    pivots = np.diag(R)
    return LUResult(R.T / pivots[None, :], pivots[:, None] * R, np.arange(n), int(flag), scale)


def _pcg(arrays: Arrays, rhs: Any, u: OptionsLike, tol: float, maxit: Optional[int], multiply: Callable,
         precondition: Callable) -> tuple:
    """Preconditioned conjugate gradients for ``A d = rhs`` from ``d = 0``: ``(d, iterations)``.

    The loop of ``pcg_dd.m``, ``pcg_sd.m`` and ``pcg_dq.m`` (Saad, Algorithm 9.2): every
    operation rounded to ``u`` but ``multiply(v) = A v`` and ``precondition(r) = M^{-1} r``; it
    stops after the iteration at which ``||r_k||_2 / ||rhs||_2 < tol`` (the codes' ``nbe``, whose
    ``||A|| ||x_0||`` term is 0; the norms :func:`_nrm2`'s, as MATLAB's ``norm`` without overflow or
    underflow) or after ``maxit`` (default ``n``) iterations."""
    ru = Rounder(u, arrays)
    n = rhs.shape[0]
    maxit = n if maxit is None else int(maxit)

    def dot(v: Any, w: Any) -> Any:
        return matmul_on(arrays, v, w, u)

    def nrm2(v: Any) -> Any:  # MATLAB's norm does not overflow or underflow: neither may the stop test
        return _nrm2(arrays, v, u, ru)

    d = arrays.zeros(rhs.shape, rhs.dtype)
    denom = nrm2(rhs)
    if float(denom) == 0 or not math.isfinite(float(denom)):
        return d, 0
    r = rhs
    z = precondition(r)
    p = z
    its = 0
    for its in range(1, maxit + 1):
        Ap = multiply(p)
        numer = dot(r, z)
        alpha = ru(arrays.divide(numer, dot(p, Ap)))
        d = ru(d + ru(alpha * p))
        r = ru(r - ru(alpha * Ap))
        if float(ru(arrays.divide(nrm2(r), denom))) < tol:
            break
        z = precondition(r)
        p = ru(z + ru(ru(arrays.divide(dot(r, z), numer)) * p))
    return d, its


@ieee
@host_computed
def cg_ir(
    A: ArrayLike,
    b: ArrayLike,
    uf: OptionsLike = "h",
    u: OptionsLike = "d",
    ur: OptionsLike = "q",
    *,
    scaling: Optional[str] = None,
    theta: Optional[float] = None,
    perturbation: float = 0.0,
    up: OptionsLike = None,
    cg_tol: float = 1e-6,
    cg_maxit: Optional[int] = None,
    x_true: Optional[ArrayLike] = None,
    max_iter: int = 10,
    tol: Optional[float] = None,
    stop: str = "backward",
) -> IRResult:
    """CG-based iterative refinement in three precisions with a low-precision Cholesky
    preconditioner (Higham & Pranesh 2021).

    Source: ``cgir3.m`` with ``PCG/pcg_dd.m``, ``pcg_sd.m``, ``pcg_dq.m`` and ``chol_lp.m`` of
    github.com/SrikaraPranesh/Multi_precision_NLA_kernels (commit fb3a2d7, 2021-02-16); checked
    against GNU Octave runs of ``cgir3.m`` (precisions half, double, double) with ``chop.m``
    (``tests/data/research_spd_ls``).  As :func:`gmres_ir`, but the factors are ``R^T R`` in
    ``uf`` and each correction is computed by preconditioned CG.

    Parameters
    ----------
    A, b : array_like
        Symmetric positive definite system ``A x = b`` (``A`` exactly symmetric).
    uf, u, ur, up, x_true, max_iter, tol, stop
        As for :func:`gmres_ir`; ``uf`` is fp16 (``'h'``, default) or bfloat16 (``'b'``), or a
        custom format of the same ``params``, and the factorization rounds with all of its chop
        options (rounding mode, subnormals, ...), as ``chol_lp`` does with the defaults;
        ``up`` (default ``ur``, as cgir3 chooses ``pcg_dd`` or ``pcg_dq``) is the precision of
        the products ``A p`` and of the solves with ``R^T R`` inside CG.
    cg_tol : float, optional
        CG stops when ``||r_k||_2 / ||r_0||_2 < cg_tol`` (default 1e-6).
    cg_maxit : int, optional
        Maximum CG iterations per refinement step, ``>= 0`` (default ``n``, the codes').
    scaling : {None, 'positive', 'p'}, optional
        ``'positive'``: factorize ``mu (D A D + c u_f I)``, ``D = diag(a_ii)^{-1/2}``
        (:func:`spd_diag_scale`), ``mu = theta xmax`` (the codes' ``scale.flag = 1``); default:
        ``A + c u_f diag(A)``, unscaled.
    theta : float, optional
        The squeeze's fraction of ``uf``'s largest number, in (0, 1] (default 0.1; with scaling only).
    perturbation : float, optional
        The codes' ``scale.pert``, ``c`` above (default 0).

    Returns
    -------
    IRResult
        ``gmres_iterations`` holds the CG iterations of each step (``inner_solver = 'CG'``);
        ``factors`` the LU form
        ``L = R^T diag(R)^{-1}``, ``U = diag(R) R`` of the Cholesky factor (scaling in
        ``factors.scaling``); ``status`` is ``'singular'`` when ``chol_lp`` met a pivot ``<= 0``, and
        for ``A`` with Inf or NaN entries or, with scaling, a diagonal entry ``<= 0`` (``R = 0``).

    Notes
    -----
    The loop is :func:`gmres_ir`'s (its stopping rule and statuses; cgir3 stops on
    ``nbe <= n u`` as ``stop='backward'`` does): ``x_0`` solves with the factors (in ``uf``,
    in ``u`` with scaling), the residual is computed in ``ur``, scaled to unit infinity norm,
    and the correction is CG's (``x`` from 0, every operation in ``u`` except ``A p`` and
    ``M^{-1} r`` in ``up``), scaled back and added in ``u``.  cgir3 solves for ``x_0`` in double
    and rounds each triangular solve to ``uf``; with Octave's runs the iterates agree to the
    accuracy of the solution, not bit for bit (Octave's products are BLAS's).

    References
    ----------
    N. J. Higham and S. Pranesh, Exploiting lower precision arithmetic in solving symmetric
    positive definite linear systems and least squares problems, SIAM J. Sci. Comput. 43(1),
    A258-A277, 2021.
    """
    upp = ur if up is None else up
    if cg_maxit is not None:
        _checked_count(cg_maxit, "cg_maxit")

    def inner(F: LUResult, Au: Any, v: Any) -> tuple:
        ru, ops = Rounder(u, HOST), _operations(upp, HOST)
        return _pcg(HOST, v, u, cg_tol, cg_maxit, lambda p: ru(ops.lower(ops.matvec(Au, p))),
                    _factor_preconditioner(HOST, Au, F, u, upp)[1])

    out = _refine(HOST, A, b, uf, u, ur, _unit_residual_correction(HOST, u, inner), x_true, max_iter, tol, stop,
                  lambda a: _cholesky_factors(a, uf, scaling, theta, perturbation))
    out.inner_solver = "CG"
    return out


@dataclass(frozen=True, eq=False)
class _QRFactors:
    """The ``uf`` QR factors of a least-squares problem: ``Q`` (``m x n``), ``R`` and ``alpha``."""

    Q: np.ndarray
    R: np.ndarray
    alpha: float

    @property
    def singular(self) -> bool:
        return not (np.all(np.isfinite(self.Q)) and np.all(np.isfinite(self.R)) and np.all(np.diag(self.R) != 0)
                    and math.isfinite(self.alpha) and self.alpha > 0)


def _qr_factors(A: np.ndarray, uf: OptionsLike, theta: float) -> _QRFactors:
    """gmreslsir3.m's QR factors: fp16 by :func:`house_qr_lp` of ``chop(mu A D)``, ``D =
    diag(1 ./ ||a_j||_2)``, ``mu = theta xmax``, unscaled ``R = (1/mu) R_s diag(1 ./ d)``, every
    operation rounded with all of ``uf``'s options; single or double by LAPACK (options it would
    ignore refused); ``alpha = 2^(-1/2) sigma_min(R)``."""
    rounded = Rounder(uf, HOST)
    params = tuple(rounded.options.params or ())
    if params == (11, 15):
        column_scale = 1.0 / safe_two_norm(A, axis=0)
        mu = float(theta) * 65504.0
        As = np.array(rounded((mu * A) * column_scale[None, :]), dtype=np.float64, order="C")
        Q, R = house_qr_rounded(As, 0, rounded)
        R = ((1.0 / mu) * R) * (1.0 / column_scale)[None, :]
    elif params in ((24, 127), (53, 1023)):
        check_lapack_rounding(rounded.options, "ls_ir's single and double QR factors", f"uf={uf!r}",
                              "; use fp16 for other rounding options")
        Q, R = (v.astype(np.float64) for v in np.linalg.qr(A.astype(np.float32 if params[0] == 24 else np.float64)))
    else:
        raise ValueError(f"ls_ir's QR factorization runs in fp16, single or double, got uf={uf!r}")
    if not (np.all(np.isfinite(Q)) and np.all(np.isfinite(R))):
        return _QRFactors(Q, R, math.nan)
    return _QRFactors(Q, R, 2.0**-0.5 * float(np.min(np.linalg.svd(R, compute_uv=False))))


def _augmented_preconditioner(A: np.ndarray, F: _QRFactors, u: OptionsLike, up: OptionsLike) -> tuple:
    """``(apply, precondition)`` of the scaled augmented system ``K = [alpha I, A; A^T, 0]`` with
    ``M = [alpha I, Q R; R^T Q^T, 0]``: ``MA_dq`` and ``Mb_dq`` of ``GMRES/lsqgmres_dq.m``
    (``ptype = 1``), every operation in ``up`` (a chop format, or an extended arithmetic), the
    results rounded to ``u``."""
    ru, ops = Rounder(u, HOST), _operations(up, HOST)
    Q, R = F.Q, F.R
    m, n = Q.shape
    eye, order = np.eye(n), np.arange(n)
    reverse = order[::-1]
    upper, lower_reversed = LUResult(eye, R, order), LUResult(eye, R.T[::-1, ::-1].copy(), order)
    a = ops.constant(F.alpha)

    def solve_rt(c: Any) -> Any:  # R' \ c: J R' J is upper triangular
        return ops.take(ops.solve(lower_reversed, ops.take(c, reverse)), reverse)

    def project(v: Any, qtv: Any) -> Any:  # v - Q (Q' v), given Q' v
        return ops.sub(v, ops.product(Q, qtv))

    def apply(v: Any) -> Any:
        r, s = v[:m], v[m:]
        tv1, tv2 = ops.matvec(A, s), ops.matvec(A.T, r)
        t1 = ops.add(project(ops.lift(r), ops.matvec(Q.T, r)), ops.product(Q, solve_rt(tv2)))
        t2 = ops.divide(project(tv1, ops.product(Q.T, tv1)), a)
        t3 = ops.scale(ops.sub(ops.solve(upper, ops.matvec(Q.T, r)), ops.solve(upper, solve_rt(tv2))), a)
        t4 = ops.solve(upper, ops.product(Q.T, tv1))
        return ru(np.concatenate([ops.lower(ops.add(t1, t2)), ops.lower(ops.add(t3, t4))]))

    def precondition(v: Any) -> Any:
        r, s = v[:m], v[m:]
        t1 = ops.divide(project(ops.lift(r), ops.matvec(Q.T, r)), a)
        t2 = ops.product(Q, solve_rt(ops.lift(s)))
        t3 = ops.solve(upper, ops.matvec(Q.T, r))
        t4 = ops.scale(ops.solve(upper, solve_rt(ops.lift(s))), -a)
        return ru(np.concatenate([ops.lower(ops.add(t1, t2)), ops.lower(ops.add(t3, t4))]))

    return apply, precondition


@dataclass(eq=False)
class LSIRResult(IRResult):
    """Outcome of :func:`ls_ir`: an :class:`IRResult` of the augmented system
    ``[I, A; A^T, 0] [r; x] = [b; 0]`` (its changes, forward and componentwise errors and GMRES
    iterations are of the stacked iterates ``[r_i; x_i]``; the normwise backward errors of
    ``[alpha I, A; A^T, 0] [r_i / alpha; x_i] = [b; 0]``), with ``x`` the least-squares solution and these fields.

    Attributes
    ----------
    r : ndarray
        The residual ``b - A x`` as refined alongside ``x``.
    Q, R : ndarray
        The ``uf`` QR factors (``Q`` is ``m x n``, ``R`` unscaled).
    alpha : float
        The scaling of the augmented system, ``2^(-1/2) sigma_min(R)``.
    """

    r: Optional[np.ndarray] = None
    Q: Optional[np.ndarray] = None
    R: Optional[np.ndarray] = None
    alpha: float = math.nan


@ieee
@host_computed
def ls_ir(
    A: ArrayLike,
    b: ArrayLike,
    uf: OptionsLike = "h",
    u: OptionsLike = "d",
    ur: OptionsLike = "q",
    *,
    up: OptionsLike = None,
    max_iter: int = 10,
    tol: Optional[float] = None,
    gmres_tol: float = 1e-6,
    gmres_maxit: Optional[int] = None,
    stop: str = "backward",
    theta: float = 0.1,
) -> LSIRResult:
    """Least-squares refinement in three precisions: GMRES-LSIR (Carson, Higham & Pranesh 2020).

    Source: ``gmreslsir3.m`` with ``GMRES/lsqgmres_dq.m`` and ``house_qr_lp.m`` of
    github.com/SrikaraPranesh/Multi_precision_NLA_kernels (commit fb3a2d7, 2021-02-16); checked
    against GNU Octave runs of ``gmreslsir3.m`` (precisions half, double, double) with
    ``chop.m`` (``tests/data/research_spd_ls``).

    Solves ``min ||b - A x||_2`` for a full-rank ``A`` (``m >= n``) by refining ``x`` and
    ``r = b - A x`` together on the augmented system ``[I, A; A^T, 0] [r; x] = [b; 0]``, each
    correction by GMRES on the scaled system ``[alpha I, A; A^T, 0]``, left-preconditioned by
    ``M = [alpha I, Q R; R^T Q^T, 0]`` built from the QR factors computed in ``uf``.

    Parameters
    ----------
    A, b : array_like
        ``m x n`` matrix (``m >= n``, full rank) and a vector of ``m`` entries (double data).
    uf : chop options or str, optional
        The QR factorization's precision: fp16 (``'h'``, default: :func:`house_qr_lp` of the
        scaled and squeezed matrix, rounding with all of ``uf``'s chop options), single or double
        (LAPACK: options it would ignore -- a rounding mode other than 1, ``subnormal=0``, ``flip``,
        ``explim=0`` -- are refused with a ValueError).
    u, ur : chop options or str, optional
        Working and residual precisions, as for :func:`lu_ir`.
    up : chop options or str, optional
        Precision in which GMRES applies the preconditioned operator (default ``ur``, as
        gmreslsir3 does in quad with ``precr = 4``): a chop format, ``'q'`` (double-double) or
        ``'binary128'`` (mpmath; slow).
    max_iter, tol, stop, gmres_tol, gmres_maxit
        As for :func:`gmres_ir`, on the augmented system of size ``m + n`` (default
        ``tol = (m + n) u``; ``stop='all'`` measures the forward error against its
        extended-precision solution; gmreslsir3 stops when the forward errors of ``x`` and
        ``r`` are both at most ``u``).  The normwise backward error is that of the scaled system
        ``[alpha I, A; A^T, 0] [r / alpha; x] = [b; 0]`` (GMRES's), invariant, as the factors are,
        under scaling ``A`` by a power of two; that of ``[I, A; A^T, 0]`` is not (for ``||A|| << 1``
        its identity block dominates, and it called inaccurate iterates converged).
    theta : float, optional
        The squeeze ``mu = theta xmax`` of the fp16 factorization, in (0, 1] (default 0.1, the code's).

    Returns
    -------
    LSIRResult
        ``x``, ``r``, the statuses of :class:`IRResult` and the factors.

    Warns
    -----
    SingularMatrixWarning
        When ``A`` is rank deficient to double precision (``sigma_min <= m eps sigma_max``): the
        minimiser is not unique, and a ``'converged'`` status then says only that the backward
        error of ``[r; x]`` met the rule (the research code does not check the rank).

    Notes
    -----
    As gmreslsir3 (``ptype = 1``): ``A`` and ``b`` are stored in ``u`` (and ``A`` is factorized so);
    ``x_0 = R^{-1} (Q^T b)`` and ``r_0 = b - A x_0`` in ``u``
    (``x_0 = 0``, ``r_0 = b`` when not finite); step ``i``: ``f = b - r_i - A x_i`` and
    ``g = -A^T r_i`` in ``ur``, stored in ``u``; GMRES from 0 on ``[alpha f; g] / s``, ``s``
    its infinity norm; the correction ``d`` scaled back, ``r_{i+1} = r_i + d_r`` and
    ``x_{i+1} = x_i + (1/alpha) d_x`` in ``u``.  The preconditioned operator is applied as the
    code's ``MA_dq``, ``Mb_dq``.  GMRES is :func:`gmres_ir`'s (Givens rotations, no restart).

    References
    ----------
    E. Carson, N. J. Higham and S. Pranesh, Three-precision GMRES-based iterative refinement
    for least squares problems, SIAM J. Sci. Comput. 42(6), A4063-A4083, 2020.
    """
    a, rhs = (np.array(v, dtype=np.float64) for v in float_operands(HOST, A, b))
    if a.ndim != 2 or a.shape[0] < a.shape[1] or a.shape[1] == 0 or rhs.shape != (a.shape[0],):
        raise ValueError("need an m x n matrix A with m >= n >= 1 and a vector b of m entries")
    theta = checked_theta(theta)  # as cg_ir's and squeeze's
    if gmres_maxit is not None:
        _checked_count(gmres_maxit, "gmres_maxit")
    upp = ur if up is None else up
    m, n = a.shape
    singular_values = np.linalg.svd(a, compute_uv=False) if np.all(np.isfinite(a)) else None
    if singular_values is not None and singular_values[-1] <= m * np.finfo(np.float64).eps * singular_values[0]:
        # gmreslsir3 assumes full rank and does not check; a converged status here speaks of the
        # backward error only, and x is one minimiser among many: say so rather than stay silent.
        warn_at_caller(f"ls_ir: A is rank deficient to double precision (sigma_min / sigma_max = "
                       f"{singular_values[-1] / singular_values[0]:.1e}): the least-squares minimiser "
                       "is not unique; x is one of them.")
    ru = Rounder(u, HOST)
    Au = ru(a)
    augmented = np.block([[np.eye(m), a], [a.T, np.zeros((n, n))]])

    def initial(F: _QRFactors, bu: np.ndarray) -> np.ndarray:
        bw = bu[:m]
        x0 = solve_on(HOST, (np.eye(n), F.R, np.arange(n)), ru(matmul_on(HOST, F.Q.T, bw, u)), u)
        r0 = ru(bw - matmul_on(HOST, Au, x0, u))
        if not (np.all(np.isfinite(x0)) and np.all(np.isfinite(r0))):
            return np.concatenate([bw, np.zeros(n)])
        return np.concatenate([r0, x0])

    unit_correction = _unit_residual_correction(HOST, u, lambda F, Ku, v: _gmres(
        HOST, v, u, gmres_tol, gmres_maxit, _augmented_preconditioner(Au, F, u, upp)))

    def correction(F: _QRFactors, Ku: np.ndarray, res: np.ndarray) -> tuple:
        d, its = unit_correction(F, Ku, np.concatenate([ru(F.alpha * res[:m]), res[m:]]))
        return np.concatenate([d[:m], ru(ru(np.array(1.0 / F.alpha)) * d[m:])]), its

    def balance(F: _QRFactors) -> tuple:
        # [alpha I, A; A^T, 0] [r / alpha; x] = [b; 0], the system GMRES solves: its normwise backward error is
        # invariant under A -> 2^e A (alpha, x scale with A), where that of [I, A; A^T, 0] is not
        scaled = np.block([[F.alpha * np.eye(m), Au], [Au.T, np.zeros((n, n))]])
        return scaled, np.concatenate([np.ones(m), np.full(n, F.alpha)]), np.concatenate([np.full(m, F.alpha),
                                                                                          np.ones(n)])

    out = _refine(HOST, augmented, np.concatenate([rhs, np.zeros(n)]), uf, u, ur, correction, None, max_iter,
                  tol, stop, lambda _: _qr_factors(Au, uf, theta), initial, balance)
    F: Any = out.factors
    fields = {f.name: getattr(out, f.name) for f in dataclasses.fields(IRResult)}
    fields.update(x=out.x[m:], factors=None)
    return LSIRResult(**fields, r=out.x[:m], Q=F.Q, R=F.R, alpha=F.alpha)
