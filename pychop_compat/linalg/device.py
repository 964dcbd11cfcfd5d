"""Chopped linear algebra on the arrays' own device: torch (CPU, CUDA), CuPy and JAX.

The public functions of :mod:`pychop_compat.linalg` send torch tensors, CuPy
arrays and JAX arrays here (see :func:`on_device`).  Each kernel below is
written once against an :class:`~pychop_compat.linalg.namespace.ArrayNamespace`
and runs with the input library's own operations on the input's device; every
rounding is a call of :class:`~pychop_compat.Chop` on an array of that library,
so it runs on that library's engine (torch, CuPy or JAX).  No array data goes
to the host inside the loops; only single numbers that steer them (a pivot
index, a norm, a GMRES coefficient) are read back.

Same sequence of chop calls as the NumPy path.  Every kernel makes the chop
calls of its NumPy twin (``linalg/kernels.py``, ``linalg/lu.py``,
``linalg/refinement.py``), in
the same order, on arrays of the same shapes holding the same values, and the
arithmetic between them is the same IEEE operation (``+``, ``-``, ``*``,
``/``, ``sqrt``, each rounded once to double or single).  So deterministic
rounding (modes 1-4) gives the NumPy path's results bit for bit.  Stochastic
rounding and bit flips follow the randomness contract: torch CPU tensors and
concrete JAX arrays draw from MATLAB's stream in chop.m's order, exactly the
numbers the NumPy path draws (same results); GPU arrays (torch CUDA, CuPy)
draw from the counter-based generator seeded by ``seed_device``, so their
results differ from the NumPy path's (GMRES's Givens rotations are host
scalars in both paths and, with a stochastic working precision, draw from
MATLAB's stream there too).

Why the kernels look like this (speed).  Every step of a loop is one
whole-array operation followed by one chop call over a whole panel: a rank-1
update of all ``m x p`` partial sums of ``matmul`` per inner index ``k``, the
whole trailing block of ``lu`` per pivot.  The number of Python-level steps
is ``n`` (not ``n**3``), each step is a few elementwise kernels over ``m p``
elements, so a GPU runs them at memory bandwidth.  This is as fast as
rounding after every operation can be with elementwise library calls; it is
bandwidth-bound (each of the ``n`` steps reads and writes the ``m x p`` sums
a few times), where a plain matmul is compute-bound.

What stays on the host.  Only what the NumPy path computes with LAPACK or
mpmath: ``lu(method='lapack')``, ``scaling``/``theta`` (the scaling factors;
the chopped factorization of the scaled matrix then runs on the device only
when no scaling is asked for), the binary128 residual and preconditioner
(``'binary128'``), and the reference solution of ``stop='all'`` without
``x_true``.  Those calls take the previous route: the NumPy code on a host
copy, results given back on the device.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, Optional

import numpy as np

from ._common import (_DOUBLE_NAMES, _chop_object, _givens_column, _is_extended, _matmul_matrices,
                      _refinement_verdict, _two_prod, _unit_roundoff, keep_array_type)
from .namespace import ArrayNamespace

__all__ = ["on_device", "device_library", "DEVICE_LIBRARIES", "DEVICE_TERM_BUDGET", "JAX_JIT_STEPS"]

#: Products the device pairwise and blocked paths hold at once with deterministic rounding
#: (columns of ``C`` in groups; 32 MiB of doubles).  Any grouping gives the same bits.
DEVICE_TERM_BUDGET = 1 << 22

#: Array libraries whose arrays linalg computes on their own device.
DEVICE_LIBRARIES = ("torch", "cupy", "jax")


# ---------------------------------------------------------------------------
# Dispatch
# ---------------------------------------------------------------------------


def _members(value: Any) -> list:
    import dataclasses

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [getattr(value, f.name) for f in dataclasses.fields(value)]
    if isinstance(value, tuple):
        return list(value)
    return [value]


def device_library(values: list) -> tuple:
    """``(library, like)``: the device library among the arguments (``'numpy'`` when none)
    and its first array; arguments of two device libraries are refused."""
    from ..engines import array_library

    found = [(array_library(m), m) for v in values for m in _members(v)]
    found = [(lib, m) for lib, m in found if lib in DEVICE_LIBRARIES]
    libraries = {lib for lib, _ in found}
    if len(libraries) > 1:
        raise TypeError(f"linalg: arguments mix {' and '.join(sorted(libraries))} arrays; "
                        "convert them to one library.")
    return found[0] if found else ("numpy", None)


def on_device(func: Callable, device_func: Callable, host_only: Callable[..., bool]) -> Callable:
    """``func`` (a NumPy linalg function) extended to torch, CuPy and JAX arrays.

    Arguments of one device library run ``device_func(xp, *args, **kwargs)``
    on their device; when ``host_only(*args, **kwargs)`` says the call needs a
    host-only part (LAPACK, mpmath, scaling), the NumPy code runs on a host
    copy and the results go back to the device (as before this module).
    """
    host_route = keep_array_type(func)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        library, like = device_library(list(args) + list(kwargs.values()))
        if library == "numpy":
            return func(*args, **kwargs)
        if host_only(*args, **kwargs):
            return host_route(*args, **kwargs)
        with np.errstate(all="ignore"):
            return device_func(ArrayNamespace(library, like), *args, **kwargs)

    return wrapper


# ---------------------------------------------------------------------------
# Rounders: chop on the array's own engine
# ---------------------------------------------------------------------------


def _rounder(options: Any, xp: ArrayNamespace) -> Callable:
    """chop with ``options`` on arrays of ``xp``'s library (the NumPy path's ``_make_rounder``:
    double format with subnormals and no flips leaves double data unchanged)."""
    ch = _chop_object(options)
    o = ch.options
    identity = o.format in _DOUBLE_NAMES and o.subnormal != 0 and not o.flip
    double = xp.dtype("float64") if xp.library != "jax" or _x64() else None

    def rnd(x):
        if identity and x.dtype == double:
            return x
        return ch(x)

    rnd.identity_for_double = identity
    rnd.options = o
    return rnd


def _x64() -> bool:
    import jax

    return bool(jax.config.read("jax_enable_x64"))


def _deterministic(rounder) -> bool:
    if rounder is None:
        return True
    return int(rounder.options.round) <= 4 and not rounder.options.flip


def _float_operands(xp: ArrayNamespace, *arrays: Any) -> list:
    """Copies of the arrays on the device, in single when all are single, else double;
    complex input refused with chop's error."""
    arrays = [xp.asarray(a) for a in arrays]
    for a in arrays:
        if "complex" in str(a.dtype):
            raise ValueError("Chop requires a real input array.")
    single = all(a.dtype == xp.xp.float32 for a in arrays)
    return [xp.float_copy(a, single) for a in arrays]


# ---------------------------------------------------------------------------
# matmul, matvec, dot
# ---------------------------------------------------------------------------


#: Inner dimension from which JAX's recursive ``matmul`` compiles its step with ``jax.jit``
#: (deterministic rounding): one compilation per call, then one fused kernel per step.
JAX_JIT_STEPS = 256


def _recursive_step(xp, rprod, rsum, n):
    """``s, a, b -> fl(s + fl(a b))`` (or ``fl(s + a b)`` without ``rprod``), compiled with
    ``jax.jit`` for JAX when worth it: the multiply, the roundings and the add become one
    pass over the partial sums.  The product goes through chop's integer rounding before
    the add, so XLA cannot fuse them into an FMA; the bits are the eager ones."""

    def step(s, a, b):
        t = a * b
        if rprod is not None:
            t = rprod(t)
        return rsum(s + t)

    # Only with a rounded product: XLA would contract an unrounded ``s + a * b`` into an FMA
    # (measured: float32 sums changed), which is not the NumPy path's two roundings.
    if (xp.library == "jax" and n >= JAX_JIT_STEPS and rprod is not None and _deterministic(rprod)
            and _deterministic(rsum)):
        import jax

        return jax.jit(step)
    return step


def _sum_recursive(xp, A, B, rprod, rsum, block_size):
    s = A[:, :1] * B[:1, :]
    s = rprod(s) if rprod is not None else rsum(s)
    step = _recursive_step(xp, rprod, rsum, A.shape[1])
    for k in range(1, A.shape[1]):
        s = step(s, A[:, k : k + 1], B[k : k + 1, :])
    return s


def _outer_terms(A, B, start=0, step=1):
    """Products ``A[:, k] * B[k, :]`` for ``k = start, start + step, ...``, stacked (count, m, p)."""
    return A[:, start::step].T[:, :, None] * B[start::step, :][:, None, :]


def _sum_pairwise(xp, A, B, rprod, rsum, block_size):
    n = A.shape[1]
    terms = _outer_terms(A, B)
    terms = rprod(terms) if rprod is not None else (rsum(terms) if n == 1 else terms)
    while terms.shape[0] > 1:
        h = terms.shape[0] // 2
        pairs = rsum(terms[0 : 2 * h : 2] + terms[1 : 2 * h : 2])
        terms = xp.concat([pairs, terms[2 * h :]]) if terms.shape[0] % 2 else pairs
    return terms[0]


def _sum_blocked(xp, A, B, rprod, rsum, block_size):
    n = A.shape[1]
    b = int(block_size)
    nblocks = -(-n // b)
    S = None
    for j in range(min(b, n)):
        cnt = -(-(n - j) // b)  # blocks that have a j-th element: a prefix
        t = _outer_terms(A, B, j, b)
        if j == 0:
            S = rprod(t) if rprod is not None else rsum(t)
        else:
            if rprod is not None:
                t = rprod(t)
            S = xp.put(S, slice(0, cnt), rsum(S[:cnt] + t))
    s = S[0]
    for i in range(1, nblocks):
        s = rsum(s + S[i])
    return s


_SUMMERS = {"recursive": _sum_recursive, "fma": _sum_recursive, "pairwise": _sum_pairwise,
            "blocked": _sum_blocked}


def _product(xp, method, A, B, rprod, rsum, block_size):
    """``A @ B`` by ``method``, in the NumPy path's calls (one column of C at a time when
    the rounding draws random numbers, as there)."""
    summer = _SUMMERS[method]
    (m, n), p = A.shape, B.shape[1]
    if method in ("recursive", "fma") and xp.library == "torch":
        C = _fused_product(xp, method, A, B, rprod, rsum, block_size)
        if C is not None:
            return C
    if method in ("recursive", "fma") or p == 1:
        return summer(xp, A, B, rprod, rsum, block_size)
    if _deterministic(rprod) and _deterministic(rsum):
        width = max(1, DEVICE_TERM_BUDGET // max(1, n * m))
    else:
        width = 1
    if width >= p:
        return summer(xp, A, B, rprod, rsum, block_size)
    C = xp.zeros((m, p), A.dtype)
    for j in range(0, p, width):
        C = xp.put(C, (slice(None), slice(j, j + width)), summer(xp, A, B[:, j:j + width], rprod, rsum,
                                                                  block_size))
    return C


def _fused_product(xp, method, A, B, rprod, rsum, block_size):
    """The recursive/fma sequence by the fused Triton kernel of
    :mod:`~pychop_compat.kernels.triton_matmul` (CUDA torch tensors, Triton installed,
    deterministic chop.m rounding); tiles that met irregular values (chop's subnormal range,
    overflow, Inf, NaN) are recomputed by the generic path.  None where it does not apply."""
    from ..kernels import triton_matmul

    if not triton_matmul.wanted(A, B):
        return None
    from ..matlab.options import resolve

    x_class = "single" if str(A.dtype).rpartition(".")[2] == "float32" else "double"
    resolved = lambda options: resolve(options, None, x_class).spec  # noqa: E731
    sum_spec = triton_matmul.supported_spec(rsum, resolved)
    product_spec = triton_matmul.supported_spec(rprod, resolved) if rprod is not None else None
    if sum_spec is None or (rprod is not None and product_spec is None):
        return None
    C, tiles = triton_matmul.fused_matmul(A, B, product_spec, sum_spec)
    for rows, cols in tiles:
        C[rows, cols] = _SUMMERS[method](xp, A[rows], B[:, cols], rprod, rsum, block_size)
    return C


def matmul(xp: ArrayNamespace, A: Any, B: Any, options: Any = None, *, method: str = "recursive",
           accumulate: Any = None, block_size: int = 32) -> Any:
    """:func:`pychop_compat.linalg.matmul` on ``xp``'s device (same chop calls, same results)."""
    A2, B2, a_vec, b_vec = _matmul_matrices(*_float_operands(xp, A, B), method, block_size)
    rin = _rounder(options, xp)
    if accumulate is None:
        rsum = rin
        rprod = None if method == "fma" else rin
    else:
        rsum = _rounder(accumulate, xp)
        rprod = None
    A2 = rin(A2)
    B2 = rin(B2)
    (m, n), p = A2.shape, B2.shape[1]
    if n == 0:
        C = xp.zeros((m, p), A2.dtype)
    else:
        C = _product(xp, method, A2, B2, rprod, rsum, block_size)
    if a_vec:
        C = C[0]
    if b_vec:
        C = C[..., 0]
    return C


def matvec(xp: ArrayNamespace, A: Any, x: Any, options: Any = None, **kwargs: Any) -> Any:
    """:func:`pychop_compat.linalg.matvec` on ``xp``'s device."""
    if xp.asarray(x).ndim != 1:
        raise ValueError("x must be 1-D")
    return matmul(xp, A, x, options, **kwargs)


def dot(xp: ArrayNamespace, x: Any, y: Any, options: Any = None, **kwargs: Any) -> Any:
    """:func:`pychop_compat.linalg.dot` on ``xp``'s device: a 0-d array of the library."""
    if xp.asarray(x).ndim != 1 or xp.asarray(y).ndim != 1:
        raise ValueError("x and y must be 1-D")
    return matmul(xp, x, y, options, **kwargs)


# ---------------------------------------------------------------------------
# lu, solve
# ---------------------------------------------------------------------------


def lu_host_only(A: Any, options: Any = None, *, scaling: Optional[str] = None, theta: Optional[float] = None,
                 method: str = "chopped") -> bool:
    """Whether :func:`lu` takes the host route (LAPACK, or scaling factors)."""
    return method != "chopped" or scaling not in (None, "none") or theta is not None


def lu(xp: ArrayNamespace, A: Any, options: Any = None, *, scaling: Optional[str] = None,
       theta: Optional[float] = None, method: str = "chopped") -> Any:
    """:func:`pychop_compat.linalg.lu` (chopped, unscaled) on ``xp``'s device."""
    from .lu import _warn_if_singular

    (a,) = _float_operands(xp, A)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError("lu needs a square matrix")
    F = _chopped_lu(xp, a, options)
    _warn_if_singular(F, "lu")
    return F


def _chopped_lu(xp: ArrayNamespace, a: Any, options: Any) -> Any:
    from .lu import LUResult

    r = _rounder(options, xp)
    a = r(a)  # a new array (or, for double data in 'd', the copy made above)
    if xp.static_shapes and _deterministic(r):
        return _chopped_lu_static(xp, a, r)
    n = a.shape[0]
    perm = xp.arange(n)
    info = 0
    for k in range(n):
        piv = k + xp.index(xp.argmax(xp.abs(a[k:, k])))
        if piv != k:
            a = xp.swap_rows(a, k, piv)
            perm = xp.swap_rows(perm, k, piv)
        pivot = a[k, k]
        if xp.scalar(pivot) == 0:
            info = info or k + 1
            continue
        if k == n - 1:
            break
        l = r(xp.divide(a[k + 1 :, k], pivot))
        a = xp.put(a, (slice(k + 1, None), k), l)
        a = xp.put(a, (slice(k + 1, None), slice(k + 1, None)),
                   r(a[k + 1 :, k + 1 :] - r(l[:, None] * a[k, k + 1 :][None, :])))
    eye = xp.zeros((n, n), a.dtype)
    idx = xp.arange(n)
    eye = xp.put(eye, (idx, idx), 1.0)
    L = xp.tril(a, -1) + eye
    return LUResult(L, xp.triu(a), perm, info)


def _chopped_lu_static(xp: ArrayNamespace, a: Any, r: Callable) -> Any:
    """:func:`_chopped_lu` with arrays of fixed shapes (for JAX: one compilation per ``n``,
    not one per step).  Each step rounds the whole column and the whole matrix and keeps
    the entries of the trailing block: deterministic rounding is elementwise, so these
    entries get exactly the roundings of the sliced version (same bits)."""
    from .lu import LUResult

    n = a.shape[0]
    rows = xp.arange(n)
    perm = xp.arange(n)
    info = 0
    for k in range(n):
        col = xp.where(rows >= k, xp.abs(a[:, k]), -1.0)  # NaN stays NaN: argmax finds it first, as NumPy
        piv = xp.index(xp.argmax(col))
        if piv != k:
            a = xp.swap_rows(a, k, piv)
            perm = xp.swap_rows(perm, k, piv)
        pivot = a[k, k]
        if xp.scalar(pivot) == 0:
            info = info or k + 1
            continue
        if k == n - 1:
            break
        below = rows > k
        l = xp.where(below, r(xp.divide(a[:, k], pivot)), 0.0)
        a = xp.where(below[:, None] & (rows == k)[None, :], l[:, None], a)
        update = r(a - r(l[:, None] * a[k, :][None, :]))
        a = xp.where(below[:, None] & below[None, :], update, a)
    eye = xp.where(rows[:, None] == rows[None, :], 1.0, 0.0).astype(a.dtype)
    return LUResult(xp.tril(a, -1) + eye, xp.triu(a), perm, info)


def solve_host_only(A: Any, b: Any = None, options: Any = None) -> bool:
    """Whether :func:`solve` takes the host route: factors of a scaled matrix (their
    scaling vectors live on the host)."""
    from .lu import LUResult

    return isinstance(A, LUResult) and A.scaling is not None


def solve(xp: ArrayNamespace, A: Any, b: Any, options: Any = None) -> Any:
    """:func:`pychop_compat.linalg.solve` on ``xp``'s device."""
    from .lu import LUResult, _warn_if_singular

    r = _rounder(options, xp)
    if isinstance(A, (LUResult, tuple)):
        F = _device_factors(xp, A)
        _warn_if_singular(LUResult(F.L, F.U, F.perm, _zero_pivot(xp, F.U)), "solve")
    else:
        F = lu(xp, A, options)
    L0, U0, (bb,) = F.L, F.U, _float_operands(xp, b)
    single = all(M.dtype == xp.xp.float32 for M in (L0, U0, bb))
    if not single and bb.dtype != xp.xp.float64:
        bb = xp.float_copy(bb, False)
    vec = bb.ndim == 1
    c = bb[:, None] if vec else bb
    n = F.perm.shape[0]
    if c.shape[0] != n:
        raise ValueError("b has the wrong number of rows")
    L = r(xp.float_copy(L0, single))
    U = r(xp.float_copy(U0, single))
    c = r(c[F.perm])  # a new array: indexing with an array copies
    if xp.static_shapes and _deterministic(r):
        c = _substitute_static(xp, L, U, c, r)
        return c[:, 0] if vec else c
    for j in range(n - 1):
        c = xp.put(c, slice(j + 1, None), r(c[j + 1 :] - r(L[j + 1 :, j : j + 1] * c[j : j + 1])))
    for j in range(n - 1, -1, -1):
        c = xp.put(c, j, r(xp.divide(c[j], U[j, j])))
        if j:
            c = xp.put(c, slice(0, j), r(c[:j] - r(U[:j, j : j + 1] * c[j : j + 1])))
    return c[:, 0] if vec else c


def _substitute_static(xp: ArrayNamespace, L: Any, U: Any, c: Any, r: Callable) -> Any:
    """The substitutions of :func:`solve` on arrays of fixed shapes (for JAX): whole columns
    rounded, the rows that the sliced version updates kept (same bits for deterministic rounding)."""
    n = c.shape[0]
    rows = xp.arange(n)[:, None]
    for j in range(n - 1):
        c = xp.where(rows > j, r(c - r(L[:, j : j + 1] * c[j : j + 1])), c)
    for j in range(n - 1, -1, -1):
        c = xp.where(rows == j, r(xp.divide(c[j : j + 1], U[j : j + 1, j : j + 1])), c)
        if j:
            c = xp.where(rows < j, r(c - r(U[:, j : j + 1] * c[j : j + 1])), c)
    return c


def _device_factors(xp: ArrayNamespace, F: Any) -> Any:
    from .lu import LUResult

    if isinstance(F, LUResult):
        return LUResult(xp.asarray(F.L), xp.asarray(F.U), xp.asarray(F.perm), F.info, F.scaling)
    L, U, p = F
    _float_operands(xp, L, U)  # refuses complex factors with chop's error
    p = xp.asarray(p)
    if p.ndim == 2:  # MATLAB-style permutation matrix, P A = L U
        p = xp.argmax(p, axis=1)
    return LUResult(xp.asarray(L), xp.asarray(U), p)


def _zero_pivot(xp: ArrayNamespace, U: Any) -> int:
    d = xp.to_numpy(U.diagonal() if xp.library != "jax" else xp.xp.diagonal(U))
    zero = np.flatnonzero(d == 0)
    return int(zero[0]) + 1 if zero.size else 0


# ---------------------------------------------------------------------------
# Double-double arithmetic on the device (residuals and GMRES's operator in 'q')
# ---------------------------------------------------------------------------


def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _quick_two_sum(a, b):
    s = a + b
    return s, b - (s - a)


def _dd_add(a, b):
    s, e = _two_sum(a[0], b[0])
    t, f = _two_sum(a[1], b[1])
    s, e = _quick_two_sum(s, e + t)
    return _quick_two_sum(s, e + f)


def _dd_sub(a, b):
    return _dd_add(a, (-b[0], -b[1]))


def _dd_mul_double(a, c):
    p, e = _two_prod(a[0], c)
    return _quick_two_sum(p, e + a[1] * c)


def _dd_div_double(xp, a, c):
    q1 = xp.divide(a[0], c)
    p, pe = _two_prod(q1, c)
    s, e = _two_sum(a[0], -p)
    q2 = xp.divide(s + (e + a[1] - pe), c)
    return _quick_two_sum(q1, q2)


def _residual_dd(xp: ArrayNamespace, A, x, b):
    """``b - A x`` in double-double, rounded to double: the operations of the NumPy
    path's residual (products at once, the columns added in order ``k = 0, 1, ...``)."""
    s = b
    c = xp.zeros(b.shape, b.dtype)
    P, E = _two_prod(-A, x[None, :])
    for k in range(A.shape[1]):
        s, e2 = _two_sum(s, P[:, k])
        c = c + (E[:, k] + e2)
    return s + c


def _dd_matvec(xp: ArrayNamespace, A, v):
    """``A v`` in double-double (the NumPy path's ``dd_matvec``)."""
    n = A.shape[0]
    P, E = _two_prod(A, v[None, :])
    h, lo = xp.zeros((n,), A.dtype), xp.zeros((n,), A.dtype)
    for k in range(A.shape[1]):
        h, lo = _dd_add((h, lo), _quick_two_sum(P[:, k], E[:, k]))
    return h, lo


def _dd_lu_solve(xp: ArrayNamespace, F, c):
    """Solve with the factors (unscaled) in double-double, ``c`` a double-double vector: the
    NumPy path's ``ext_lu_solve``, column-oriented substitution.  Whole vectors are updated
    and the rows the NumPy path updates are kept (no rounding here: the same bits, and
    fixed shapes for JAX)."""
    n = F.perm.shape[0]
    L, U = F.L, F.U
    rows = xp.arange(n)
    hi, lo = c[0][F.perm], c[1][F.perm]
    for j in range(n - 1):
        new = _dd_sub((hi, lo), _dd_mul_double((hi[j], lo[j]), L[:, j]))
        hi, lo = xp.where(rows > j, new[0], hi), xp.where(rows > j, new[1], lo)
    for j in range(n - 1, -1, -1):
        q = _dd_div_double(xp, (hi[j : j + 1], lo[j : j + 1]), U[j : j + 1, j])
        hi, lo = xp.where(rows == j, q[0], hi), xp.where(rows == j, q[1], lo)
        if j:
            new = _dd_sub((hi, lo), _dd_mul_double((hi[j], lo[j]), U[:, j]))
            hi, lo = xp.where(rows < j, new[0], hi), xp.where(rows < j, new[1], lo)
    return hi, lo


# ---------------------------------------------------------------------------
# lu_ir, gmres_ir
# ---------------------------------------------------------------------------


def refinement_host_only(A: Any, b: Any, uf: Any = "h", u: Any = "d", ur: Any = "q", *, up: Any = None,
                         x_true: Any = None, scaling: Any = None, theta: Any = None,
                         lu_method: str = "chopped", stop: str = "backward", **ignored: Any) -> bool:
    """Whether :func:`lu_ir`/:func:`gmres_ir` take the host route: LAPACK or scaled factors,
    binary128 arithmetic, or ``stop='all'`` without ``x_true`` (a LAPACK reference solution)."""
    from .extended import extended_kind

    upp = ur if up is None else up
    return (lu_host_only(A, scaling=scaling, theta=theta, method=lu_method)
            or "binary128" in (extended_kind(ur), extended_kind(upp))
            or (stop == "all" and x_true is None))


def _residual(xp, A, x, b, ur):
    if _is_extended(ur):
        return _residual_dd(xp, A, x, b)
    rr = _rounder(ur, xp)
    return rr(rr(b) - matvec(xp, A, x, ur))


def _pow2_scale(xp, v) -> float:
    nrm = xp.max_abs(v)
    if nrm == 0 or not math.isfinite(nrm):
        return 1.0
    return math.ldexp(1.0, math.frexp(nrm)[1] - 1)


def _errors(xp, Au, bu, x, normA, normb, absA):
    """Normwise and componentwise backward errors of ``x`` (as the NumPy path's ``_errors``;
    the componentwise denominator ``|A||x|`` is the library's matrix-vector product)."""
    n = Au.shape[0]
    r = _residual_dd(xp, Au, x, bu) if n else xp.zeros((0,), Au.dtype)
    rn = xp.max_abs(r)
    denom = normA * xp.max_abs(x) + normb
    nbe = 0.0 if rn == 0 else (rn / denom if denom else math.inf)
    if not xp.all_finite(x):
        nbe = math.nan
    if not n:
        return nbe, 0.0
    cden = absA @ xp.abs(x) + xp.abs(bu)
    ar = xp.abs(r)
    ratio = xp.xp.where(ar == 0, xp.xp.zeros_like(ar), ar / cden)  # equal shapes: IEEE division
    return nbe, xp.scalar(xp.xp.max(ratio))


def _refine(xp, A, b, uf, u, ur, correction, x_true, max_iter, tol, stop, kind):
    from .refinement import STOPS, IRResult

    A, b = (xp.float_copy(v, False) for v in _float_operands(xp, A, b))
    if A.ndim != 2 or A.shape[0] != A.shape[1] or tuple(b.shape) != (A.shape[0],):
        raise ValueError("need a square A and a vector b of matching size")
    if stop not in STOPS:
        raise ValueError(f"stop must be one of {STOPS}, got {stop!r}")
    max_iter = int(max_iter)
    n = A.shape[0]
    ru = _rounder(u, xp)
    uw = _unit_roundoff(u)
    if tol is None:
        tol = max(n, 1) * uw if stop == "backward" else uw
    tol = float(tol)
    Au, bu = ru(A), ru(b)
    absA = xp.abs(Au)
    # ||A||_inf as the NumPy path sums it (np.sum's pairwise order): one host copy, before the loop.
    normA = float(np.max(np.sum(np.abs(xp.to_numpy(Au)), axis=1))) if n else 0.0
    normb = xp.max_abs(bu)
    xt = None if x_true is None else xp.float_copy(x_true, False)
    F = lu(xp, A, uf)
    out = IRResult(xp.asarray(np.full(n, np.nan)), False, "maxiter",
                   forward_error=None if xt is None else [], factors=F, stop=stop, tol=tol)
    if F.singular:
        out.status = "singular"
        return out
    x = solve(xp, F, bu, uf)
    if not xp.all_finite(x):
        x = xp.zeros(bu.shape, bu.dtype)
    x = ru(x)

    def forward(v):
        if xt is None:
            return math.nan
        nt = xp.max_abs(xt)
        dv = xp.max_abs(v - xt)
        return dv / nt if nt else (0.0 if dv == 0 else math.inf)

    measures = []
    status = None
    for it in range(max_iter + 1):
        nbe, cbe = _errors(xp, Au, bu, x, normA, normb, absA)
        out.backward_error.append(nbe)
        out.componentwise_error.append(cbe)
        fe = forward(x)
        if xt is not None:
            out.forward_error.append(fe)
        status = _refinement_verdict(it, nbe, cbe, fe, stop, tol, out.changes, out.backward_error,
                                     measures, n, uw)
        if status is not None:
            break
        if it == max_iter:
            break
        r = ru(_residual(xp, Au, x, bu, ur))
        d, its = correction(F, Au, r)
        if kind == "gmres":
            out.gmres_iterations.append(its)
        x_new = ru(x + d)
        if not xp.all_finite(x_new):
            status = "diverged"
            break
        step, size = xp.max_abs(x_new - x), xp.max_abs(x_new)
        out.changes.append(step / size if size else (0.0 if step == 0 else math.inf))
        x = x_new
    out.x = x
    out.status = status or "maxiter"
    out.converged = out.status == "converged"
    return out


def lu_ir(xp: ArrayNamespace, A: Any, b: Any, uf: Any = "h", u: Any = "d", ur: Any = "q", *,
          x_true: Any = None, max_iter: int = 10, tol: Optional[float] = None, stop: str = "backward",
          scaling: Any = None, theta: Any = None, lu_method: str = "chopped") -> Any:
    """:func:`pychop_compat.linalg.lu_ir` on ``xp``'s device (unscaled chopped factors)."""

    def correction(F, Au, r):
        s = _pow2_scale(xp, r)
        return _rounder(u, xp)(solve(xp, F, xp.divide(r, s), uf) * s), None

    return _refine(xp, A, b, uf, u, ur, correction, x_true, max_iter, tol, stop, "lu")


def _gmres(xp, A, r, F, u, up, tol, maxit):
    """The NumPy path's ``_gmres`` with the vectors on the device; the small Hessenberg
    matrix, rotations and triangular solve are scalars on the host, rounded there by the
    same chop calls as in the NumPy path."""
    from ._common import _make_rounder
    from .lu import solve as host_solve

    ru = _rounder(u, xp)
    ru_host = _make_rounder(u)
    n = r.shape[0]
    maxit = n if maxit is None else int(maxit)

    def nrm2(v):
        return ru(xp.sqrt(dot(xp, v, v, u)))

    if _is_extended(up):

        def apply(v):  # M^{-1} A v in double-double, rounded to u
            hi, lo = _dd_lu_solve(xp, F, _dd_matvec(xp, A, v))
            return ru(hi + lo)

        hi, lo = _dd_lu_solve(xp, F, (r, xp.zeros(r.shape, r.dtype)))
        z = ru(hi + lo)
    else:

        def apply(v):  # M^{-1} A v in precision up
            return ru(solve(xp, F, matvec(xp, A, v, up), up))

        z = ru(solve(xp, F, r, up))
    beta_d = nrm2(z)
    beta = xp.scalar(beta_d)
    if beta == 0 or not math.isfinite(beta):
        return xp.zeros(r.shape, r.dtype), 0
    V = xp.zeros((n, maxit + 1), r.dtype)
    H = np.zeros((maxit + 1, maxit))
    cs, sn = np.zeros(maxit), np.zeros(maxit)
    g = np.zeros(maxit + 1)
    g[0] = beta
    V = xp.put(V, (slice(None), 0), ru(xp.divide(z, beta_d)))
    k = 0
    for j in range(maxit):
        w = apply(V[:, j])
        for i in range(j + 1):
            h = dot(xp, w, V[:, i], u)
            H[i, j] = xp.scalar(h)
            w = ru(w - ru(h * V[:, i]))
        h = nrm2(w)
        H[j + 1, j] = xp.scalar(h)
        if H[j + 1, j] != 0:
            V = xp.put(V, (slice(None), j + 1), ru(xp.divide(w, h)))
        hj1 = _givens_column(H, cs, sn, g, j, ru_host)  # scalars, rounded on the host
        if hj1 is None:
            k = j
            break
        k = j + 1
        if abs(g[j + 1]) <= tol * beta or hj1 == 0:
            break
    if k == 0:
        return xp.zeros(r.shape, r.dtype), 0
    y = host_solve((np.eye(k), H[:k, :k], np.arange(k)), g[:k], u)  # k x k, on the host
    return matvec(xp, V[:, :k], xp.asarray(y), u), k


def gmres_ir(xp: ArrayNamespace, A: Any, b: Any, uf: Any = "h", u: Any = "d", ur: Any = "q", *,
             up: Any = None, x_true: Any = None, max_iter: int = 10, tol: Optional[float] = None,
             gmres_tol: float = 1e-6, gmres_maxit: Optional[int] = None, stop: str = "backward",
             scaling: Any = None, theta: Any = None, lu_method: str = "chopped") -> Any:
    """:func:`pychop_compat.linalg.gmres_ir` on ``xp``'s device (unscaled chopped factors)."""
    upp = ur if up is None else up
    ru = _rounder(u, xp)

    def correction(F, Au, r):
        s = xp.max_abs(r)
        if s == 0 or not math.isfinite(s):
            s = 1.0
        d, its = _gmres(xp, Au, ru(xp.divide(r, s)), F, u, upp, gmres_tol, gmres_maxit)
        return ru(d * s), its

    return _refine(xp, A, b, uf, u, ur, correction, x_true, max_iter, tol, stop, "gmres")
