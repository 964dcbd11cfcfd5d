"""Shared helpers of :mod:`pychop_compat.linalg`: option handling, rounders, IEEE error state."""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, Mapping, Union

import numpy as np
from numpy.typing import ArrayLike


OptionsLike = Union[None, str, Mapping[str, Any], Any]
Rounder = Callable[[np.ndarray], np.ndarray]


def _ieee(func):
    """Run ``func`` with NumPy's floating-point warnings off: overflow to
    infinity and NaN are part of the simulated arithmetic, as in MATLAB."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with np.errstate(all="ignore"):
            return func(*args, **kwargs)

    return wrapper


_METHODS = ("recursive", "fma", "pairwise", "blocked")
_DOUBLE_NAMES = ("d", "double", "fp64")
# Residual precision beyond double: simulated with double-double arithmetic.
_EXTENDED_NAMES = ("q", "quad", "quadruple", "fp128", "dd", "double-double")


# ---------------------------------------------------------------------------
# Options and rounders
# ---------------------------------------------------------------------------


def _chop_object(options: OptionsLike):
    """A stateless :class:`~pychop_compat.Chop` for ``options``: anything chop accepts, a
    format name, or ``None`` for the persistent chop options as they are now."""
    from .. import Chop, chop_options

    if options is None:
        options = chop_options()
    elif isinstance(options, str):
        options = {"format": options}
    return Chop(options)


def _make_rounder(options: OptionsLike) -> Rounder:
    """A function rounding an array with chop semantics for ``options``.

    Double format with subnormals and no bit flips, applied to double data,
    is the identity (chop returns double input unchanged), so it is
    short-circuited; everything else goes through a stateless
    :class:`~pychop_compat.Chop`.
    """
    ch = _chop_object(options)
    o = ch.options
    if o.format in _DOUBLE_NAMES and o.subnormal != 0 and not o.flip:

        def rnd_double(x: np.ndarray) -> np.ndarray:
            return x if x.dtype == np.float64 else np.asarray(ch(x))

        rnd_double.identity_for_double = True  # type: ignore[attr-defined]
        rnd_double.options = o  # type: ignore[attr-defined]  (read by compiled kernels)
        return rnd_double

    def rnd(x: np.ndarray) -> np.ndarray:
        return np.asarray(ch(x))

    rnd.options = o  # type: ignore[attr-defined]  (read by compiled kernels)
    return rnd


def _unit_roundoff(options: OptionsLike) -> float:
    """Unit roundoff ``2**-t`` of the format named by ``options``."""
    if _is_extended(options):
        return 2.0**-106
    return 2.0 ** -int(_chop_object(options).options.params[0])


def _is_extended(options: OptionsLike) -> bool:
    return isinstance(options, str) and options in _EXTENDED_NAMES


def _reject_complex(x: np.ndarray) -> None:
    """chop's check, with chop's message: simulated arithmetic is real."""
    if np.iscomplexobj(x):
        raise ValueError("Chop requires a real input array.")


def _float_array(x: ArrayLike, *others: ArrayLike) -> np.ndarray:
    """A copy of ``x`` in single if all inputs are single, else in double.

    Complex input is refused with chop's error (``ValueError``), never cast.
    """
    x = np.asarray(x)
    _reject_complex(x)
    single = all(np.asarray(o).dtype == np.float32 for o in (x, *others))
    return x.astype(np.float32 if single else np.float64, copy=True)


# ---------------------------------------------------------------------------
# Array types: torch and JAX inputs come back as torch and JAX arrays
# ---------------------------------------------------------------------------


def _members(value) -> list:
    """``value``, or the fields of a result dataclass (an :class:`LUResult` passed to :func:`solve`)."""
    import dataclasses

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [getattr(value, f.name) for f in dataclasses.fields(value)]
    return [value]


def _library_of(values) -> str:
    """'torch', 'jax' or 'cupy' when an argument is one (all must agree); else 'numpy'."""
    from ..engines import array_library

    found = {array_library(m) for v in values for m in _members(v)} & {"torch", "jax", "cupy"}
    if len(found) > 1:
        raise TypeError("linalg: arguments mix arrays of several libraries; convert them to one library.")
    return found.pop() if found else "numpy"


def keep_array_type(func):
    """Let a NumPy linalg function take torch tensors or JAX arrays and give back the same kind.

    The arrays are read on the host (a CPU tensor's memory is shared, not
    copied), ``func`` runs unchanged (so the sequence of chop calls, the random
    draws and the results are bit for bit those of NumPy input), and every
    array in the result (a bare array, a scalar from :func:`dot`, the fields of
    :class:`LUResult` and :class:`IRResult`) is given back as the first array
    argument's kind, dtype kept, on its device (for a GPU tensor or array: a
    round trip through the host; the computation itself is NumPy's).
    """

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        library = _library_of(list(args) + list(kwargs.values()))
        if library == "numpy":
            return func(*args, **kwargs)
        from ..engines import array_library, to_numpy

        like = next(m for v in list(args) + list(kwargs.values()) for m in _members(v)
                    if array_library(m) == library)

        def host(v):
            import dataclasses

            if dataclasses.is_dataclass(v) and not isinstance(v, type):
                return dataclasses.replace(v, **{f.name: host(getattr(v, f.name)) for f in dataclasses.fields(v)})
            if array_library(v) != library:
                return v
            return to_numpy(v.detach() if library == "torch" else v)

        out = func(*(host(a) for a in args), **{k: host(v) for k, v in kwargs.items()})
        return _give_back(out, like, library)

    return wrapper


def _give_back(out, like, library: str):
    import dataclasses

    if isinstance(out, (np.ndarray, np.generic)):
        if library == "torch":
            import torch

            return torch.from_numpy(np.array(out, order="C")).to(like.device)
        if library == "cupy":
            import cupy

            with like.device:
                return cupy.asarray(out)
        import jax

        return jax.device_put(np.asarray(out), next(iter(like.devices())))
    if dataclasses.is_dataclass(out) and not isinstance(out, type):
        changes = {f.name: _give_back(getattr(out, f.name), like, library) for f in dataclasses.fields(out)
                   if isinstance(getattr(out, f.name), np.ndarray) or dataclasses.is_dataclass(getattr(out, f.name))}
        return dataclasses.replace(out, **changes)
    return out


_SPLITTER = 134217729.0  # 2**27 + 1 (Dekker's splitting of a double)


def _two_prod(a, b):
    """Dekker's TwoProduct: ``(p, e)`` with ``p = fl(a*b)`` and ``p + e = a*b`` exactly (doubles,
    no fma, no overflow); elementwise on arrays of any library, so the host and device
    double-double kernels share it."""
    p = a * b
    ca, cb = _SPLITTER * a, _SPLITTER * b
    ah = ca - (ca - a)
    bh = cb - (cb - b)
    al, bl = a - ah, b - bh
    return p, al * bl - (((p - ah * bh) - al * bh) - ah * bl)


def _refinement_verdict(it, nbe, cbe, fe, stop, tol, changes, backward_errors, measures, n, uw):
    """The stopping rule of iterative refinement after the errors of iterate ``it`` are known.

    Returns the final status (``'converged'``, ``'diverged'``, ``'stagnated'``) or None to go on;
    appends this iterate's convergence measure to ``measures``.  One rule for the host
    (:mod:`.refinement`) and the device (:mod:`.device`) loops, so they cannot drift apart.
    """
    if stop == "change":
        m = changes[-1] if it else None
    else:
        m = max(nbe, cbe, fe) if stop == "all" else nbe
    if not math.isfinite(nbe):
        return "diverged"
    if stop == "change":
        if it and changes[-1] <= tol:
            return "converged" if nbe <= max(n, 1) * uw else "stagnated"
    elif m <= tol:
        return "converged"
    if it and nbe > max(10 * min(backward_errors[:-1]), max(n, 1) * uw):
        return "diverged"
    if m is not None:
        measures.append(m)
    if len(measures) >= 3 and measures[-1] >= measures[-2] >= measures[-3]:
        return "stagnated"
    return None


def _givens_column(H, cs, sn, g, j, ru):
    """GMRES's Givens step on column ``j`` of the Hessenberg matrix ``H`` (host scalars).

    Applies the previous rotations ``cs[:j], sn[:j]`` to the column, forms the new rotation,
    and rotates the right-hand side ``g``; every operation rounded by ``ru``.  Returns the
    subdiagonal entry before rotation (0 means a lucky breakdown), or None when the new
    rotation's norm is 0 or not finite (the caller stops with ``k = j``).  Shared by the
    host and device GMRES so their rounding sequence is one.
    """
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


def _matmul_matrices(A2, B2, method, block_size):
    """Check matmul's method and operand shapes (host and device alike).

    Returns ``(A2, B2, a_vec, b_vec)``: 1-D operands become a row (A) or a
    column (B), and the flags say which were vectors, for the caller to drop
    the extra axis from the result.
    """
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, not {method!r}")
    if method == "blocked" and int(block_size) < 1:
        raise ValueError("block_size must be a positive integer")
    a_vec, b_vec = A2.ndim == 1, B2.ndim == 1
    if a_vec:
        A2 = A2[None, :]
    if b_vec:
        B2 = B2[:, None]
    if A2.ndim != 2 or B2.ndim != 2:
        raise ValueError("matmul operands must be 1-D or 2-D")
    if A2.shape[1] != B2.shape[0]:
        raise ValueError(f"inner dimensions differ: {tuple(A2.shape)} @ {tuple(B2.shape)}")
    return A2, B2, a_vec, b_vec
