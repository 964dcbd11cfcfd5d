"""Warnings of :mod:`pychop_compat.linalg`."""

from __future__ import annotations

import inspect
import os
import warnings

__all__ = ["SingularMatrixWarning", "warn_at_caller"]

#: The package's directory: frames inside it are not the caller's.
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


class SingularMatrixWarning(RuntimeWarning):
    """An LU factorization or triangular solve met a zero or non-finite pivot, or the matrix of a
    least-squares problem (:func:`~pychop_compat.linalg.ls_ir`) is rank deficient.

    MATLAB prints "Matrix is singular to working precision"; the computed result (with ``Inf`` or
    ``NaN`` entries) is still returned."""


def warn_at_caller(message: str, category: type = SingularMatrixWarning) -> None:
    """``warnings.warn(message, category)`` attributed to the first frame outside the package: the
    user's call, however many of the package's frames (decorators, host routes) lie between.  A fixed
    ``stacklevel`` would name a package line for some entries, and Python's default filter shows a
    warning once per line: later warnings of other calls would be hidden."""
    frame = inspect.currentframe()
    level = 1  # stacklevel 1: the caller of warnings.warn (this function's frame)
    try:
        while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
            frame = frame.f_back
            level += 1
    finally:
        del frame  # no reference cycle through the frames
    warnings.warn(message, category, stacklevel=level)
