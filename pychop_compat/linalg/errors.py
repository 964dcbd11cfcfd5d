"""Warnings of :mod:`pychop_compat.linalg`."""

from __future__ import annotations

__all__ = ["SingularMatrixWarning"]


class SingularMatrixWarning(RuntimeWarning):
    """An LU factorization or triangular solve met a zero or non-finite pivot.

    MATLAB prints "Matrix is singular to working precision" in the same
    situation; the computed result (with ``Inf`` or ``NaN`` entries, or an
    incomplete factorization) is still returned.  Silence it with
    ``warnings.simplefilter('ignore', SingularMatrixWarning)``.
    """
