"""Chopped arithmetic: arrays and scalars whose every operation rounds to a format.

``chopped(x, options)`` wraps values in a low-precision format; NumPy code run
on them computes as a low-precision machine would: elementwise operations
round once (chop's semantics and random draws), sums and products after every
operation in a documented order (:mod:`.reductions`, :func:`pychop_compat.linalg.matmul`),
and anything else raises :class:`NotChoppedError` rather than computing in
double.  CuPy arrays, torch tensors and JAX arrays are served too; see the
documentation page "Chopped arithmetic".
"""

from .context import Arithmetic, FormatMismatchError, METHODS, MISMATCH_RULES, NotChoppedError
from .array import ChoppedArray, ChoppedScalar
from .factory import chopped
from .fused import fma
from .bits import bit_layout, decode, encode
from . import reductions

__all__ = [
    "chopped", "ChoppedArray", "ChoppedScalar", "Arithmetic", "FormatMismatchError",
    "NotChoppedError", "fma", "encode", "decode", "bit_layout", "reductions", "METHODS",
    "MISMATCH_RULES",
]
