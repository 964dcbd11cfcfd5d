"""Chopped products: :func:`~pychop_compat.linalg.dot`, :func:`~pychop_compat.linalg.matvec`,
:func:`~pychop_compat.linalg.matmul` (every operation rounded).

Fast paths with the same bits, for deterministic rounding in chop.m's formats: the Numba kernels
(:mod:`pychop_compat.kernels.numba_linalg`) for NumPy double data, a fused Triton kernel for CUDA
torch tensors.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Union

import numpy as np
from numpy.typing import ArrayLike

from .. import hardware as matrix_units
from ..matlab.options import resolve
from .arrays import Arrays, arrays_for, ieee
from .common import METHODS, OptionsLike, Rounder, float_operands

__all__ = ["matmul", "matvec", "dot", "matmul_on", "unit_model", "TERM_BUDGET", "DEVICE_TERM_BUDGET",
           "JAX_JIT_STEPS"]

#: Products the pairwise and blocked paths hold at once on the host (columns of ``C`` in
#: groups, 8 MiB of doubles) with deterministic rounding.  Any grouping gives the same bits.
TERM_BUDGET = 1 << 20
#: The same on a device (32 MiB of doubles).
DEVICE_TERM_BUDGET = 1 << 22
#: Inner dimension from which JAX's recursive ``matmul`` compiles its step with ``jax.jit``
#: (deterministic rounding): one compilation per call, then one fused kernel per step.
JAX_JIT_STEPS = 256

Rounding = Optional[Rounder]  # None: no rounding (the products of 'fma' and ``accumulate=``)
#: What ``hardware=`` accepts: a GPU name (``'H100'``) or a block-FMA model.
HardwareLike = Union[None, str, matrix_units.BlockFMA]


def _recursive_step(arrays: Arrays, rprod: Rounding, rsum: Rounder, n: int) -> Callable:
    """``s, a, b -> fl(s + fl(a b))`` (or ``fl(s + a b)`` without ``rprod``), compiled with
    ``jax.jit`` for JAX when worth it: the multiply, the roundings and the add become one pass
    over the partial sums.  The product goes through chop's integer rounding before the add,
    so XLA cannot fuse them into an FMA; the bits are the eager ones."""

    def step(s: Any, a: Any, b: Any) -> Any:
        t = a * b
        if rprod is not None:
            t = rprod(t)
        return rsum(s + t)

    # Only with a rounded product: XLA would contract an unrounded ``s + a * b`` into an FMA
    # (measured: float32 sums changed), which is not two roundings.
    if (arrays.name == "jax" and n >= JAX_JIT_STEPS and rprod is not None and rprod.deterministic
            and rsum.deterministic):
        import jax

        return jax.jit(step)
    return step


def _sum_recursive(arrays: Arrays, A: Any, B: Any, rprod: Rounding, rsum: Rounder, block_size: int) -> Any:
    s = A[:, :1] * B[:1, :]
    s = rprod(s) if rprod is not None else rsum(s)
    step = _recursive_step(arrays, rprod, rsum, A.shape[1])
    for k in range(1, A.shape[1]):
        s = step(s, A[:, k:k + 1], B[k:k + 1, :])
    return s


def _outer_terms(arrays: Arrays, A: Any, B: Any, start: int = 0, step: int = 1) -> Any:
    """Products ``A[:, k] * B[k, :]`` for ``k = start, start + step, ...``, stacked (count, m, p).

    The columns of ``A`` are gathered by an index array, not sliced: NumPy's gather leaves them
    as rows in memory, so the products come out in C order and the NumPy engine rounds them
    without a copy (with a strided slice NumPy's pairwise matmul took 35% longer at n = 500)."""
    columns = arrays.arange(A.shape[1])[start::step]
    return A[:, columns].T[:, :, None] * B[columns, :][:, None, :]


def _sum_pairwise(arrays: Arrays, A: Any, B: Any, rprod: Rounding, rsum: Rounder, block_size: int) -> Any:
    n = A.shape[1]
    terms = _outer_terms(arrays, A, B)
    terms = rprod(terms) if rprod is not None else (rsum(terms) if n == 1 else terms)
    while terms.shape[0] > 1:
        h = terms.shape[0] // 2
        pairs = rsum(terms[0:2 * h:2] + terms[1:2 * h:2])
        terms = arrays.xp.concat([pairs, terms[2 * h:]]) if terms.shape[0] % 2 else pairs
    return terms[0]


def _sum_blocked(arrays: Arrays, A: Any, B: Any, rprod: Rounding, rsum: Rounder, block_size: int) -> Any:
    n = A.shape[1]
    b = int(block_size)
    t = _outer_terms(arrays, A, B, 0, b)
    S = rprod(t) if rprod is not None else rsum(t)  # the first terms of every block
    for j in range(1, min(b, n)):
        count = -(-(n - j) // b)  # blocks that have a j-th element: a prefix
        t = _outer_terms(arrays, A, B, j, b)
        if rprod is not None:
            t = rprod(t)
        S = arrays.put(S, slice(0, count), rsum(S[:count] + t))
    s = S[0]
    for i in range(1, -(-n // b)):
        s = rsum(s + S[i])
    return s


_SUMMERS = {"recursive": _sum_recursive, "fma": _sum_recursive, "pairwise": _sum_pairwise,
            "blocked": _sum_blocked}


def _kernel_specs(rprod: Rounding, rsum: Rounder, dtype_name: str) -> Optional[tuple]:
    """``(product_spec, sum_spec)`` of a compiled product (``product_spec`` None for unrounded
    products), or None where a rounding has no compiled form (:meth:`Rounder.kernel_spec`)."""
    sum_spec = rsum.kernel_spec(dtype_name)
    product_spec = rprod.kernel_spec(dtype_name) if rprod is not None else None
    if sum_spec is None or (rprod is not None and product_spec is None):
        return None
    return product_spec, sum_spec


def _compiled_product(method: str, A: np.ndarray, B: np.ndarray, rprod: Rounding, rsum: Rounder,
                      block_size: int) -> Optional[np.ndarray]:
    """The product by the Numba kernels (NumPy double data, Numba in use, deterministic
    rounding of chop.m's formats), or None where they do not apply."""
    from ..kernels import compiled

    specs = _kernel_specs(rprod, rsum, "float64") if A.dtype == np.float64 and compiled.wanted() else None
    if specs is None:
        return None
    from ..kernels import numba_linalg

    product_spec, sum_spec = specs
    sums = compiled.rounding_constants(sum_spec, np.float64)
    products = compiled.rounding_constants(product_spec or sum_spec, np.float64)
    A, B = np.ascontiguousarray(A), np.ascontiguousarray(B)
    with numba_linalg.tasks_one_at_a_time():
        if method == "pairwise":
            return numba_linalg.matmul_pairwise(A, B, *products, rprod is not None, *sums)
        if method == "blocked":
            return numba_linalg.matmul_blocked(A, B, *products, rprod is not None, *sums, int(block_size))
        return numba_linalg.matmul_recursive(A, B, *products, rprod is not None, *sums)


def _fused_product(arrays: Arrays, A: Any, B: Any, rprod: Rounding, rsum: Rounder, block_size: int) -> Any:
    """The recursive/fma sequence by the fused Triton kernel (CUDA torch tensors, Triton
    installed, deterministic chop.m rounding); tiles that met values the kernel leaves (near
    overflow, Inf, NaN; below xmin with subnormals flushed) are recomputed here.  None where it
    does not apply."""
    from ..kernels import triton_matmul

    specs = _kernel_specs(rprod, rsum, str(A.dtype).rpartition(".")[2]) if triton_matmul.wanted(A, B) else None
    if specs is None:
        return None
    C, tiles = triton_matmul.fused_matmul(A, B, *specs)
    for rows, cols in tiles:
        C[rows, cols] = _sum_recursive(arrays, A[rows], B[:, cols], rprod, rsum, block_size)
    return C


def _product(arrays: Arrays, method: str, A: Any, B: Any, rprod: Rounding, rsum: Rounder,
             block_size: int) -> Any:
    """``A @ B`` by ``method`` with O(m p + block) extra memory (see :func:`matmul`'s notes)."""
    fast = None
    if arrays.name == "numpy":
        fast = _compiled_product(method, A, B, rprod, rsum, block_size)
    elif arrays.name == "torch" and method in ("recursive", "fma"):
        fast = _fused_product(arrays, A, B, rprod, rsum, block_size)
    if fast is not None:
        return fast
    summer = _SUMMERS[method]
    (m, n), p = A.shape, B.shape[1]
    if method in ("recursive", "fma") or p == 1:
        return summer(arrays, A, B, rprod, rsum, block_size)
    if (rprod is None or rprod.deterministic) and rsum.deterministic:
        # Each element of C depends on its own operations only: columns in groups give the same bits.
        budget = TERM_BUDGET if arrays.name == "numpy" else DEVICE_TERM_BUDGET
        width = max(1, budget // max(1, n * m))
    else:
        width = 1  # random numbers: one column at a time, a rule that does not depend on sizes
    if width >= p:
        return summer(arrays, A, B, rprod, rsum, block_size)
    C = arrays.zeros((m, p), A.dtype)
    for j in range(0, p, width):
        C = arrays.put(C, (slice(None), slice(j, j + width)),
                       summer(arrays, A, B[:, j:j + width], rprod, rsum, block_size))
    return C


def unit_model(hardware: Union[str, matrix_units.BlockFMA], rin: Rounder) -> matrix_units.BlockFMA:
    """The block-FMA model ``hardware=`` names, its input format that of ``rin``'s options (the
    output fp32 for a GPU name); refuses options the model cannot honour (``ValueError``) and
    other values of ``hardware`` (``TypeError``).  Shared by :func:`~pychop_compat.linalg.matmul` and
    :func:`~pychop_compat.linalg.lu`."""
    o = rin.options
    if not rin.deterministic or int(o.round or 1) != 1:
        raise ValueError("hardware= rounds the inputs as the matrix units read them (to nearest; tf32 "
                         f"toward zero): options must round to nearest without bit flips, got round={o.round}"
                         f"{', flip=1' if o.flip else ''}.")
    if o.explim == 0:  # the model's fp32 output has fp32's range: chop's unbounded exponent would be ignored
        raise ValueError("hardware= computes with the model's exponent ranges (fp32 output): options with "
                         "explim=0 (an unbounded exponent) cannot be honoured.")
    fmt = resolve(o, None, "double").spec.fmt
    return matrix_units.model_for_format(hardware, fmt.t, fmt.emax, f"options' format {o.format!r}",
                                         emin=fmt.emin, encoding=fmt.encoding)


def _unit_product(arrays: Arrays, A: Any, B: Any, spec: matrix_units.BlockFMA) -> Any:
    """``A @ B`` (2-D, in the operands' dtype and library, on their device) by the block-FMA model
    ``spec`` (:func:`pychop_compat.hardware.matmul`: inputs rounded as the model does)."""
    D = matrix_units.matmul(A, B, model=spec)  # float32 or float16 (the model's output), computed where A and B are
    if str(D.dtype).endswith("float16"):  # exactly: fp16's subnormals are normal float32 numbers
        D = arrays.xp.astype(D, arrays.xp.float32)
    if str(A.dtype).endswith("float32"):  # float_operands' rule: single for single operands
        return D
    if arrays.name == "jax":
        from ..engines import jax_engine

        return jax_engine.widen_float32(D)  # exactly: XLA's conversion flushes float32 subnormals
    return arrays.xp.astype(D, arrays.xp.float64)


def matmul_on(arrays: Arrays, A: Any, B: Any, options: OptionsLike = None, *, method: str = "recursive",
              accumulate: OptionsLike = None, block_size: int = 32, hardware: HardwareLike = None) -> Any:
    """:func:`~pychop_compat.linalg.matmul` computed by ``arrays``'s library (for linalg's other algorithms, which
    know it already); a 0-d array for two vectors."""
    A2, B2 = float_operands(arrays, A, B)
    if hardware is not None and (method != "recursive" or accumulate is not None):
        raise ValueError("hardware= computes every product as the matrix units do: give no method= "
                         "(other than 'recursive') and no accumulate= with it.")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, not {method!r}")
    if isinstance(block_size, bool) or not isinstance(block_size, (int, np.integer)) or block_size < 1:
        # (int() would truncate 2.5 to 2 without a word)
        raise ValueError(f"block_size must be a positive integer, got {block_size!r}.")
    a_vec, b_vec = A2.ndim == 1, B2.ndim == 1
    if a_vec:
        A2 = A2[None, :]
    if b_vec:
        B2 = B2[:, None]
    if A2.ndim != 2 or B2.ndim != 2:
        raise ValueError("matmul operands must be 1-D or 2-D")
    if A2.shape[1] != B2.shape[0]:
        raise ValueError(f"inner dimensions differ: {tuple(A2.shape)} @ {tuple(B2.shape)}")
    rin = Rounder(options, arrays)
    if hardware is not None:
        C = _unit_product(arrays, A2, B2, unit_model(hardware, rin))
    else:  # the operands rounded by rin, then every operation chopped
        rsum = rin if accumulate is None else Rounder(accumulate, arrays)
        rprod = None if method == "fma" or accumulate is not None else rin
        A2, B2 = rin(A2), rin(B2)
        (m, n), p = A2.shape, B2.shape[1]
        C = arrays.zeros((m, p), A2.dtype) if n == 0 else _product(arrays, method, A2, B2, rprod, rsum, block_size)
    if a_vec:
        C = C[0]
    if b_vec:
        C = C[..., 0]
    return C


@ieee
def matmul(
    A: ArrayLike,
    B: ArrayLike,
    options: OptionsLike = None,
    *,
    method: str = "recursive",
    accumulate: OptionsLike = None,
    block_size: int = 32,
    hardware: HardwareLike = None,
) -> np.ndarray:
    """Matrix product ``A @ B`` in simulated precision.

    Parameters
    ----------
    A, B : array_like
        Operands of shapes ``(m, n)`` and ``(n, p)``; 1-D operands are promoted
        as by :func:`numpy.matmul` (the promoted axis is removed from the result).
    options : chop options, str or None, optional
        Format and rounding of every operation (``None``: the persistent chop
        options).  ``A`` and ``B`` are first rounded to this format.
    method : {'recursive', 'fma', 'pairwise', 'blocked'}, optional
        How each inner product ``sum_k a_k b_k`` is evaluated, ``fl`` one chop call:
        ``'recursive'`` (default): ``s = fl(a_1 b_1)``, ``s = fl(s + fl(a_k b_k))``;
        ``'fma'``: ``s = fl(s + a_k b_k)``, one rounding per step (``s + a_k b_k``
        formed in double, as MATLAB's ``chop(s + a*b)``); ``'pairwise'``: the
        products summed pairwise, ``y_i = fl(x_{2i-1} + x_{2i})``, an odd last
        term carried over, until one is left (Higham, sec. 4.1); ``'blocked'``:
        blocks of ``block_size`` consecutive terms each summed recursively, then
        the block sums recursively in order.
    accumulate : chop options, str or None, optional
        Tensor-core style: ``A`` and ``B`` rounded to ``options``, the products
        formed exactly in double (not rounded; exact for significands of at most
        26 bits) and every addition rounded to ``accumulate``, in the order of
        ``method`` (a one-term sum is that term rounded; ``'fma'`` is then ``'recursive'``).
    block_size : int, optional
        Block size for ``method='blocked'`` (default 32).
    hardware : str or hardware.BlockFMA, optional
        Compute the product as the matrix units of a GPU do, by
        :func:`pychop_compat.hardware.matmul` (block FMAs, one rounding per
        block) instead of chopped scalar steps.  A GPU name (``'H100'``, see
        :func:`pychop_compat.hardware.model`): its model for inputs in the format
        of ``options`` (``'h'``: fp16, ``'bf16'``, ``'tf32'``,
        ``'float8_e4m3fn'``, ``'float8_e5m2'``) and fp32 output; or a
        :class:`~pychop_compat.hardware.BlockFMA`, whose input format
        ``options`` must have.  ``A`` and ``B`` are rounded as the model reads
        them (to nearest; tf32 toward zero; the model's subnormal handling), so
        ``options`` must round to nearest without bit flips and keep the
        format's exponent range (no ``explim=0``), and ``method`` and
        ``accumulate`` must be left out.  NumPy data is computed in place; torch,
        CuPy and JAX data through a copy on the host.

    Returns
    -------
    ndarray
        The product, single for single inputs, else double; a torch tensor,
        CuPy or JAX array for such inputs, on their device.

    Notes
    -----
    The loop runs over the inner index ``k`` only.  Order of chop calls (and so
    of random draws): ``A`` then ``B``; then for ``'recursive'``, for each ``k``,
    the ``m x p`` products, then the sums; ``'fma'``: one call per ``k``;
    ``'pairwise'``: one call on all products, stacked ``(n, m, p)``, then one per
    level; ``'blocked'``: for each position ``j`` within a block, the products of
    all blocks having a ``j``-th term (stacked ``(blocks, m, p)``) then their sums,
    then one call per block-sum addition.  With stochastic rounding or bit flips,
    ``'pairwise'`` and ``'blocked'`` (``p > 1``) make these calls column by column
    of ``C`` (those of ``matvec(A, B[:, j])``).  Error bounds for round to
    nearest (Higham, ch. 3-4): ``|C - AB| <= gamma_n |A||B|`` (``'recursive'``,
    ``'fma'``), ``gamma_{ceil(log2 n) + 1}`` (``'pairwise'``),
    ``gamma_{b + ceil(n/b) - 1}`` (``'blocked'``).
    """
    return matmul_on(arrays_for(A, B), A, B, options, method=method, accumulate=accumulate,
                     block_size=block_size, hardware=hardware)


@ieee
def matvec(A: ArrayLike, x: ArrayLike, options: OptionsLike = None, **kwargs: Any) -> np.ndarray:
    """Matrix-vector product ``A @ x`` in simulated precision: :func:`matmul` with ``x`` 1-D
    (``kwargs``: ``method``, ``accumulate``, ``block_size``, ``hardware``)."""
    arrays = arrays_for(A, x)
    if arrays.asarray(x).ndim != 1:
        raise ValueError("x must be 1-D")
    return matmul_on(arrays, A, x, options, **kwargs)


@ieee
def dot(x: ArrayLike, y: ArrayLike, options: OptionsLike = None, **kwargs: Any) -> np.floating:
    """Inner product ``x @ y`` of two vectors in simulated precision: :func:`matmul` on 1-D operands,
    returning a NumPy scalar (a 0-d array of the library for torch, CuPy and JAX arrays)."""
    arrays = arrays_for(x, y)
    if arrays.asarray(x).ndim != 1 or arrays.asarray(y).ndim != 1:
        raise ValueError("x and y must be 1-D")
    out = matmul_on(arrays, x, y, options, **kwargs)
    return out[()] if arrays.name == "numpy" else out
