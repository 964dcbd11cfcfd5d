"""Chopped arithmetic: arrays and scalars whose every operation rounds to a format.

``chopped(x, options)`` wraps values in a low-precision format; NumPy code run
on them computes as a low-precision machine would: every elementwise
operation is rounded once (chop semantics, the same numbers and random draws
as hand-written ``chop(a + b)``), sums and products round after every
operation in a documented order (:mod:`.reductions`, and
:func:`pychop_compat.linalg.matmul` for products), ``np.linalg.solve`` uses
the chopped LU of :mod:`pychop_compat.linalg`, and anything else raises
:class:`NotChoppedError` rather than computing in double.  The same code
serves CuPy arrays on their device (:mod:`.libraries`); torch tensors
(:mod:`.torch_tensor`) and JAX arrays (:mod:`.jax_array`) have their own
wrappers that reuse it.  See the documentation page "Chopped arithmetic".
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
