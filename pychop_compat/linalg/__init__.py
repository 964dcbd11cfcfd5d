"""Mixed-precision linear algebra in simulated low precision.

Kernels (:func:`dot`, :func:`matvec`, :func:`matmul`), LU factorization with
partial pivoting (:func:`lu`, the research codes' :func:`lutx_chop`),
Cholesky and QR factorizations (:func:`chol_lp`, :func:`house_qr_lp`), triangular solves (:func:`solve`) and iterative
refinement in three precisions (:func:`lu_ir`, :func:`gmres_ir`, :func:`cg_ir`, and
:func:`ls_ir` for least squares), every
floating-point operation rounded by :func:`pychop_compat.chop` semantics.

The conventions (precision arguments, what is rounded, the order of the chop
calls and of the random numbers, array types and devices, outcomes) are those of
the "Linear algebra in simulated precision" page of the documentation
(``docs/linalg.rst``).  Complex input is refused with chop's error.
"""

from .products import dot, matmul, matvec
from .lu import LUResult, lu, lutx_chop, solve
from .refinement import IRResult, LSIRResult, cg_ir, gmres_ir, ls_ir, lu_ir
from .gallery import gallery_randsvd, randsvd
from .norms import cond, norm
from .errors import SingularMatrixWarning
from .scaling import (Scaling, ruiz_equilibrate, ruiz_equilibrate_symmetric, scale_diag_2side,
                      scale_diag_2side_symm, spd_diag_scale, squeeze)
from .cholesky import chol_lp
from .qr import house_qr_lp

__all__ = [
    "dot",
    "matvec",
    "matmul",
    "lu",
    "LUResult",
    "lutx_chop",
    "solve",
    "lu_ir",
    "gmres_ir",
    "cg_ir",
    "ls_ir",
    "IRResult",
    "LSIRResult",
    "randsvd",
    "gallery_randsvd",
    "norm",
    "cond",
    "SingularMatrixWarning",
    "Scaling",
    "ruiz_equilibrate",
    "ruiz_equilibrate_symmetric",
    "scale_diag_2side",
    "scale_diag_2side_symm",
    "spd_diag_scale",
    "squeeze",
    "chol_lp",
    "house_qr_lp",
]
