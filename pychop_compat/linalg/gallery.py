"""Test matrices."""

from __future__ import annotations

import math
from typing import Any, Optional, Tuple, Union

import numpy as np


def _haar(n: int, rng: np.random.Generator) -> np.ndarray:
    Q, R = np.linalg.qr(rng.standard_normal((n, n)))
    return Q * np.where(np.diag(R) < 0, -1.0, 1.0)


def _check_kappa(kappa: float, name: str) -> None:
    """Refuse a condition number ``kappa`` (the value ``name`` says) below 1 or NaN."""
    if not kappa >= 1:
        raise ValueError(f"kappa must satisfy {name} >= 1, got {kappa!r}")


def randsvd(
    n: int, kappa: float, mode: int = 3, rng: Union[None, int, np.random.Generator] = None
) -> np.ndarray:
    """Random ``n x n`` matrix with 2-norm condition number ``kappa``.

    The package's own test matrix (no published function of this name is reproduced).

    ``A = Q1 diag(sigma) Q2^T`` with Haar-distributed orthogonal ``Q1, Q2`` and ``max sigma = 1``;
    ``mode`` as :func:`gallery_randsvd`'s 1 to 5 (default 3), mode 5 with ``cond(A) = kappa``.
    ``kappa`` must be at least 1 (a ``ValueError`` otherwise, NaN included).

    Examples
    --------
    >>> import numpy as np
    >>> from pychop_compat import linalg
    >>> A = linalg.randsvd(20, 1e6, rng=0)
    >>> bool(abs(np.linalg.cond(A) / 1e6 - 1) < 1e-6)
    True
    """
    rng = np.random.default_rng(rng)
    n = int(n)
    k = float(kappa)
    _check_kappa(k, "kappa")  # as gallery_randsvd's |kappa| (a negative kappa has no meaning here)
    if n == 1:
        sigma = np.ones(1)
    elif mode == 3:
        sigma = k ** (-np.arange(n) / (n - 1))
    elif mode == 4:
        sigma = 1 - (1 - 1 / k) * np.arange(n) / (n - 1)
    elif mode in (1, 2, 5):  # as gallery_randsvd's, mode 5 stretched to cond(A) = kappa
        sigma = _singular_values(n, k, mode, rng)
        if mode == 5:
            sigma[np.argmax(sigma)], sigma[np.argmin(sigma)] = 1.0, 1 / k
    else:
        raise ValueError("mode must be 1, 2, 3, 4 or 5")
    return (_haar(n, rng) * sigma) @ _haar(n, rng).T


def _singular_values(p: int, kappa: float, mode: int, rng: np.random.Generator) -> np.ndarray:
    """The singular values of MATLAB's ``gallery('randsvd', n, kappa, mode)`` (largest first)."""
    j = abs(mode)
    if j == 1:  # one large singular value
        sigma = np.full(p, 1.0 / kappa)
        sigma[0] = 1.0
    elif j == 2:  # one small singular value
        sigma = np.ones(p)
        sigma[-1] = 1.0 / kappa
    elif j == 3:  # geometrically distributed: factor^(0:p-1), factor = kappa^(-1/(p-1))
        factor = kappa ** (-1.0 / (p - 1))
        sigma = factor ** np.arange(p, dtype=np.float64)
    elif j == 4:  # arithmetically distributed
        sigma = 1.0 - np.arange(p) / (p - 1) * (1.0 - 1.0 / kappa)
    else:  # j == 5: random, uniformly distributed logarithm; cond(A) <= kappa
        sigma = np.exp(-rng.random(p) * math.log(kappa))
    return sigma[::-1].copy() if mode < 0 else sigma


def gallery_randsvd(
    n: Union[int, Tuple[int, int]],
    kappa: Optional[float] = None,
    mode: int = 3,
    kl: Optional[int] = None,
    ku: Optional[int] = None,
    method: int = 0,
    classname: str = "double",
    *,
    rng: Union[None, int, np.random.Generator] = None,
) -> np.ndarray:
    """MATLAB's ``gallery('randsvd', n, kappa, mode, kl, ku, method, classname)``.

    Source: MATLAB's documentation of ``gallery('randsvd')`` (its code is not public): the
    argument order and singular values are MATLAB's; the orthogonal factors are NumPy's.

    A random matrix ``A = U diag(sigma) V^T`` with MATLAB's singular values
    (``p = min(m, n)``): mode 1, one large (``[1, 1/kappa, ..., 1/kappa]``);
    2, one small; 3 (default), geometric, ``f^(i-1)`` with
    ``f = kappa^(-1/(p-1))``; 4, arithmetic; 5, ``exp(-r_i log(kappa))`` with
    ``r_i`` uniform (``cond(A) <= kappa``); ``mode < 0``: the order reversed.
    ``kappa < 0`` gives a symmetric positive definite ``A = Q^T diag(sigma) Q``
    with ``cond(A) = -kappa``.

    Parameters
    ----------
    n : int or (m, n)
        Order, or the shape of a rectangular matrix.
    kappa : float, optional
        2-norm condition number (default ``sqrt(1/eps)``; negative: positive definite).
    mode : int, optional
        Distribution of the singular values, ``+-1 .. +-5`` (default 3).
    kl, ku : int, optional
        MATLAB's bandwidth reduction: only a full matrix is supported
        (``None``, or ``kl >= m - 1`` and ``ku >= n - 1``, ``ku`` defaulting to
        ``kl``: MATLAB reduces the bandwidth only when ``kl < m - 1`` or
        ``ku < n - 1``); a band is refused (``NotImplementedError``).
    method : {0, 1}, optional
        Accepted for MATLAB's argument order (the orthogonal factors are
        NumPy's for both); other values are refused (``ValueError``).
    classname : {'double', 'single'}, optional
        Class of the result.
    rng : int, numpy.random.Generator or None
        Source of the Haar-distributed orthogonal factors (and of mode 5's
        ``r_i``): not MATLAB's ``randn`` numbers.

    Returns
    -------
    ndarray
        ``m x n`` matrix.
    """
    rng = np.random.default_rng(rng)
    dims: Any = n  # an int or a pair
    shape = (int(dims), int(dims)) if np.ndim(dims) == 0 else tuple(int(v) for v in dims)
    if len(shape) != 2 or min(shape) < 1:
        raise ValueError(f"n must be a positive integer or a pair (m, n), got {n!r}")
    m, nc = shape
    p = min(m, nc)
    kappa = math.sqrt(1 / np.finfo(float).eps) if kappa is None else float(kappa)
    posdef = kappa < 0
    kappa = abs(kappa)
    _check_kappa(kappa, "|kappa|")
    if int(mode) != mode or not 1 <= abs(int(mode)) <= 5:
        raise ValueError(f"mode must be one of +-1, +-2, +-3, +-4, +-5, got {mode!r}")
    mode = int(mode)
    if (kl, ku) != (None, None):
        lower = m - 1 if kl is None else int(kl)
        upper = lower if ku is None else int(ku)  # MATLAB's default ku = kl
        if lower < m - 1 or upper < nc - 1:  # MATLAB reduces the bandwidth only then: else a full matrix
            raise NotImplementedError("gallery_randsvd: bandwidth reduction (kl, ku) is not implemented")
    if isinstance(method, bool) or method not in (0, 1):
        raise ValueError(f"method must be 0 or 1 (MATLAB's two ways of computing the factors), got {method!r}")
    if classname not in ("double", "single"):
        raise ValueError(f"classname must be 'double' or 'single', got {classname!r}")
    if p == 1:  # a vector: randn normalised, as MATLAB
        A = rng.standard_normal((m, nc))
        A = A / np.linalg.norm(A)
    else:
        sigma = _singular_values(p, kappa, mode, rng)
        if posdef:
            if m != nc:
                raise ValueError("kappa < 0 (positive definite) needs a square matrix")
            Q = _haar(p, rng)
            A = (Q.T * sigma) @ Q
            A = (A + A.T) / 2
        else:
            S = np.zeros((m, nc))
            S[np.arange(p), np.arange(p)] = sigma
            A = _haar(m, rng) @ S @ _haar(nc, rng).T
    return A.astype(np.float32 if classname == "single" else np.float64)
