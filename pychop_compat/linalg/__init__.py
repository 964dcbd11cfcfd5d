"""Mixed-precision linear algebra in simulated low precision.

Kernels (:func:`dot`, :func:`matvec`, :func:`matmul`), LU factorization with
partial pivoting (:func:`lu`), triangular solves (:func:`solve`) and iterative
refinement in three precisions (:func:`lu_ir`, :func:`gmres_ir`), every
floating-point operation rounded by :func:`pychop_compat.chop` semantics.

Conventions
-----------
*Precision arguments.*  Wherever a function takes ``options`` (or ``uf``,
``u``, ``ur``, ``up``, ``accumulate``) it accepts what ``chop`` accepts as
options -- a dict, an :class:`~pychop_compat.Options`, a ``SimpleNamespace`` --
or a format name such as ``'h'`` (shorthand for ``{'format': 'h'}``).
``options=None`` means "the caller's persistent chop options", read with
:func:`~pychop_compat.chop_options` when the function is called.  The kernels
never change the persistent options: they round with a stateless
:class:`~pychop_compat.Chop` built from the options.

*What is rounded.*  Every operation is done in double (in single when all
array inputs are single) and its result is rounded with chop, exactly as the
MATLAB idiom ``s = chop(s + chop(a*b))``.  Array inputs of every kernel are
first rounded to the format ("stored in the format"); this is a no-op, and
draws no random numbers, for data already representable.  The simulation is
therefore the one of chop itself: products of two ``t``-bit numbers are exact in
double when ``2t <= 53``, and rounding the double result of ``+``, ``-``,
``*``, ``/`` or ``sqrt`` once more to ``t`` bits gives the correctly rounded
``t``-bit result for round to nearest when ``2t + 2 <= 53`` (Figueroa's double
rounding theorem; this covers fp8, bfloat16, fp16 and single).  For directed
and stochastic rounding, and for the fused ``method='fma'``, the double
intermediate itself may have been inexact, exactly as for a MATLAB user
calling chop.  For format ``'d'`` the arithmetic is plain double.

*Order of operations and of random draws.*  The order of the chop calls is part
of each function's semantics, because stochastic rounding (``round`` 5 or 6)
consumes random numbers call by call -- from ``options.randfunc`` if given,
else from MATLAB's global stream (:func:`pychop_compat.rng`), the same stream
``chop`` uses -- and inside one call in chop's (MATLAB's column-major) element
order.  Each function documents its sequence of calls; identical inputs,
options and generator state give identical results.  With ``options=None`` the
draws are those of calling ``chop(v)`` with the persistent options in that
order.

*Vectorization.*  Loops run over the inner (reduction or elimination) index
only; each step is one whole-array operation and one chop call, so the results
are identical to the scalar loops they describe, element by element.

*Precisions beyond double.*  Iterative refinement may compute residuals and
apply GMRES's preconditioned operator beyond double: ``'q'`` (``'quad'``,
``'quadruple'``, ``'fp128'``, ``'dd'``) is double-double arithmetic (about 106
bits); ``'binary128'`` is IEEE quadruple precision with every operation
rounded exactly (mpmath; slow).  The backward errors that :func:`lu_ir` and
:func:`gmres_ir` report use double-double residuals.

*Array types.*  :func:`dot`, :func:`matvec`, :func:`matmul`, :func:`lu`,
:func:`solve`, :func:`lu_ir` and :func:`gmres_ir` are written once against
an array namespace (:mod:`.arrays`, over :mod:`pychop_compat.kernels.xp`):
they take NumPy arrays, torch tensors (CPU, CUDA), CuPy arrays and JAX arrays
and compute with that library's operations and chop engine on its device,
giving back the same kind (dtype and device kept; the fields of
:class:`LUResult` and :class:`IRResult` too).  The chop calls are the same,
in the same order, for every library, so deterministic rounding gives NumPy's
results bit for bit (and stochastic rounding too on CPU tensors and JAX
arrays, which draw MATLAB's stream).  LAPACK, scaling and binary128 parts run
on a host copy.

*Outcomes.*  :func:`lu_ir` and :func:`gmres_ir` report ``converged=True`` only
when their stopping rule holds for the returned iterate; otherwise the status
says why they stopped (``'singular'``, ``'diverged'``, ``'stagnated'``,
``'maxiter'``).  :func:`lu` and :func:`solve` warn with
:class:`SingularMatrixWarning` on a zero or non-finite pivot.  Complex input
is refused with chop's error.
"""

from .products import dot, matmul, matvec
from .lu import LUResult, lu, solve
from .refinement import IRResult, gmres_ir, lu_ir
from .gallery import gallery_randsvd, randsvd
from .norms import cond, norm
from .errors import SingularMatrixWarning
from .scaling import Scaling, scale_diag_2side, scale_diag_2side_symm, squeeze

__all__ = [
    "dot",
    "matvec",
    "matmul",
    "lu",
    "LUResult",
    "solve",
    "lu_ir",
    "gmres_ir",
    "IRResult",
    "randsvd",
    "gallery_randsvd",
    "norm",
    "cond",
    "SingularMatrixWarning",
    "Scaling",
    "scale_diag_2side",
    "scale_diag_2side_symm",
    "squeeze",
]
