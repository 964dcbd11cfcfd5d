"""Accurate residuals beyond double: double-double arithmetic."""

from __future__ import annotations

import math

import numpy as np

from ._common import (_is_extended, _make_rounder)
from .kernels import matvec


_SPLITTER = 134217729.0  # 2**27 + 1


def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _two_prod(a, b):
    p = a * b
    ca, cb = _SPLITTER * a, _SPLITTER * b
    ah = ca - (ca - a)
    bh = cb - (cb - b)
    al, bl = a - ah, b - bh
    return p, al * bl - (((p - ah * bh) - al * bh) - ah * bl)


def _residual_dd(A: np.ndarray, x: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``b - A x`` in double-double (Ogita-Rump-Oishi Dot2), rounded to double.

    As accurate as evaluating in precision ``u**2`` (106 bits) and rounding
    to double; no overflow in the splitting is assumed (``|a| < 2**996``).
    """
    s = b.astype(np.float64, copy=True)
    c = np.zeros_like(s)
    for k in range(A.shape[1]):
        p, e = _two_prod(-A[:, k], x[k])
        s, e2 = _two_sum(s, p)
        c += e + e2
    return s + c


def _residual(A, x, b, ur) -> np.ndarray:
    if _is_extended(ur):
        return _residual_dd(A, x, b)
    rr = _make_rounder(ur)
    return rr(rr(b) - matvec(A, x, ur))


def _norm_inf(v) -> float:
    return float(np.max(np.abs(v))) if np.size(v) else 0.0


def _pow2_scale(v) -> float:
    """The power of two at or below ``||v||_inf`` (exact scaling factor)."""
    nrm = _norm_inf(v)
    if nrm == 0 or not np.isfinite(nrm):
        return 1.0
    return math.ldexp(1.0, math.frexp(nrm)[1] - 1)
