"""Warnings of :mod:`pychop_compat.linalg`."""

from __future__ import annotations

__all__ = ["SingularMatrixWarning"]


class SingularMatrixWarning(RuntimeWarning):
    """An LU factorization or triangular solve met a zero or non-finite pivot, or the matrix of a
    least-squares problem (:func:`~pychop_compat.linalg.ls_ir`) is rank deficient.

    MATLAB prints "Matrix is singular to working precision"; the computed result (with ``Inf`` or
    ``NaN`` entries) is still returned."""
