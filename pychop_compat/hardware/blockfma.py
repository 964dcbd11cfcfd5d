"""D = alpha * A @ B + beta * C through a block-FMA model, in exact integer arithmetic.

Each block of ``fma_size`` products of one inner product is computed so:

1. every product ``a * b`` is exact: an integer significand ``Ia * Ib`` times a power
   of two, with exponent ``ea + eb`` (each factor's exponent clamped to its format's
   emin, the product not normalised unless asked);
2. the alignment exponent ``E`` is the largest exponent among the nonzero products
   and the addend ``c`` (the previous block's result, or C), at least
   ``min_alignment_exponent``;
3. every term is truncated (toward zero, in magnitude) to a multiple of
   ``2**(E - accumulator_fraction_bits - extra_alignment_bits)`` and the signed
   terms are added exactly (an int64 sum: no carry is lost);
4. the sum is rounded once to the output format, with subnormals, keeping at most
   ``accumulator_fraction_bits + extra_alignment_bits`` fraction bits; a result of
   ``2**(emax + 1)`` or more in magnitude is an infinity (in every rounding mode,
   as the anchor's model does).

An inner product with a NaN, or with infinite products or addend of both signs,
is NaN; otherwise one with an infinite one is that infinity (checked over the whole
inner product first, as the anchor does).  An exact zero sum is +0.

With Numba installed (and the CPU engine not set to ``'numpy'``, see
``pychop_compat.kernels.compiled.cpu_engine``) the blocks run compiled
(``kernels.numba_blockfma``, the same bits without an (M, N, K) array); this NumPy
implementation is the fallback and the oracle the tests compare it with.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple, Union

import numpy as np

from ..formats import Format, catalogue_format
from ..kernels import compiled
from ..rounding import round_to_format
from .models import INPUT_FORMATS, OUTPUT_FORMATS, BlockFMA, model as preset_model

__all__ = ["matmul", "block_dot"]

_CPFLOAT_NEAREST, _CPFLOAT_TOWARD_ZERO = 1, 4


def _exponents(magnitude: np.ndarray, emin: int) -> np.ndarray:
    """floor(log2(magnitude)) clamped below at ``emin`` (for 0: ``emin``)."""
    _, exponent = np.frexp(magnitude)
    return np.maximum(exponent.astype(np.int64) - 1, emin)


def _significands(magnitude: np.ndarray, exponent: np.ndarray, fraction_bits: int) -> np.ndarray:
    """The integer ``magnitude * 2**(fraction_bits - exponent)`` (exact for values of the format)."""
    return np.ldexp(magnitude, fraction_bits - exponent).astype(np.int64)


def _shift(values: np.ndarray, left: np.ndarray) -> np.ndarray:
    """``floor(values * 2**left)`` for nonnegative int64 ``values`` (right shifts past 62 give 0)."""
    right = np.clip(-left, 0, 62)
    return np.where(left >= 0, values << np.maximum(left, 0), values >> right)


def _round_scaled(total: np.ndarray, scale: np.ndarray, fraction_bits: int, out: Format,
                  rounding: str, subnormals: bool) -> np.ndarray:
    """``total * 2**scale`` (int64 ``total``) rounded to ``fraction_bits`` bits after the
    leading one, exponent floor ``out.emin``, overflow to infinity: as float64."""
    magnitude = np.abs(total)
    _, bit_length = np.frexp(magnitude.astype(np.float64))  # exact: |total| < 2**53
    exponent = scale + bit_length.astype(np.int64) - 1
    quantum = np.maximum(exponent, out.emin) - fraction_bits
    dropped = np.clip(quantum - scale, 0, 60)
    kept = magnitude >> dropped
    remainder = magnitude - (kept << dropped)
    negative = total < 0
    if rounding == "rz":
        up = np.zeros(total.shape, dtype=bool)
    elif rounding == "rne":
        half = np.where(dropped > 0, np.int64(1) << np.maximum(dropped - 1, 0), 1)
        up = (dropped > 0) & ((remainder > half) | ((remainder == half) & (kept % 2 == 1)))
    elif rounding == "ru":
        up = (remainder > 0) & ~negative
    else:
        up = (remainder > 0) & negative
    rounded = quantum > scale
    value = np.where(rounded, np.ldexp((kept + up).astype(np.float64), quantum),
                     np.ldexp(magnitude.astype(np.float64), scale))
    value = np.where(value >= 2.0 ** (out.emax + 1), np.inf, value)
    if not subnormals:
        value = np.where(value < 2.0 ** out.emin, 0.0, value)
    return np.where(negative, -value, value)


def _block(a: np.ndarray, b: np.ndarray, c: np.ndarray, spec: BlockFMA, informat: Format,
           outformat: Format) -> np.ndarray:
    """One block: finite ``a``, ``b`` (..., fma_size) and addend ``c`` (...), as float64."""
    if not spec.input_subnormals:
        a = np.where(np.abs(a) < 2.0 ** informat.emin, 0.0, a)
        b = np.where(np.abs(b) < 2.0 ** informat.emin, 0.0, b)
    if not spec.output_subnormals:
        c = np.where(np.abs(c) < 2.0 ** outformat.emin, 0.0, c)
    input_fraction = informat.t - 1
    exp_a, exp_b = _exponents(np.abs(a), informat.emin), _exponents(np.abs(b), informat.emin)
    products = _significands(np.abs(a), exp_a, input_fraction) * _significands(np.abs(b), exp_b, input_fraction)
    product_exp = exp_a + exp_b
    # products = significand * 2**(product_scale)
    product_scale = product_exp - 2 * input_fraction
    if spec.normalised_products:
        product_exp = product_exp + (products >= np.int64(1) << (2 * input_fraction + 1))
    nonzero = products != 0
    acc_fraction = spec.accumulator_fraction_bits
    exp_c = _exponents(np.abs(c), spec.accumulator_emin)
    addend = _significands(np.abs(c), exp_c, acc_fraction)
    lowest = np.int64(np.iinfo(np.int32).min)
    largest = np.max(np.where(nonzero, product_exp, lowest), axis=-1)
    largest = np.maximum(largest, np.where(c != 0, exp_c, lowest))
    largest = np.maximum(largest, spec.min_alignment_exponent)
    scale = largest - acc_fraction - spec.extra_alignment_bits
    aligned = _shift(products, product_scale - scale[..., None])
    signs = np.where(np.signbit(a) != np.signbit(b), -1, 1)
    total = np.sum(np.where(nonzero, signs * aligned, 0), axis=-1)
    aligned_c = _shift(addend, exp_c - acc_fraction - scale)
    total = total + np.where(np.signbit(c), -aligned_c, aligned_c)
    # The result keeps no more fraction bits than the aligned terms had (fewer than fp32's
    # with negative extra bits: fp8 on Ada and Hopper).
    result_fraction = min(outformat.t - 1, acc_fraction + spec.extra_alignment_bits)
    return _round_scaled(total, scale, result_fraction, outformat, spec.rounding, spec.output_subnormals)


def _special(products: np.ndarray, c: np.ndarray) -> np.ndarray:
    """NaN or an infinity where an inner product has a NaN or infinite term, else 0."""
    terms = np.concatenate([products, c[..., None]], axis=-1)
    has_nan = np.isnan(terms).any(axis=-1)
    plus, minus = (terms == np.inf).any(axis=-1), (terms == -np.inf).any(axis=-1)
    return np.where(has_nan | (plus & minus), np.nan, np.where(plus, np.inf, np.where(minus, -np.inf, 0.0)))


def _compiled(spec: BlockFMA) -> bool:
    """Whether the compiled kernel computes ``spec``'s blocks here: Numba wanted, and every
    block sum exact in float64 (``numba_blockfma.exact_sums``; true of every preset)."""
    return compiled.wanted() and _kernels().exact_sums(spec.accumulator_fraction_bits,
                                                       spec.extra_alignment_bits, spec.fma_size)


def _kernels() -> Any:
    """The compiled kernels' module (imports Numba on first use)."""
    from ..kernels import numba_blockfma

    return numba_blockfma


def _kernel_parameters(spec: BlockFMA, informat: Format, outformat: Format) -> np.ndarray:
    """``spec`` as the compiled kernels' integer parameters."""
    result_fraction = min(outformat.t - 1, spec.accumulator_fraction_bits + spec.extra_alignment_bits)
    return np.array([spec.fma_size, spec.accumulator_fraction_bits, spec.extra_alignment_bits,
                     spec.min_alignment_exponent, spec.accumulator_emin, result_fraction, outformat.emin,
                     outformat.emax, _kernels().ROUNDING_CODES[spec.rounding], spec.output_subnormals,
                     spec.normalised_products], dtype=np.int64)


def _truncated(values: np.ndarray, spec: BlockFMA, informat: Format) -> Tuple[np.ndarray, np.ndarray]:
    """Finite inputs as the compiled kernels take them (``numba_blockfma``): ``sign * I *
    2**(e - f)`` with ``I``, ``e`` as :func:`_block` computes them (inputs below the format's
    emin flushed without input subnormals), and ``e``, or ``ZERO_EXPONENT`` where ``I`` is 0."""
    magnitude = np.abs(values)
    if not spec.input_subnormals:
        magnitude = np.where(magnitude < 2.0 ** informat.emin, 0.0, magnitude)
    exponent = _exponents(magnitude, informat.emin)
    significand = _significands(magnitude, exponent, informat.t - 1)
    truncated = np.copysign(np.ldexp(significand.astype(np.float64), exponent - (informat.t - 1)), values)
    exponent = np.where(significand != 0, exponent, _kernels().ZERO_EXPONENT)
    return np.ascontiguousarray(truncated), np.ascontiguousarray(exponent)  # one compiled layout


def _compiled_matmul(A: np.ndarray, B: np.ndarray, C: np.ndarray, spec: BlockFMA) -> np.ndarray:
    """:func:`matmul`'s ``block_dot`` on rounded ``A``, ``B`` and ``C`` (M, N), by the compiled
    kernel: the same bits, no (M, N, K) array."""
    kernels = _kernels()
    informat = catalogue_format(INPUT_FORMATS[spec.input_format])
    outformat = catalogue_format(OUTPUT_FORMATS[spec.output_format])
    inner = A.shape[1]
    padding = max(-(-inner // spec.fma_size), 1) * spec.fma_size - inner
    # Every product is finite where the largest of its row and column multiply to a finite
    # number (true of any two finite values of an input format: at most 2**128 each); elsewhere
    # special_values says which inner products are NaN or infinite.
    with np.errstate(invalid="ignore", over="ignore"):
        suspect = ~np.isfinite(np.abs(A).max(axis=1, initial=0.0)[:, None] * np.abs(B).max(axis=0, initial=0.0)
                               ) | ~np.isfinite(C)
    QA, EA = _truncated(np.pad(np.where(np.isfinite(A), A, 0.0), [(0, 0), (0, padding)]), spec, informat)
    QB, EB = _truncated(np.pad(np.where(np.isfinite(B), B, 0.0), [(0, padding), (0, 0)]), spec, informat)
    D = np.where(np.isfinite(C), C, 0.0).astype(np.float64)
    kernels.block_matmul(QA, EA, QB, EB, D, _kernel_parameters(spec, informat, outformat))
    if suspect.any():
        rows, columns = np.nonzero(suspect)
        special = kernels.special_values(*(np.ascontiguousarray(x, dtype=np.float64) for x in (A, B, C)),
                                         rows, columns)
        D[rows, columns] = np.where(special != 0, special, D[rows, columns])
    return D


def block_dot(a: Any, b: Any, c: Any, spec: BlockFMA) -> np.ndarray:
    """Inner products ``sum(a * b, axis=-1) + c`` through the block-FMA model ``spec``.

    Parameters
    ----------
    a, b : array_like
        Values of ``spec.input_format`` (not rounded here), the same shape
        ``(..., K)``; the last axis is the inner dimension, padded with zeros to a
        multiple of ``spec.fma_size``.
    c : array_like
        Addends, values of ``spec.output_format``, broadcastable to ``a.shape[:-1]``.
    spec : BlockFMA
        The model.

    Returns
    -------
    numpy.ndarray
        float64 array of shape ``a.shape[:-1]`` holding values of the output format.
    """
    informat = catalogue_format(INPUT_FORMATS[spec.input_format])
    outformat = catalogue_format(OUTPUT_FORMATS[spec.output_format])
    a, b = np.broadcast_arrays(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
    inner = a.shape[-1]
    blocks = max(-(-inner // spec.fma_size), 1)
    padding = [(0, 0)] * (a.ndim - 1) + [(0, blocks * spec.fma_size - inner)]
    a, b = np.pad(a, padding), np.pad(b, padding)
    accumulator = np.broadcast_to(np.asarray(c, dtype=np.float64), a.shape[:-1]).copy()
    with np.errstate(invalid="ignore"):
        special = _special(a * b, accumulator)
    finite = special == 0
    a = np.where(finite[..., None], a, 0.0)
    b = np.where(finite[..., None], b, 0.0)
    accumulator = np.where(finite, accumulator, 0.0)
    if _compiled(spec):
        kernels = _kernels()
        QA, EA = _truncated(a.reshape(-1, a.shape[-1]), spec, informat)
        QB, EB = _truncated(b.reshape(-1, b.shape[-1]).T, spec, informat)
        flat = accumulator.reshape(-1).copy()
        kernels.block_rows(QA, EA, QB, EB, flat, _kernel_parameters(spec, informat, outformat))
        return np.where(finite, flat.reshape(accumulator.shape), special)
    for start in range(0, blocks * spec.fma_size, spec.fma_size):
        stop = start + spec.fma_size
        overflowed = np.isinf(accumulator)
        result = _block(a[..., start:stop], b[..., start:stop], np.where(overflowed, 0.0, accumulator),
                        spec, informat, outformat)
        accumulator = np.where(overflowed, accumulator, result)
    return np.where(finite, accumulator, special)



def _real_operand(name: str, value: Any) -> np.ndarray:
    """``value`` as float64, refusing what a tensor core cannot take instead of NumPy's coercions
    (a GPU name given where C goes, complex numbers whose imaginary part would be dropped)."""
    if isinstance(value, str):
        raise TypeError(f"{name} must be an array, not the string {value!r}"
                        + (" (give the GPU by keyword: model='H100')" if name == "C" else "") + ".")
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers, got dtype {array.dtype}.")
    return array.astype(np.float64, copy=False)


def matmul(A: Any, B: Any, C: Any = None, alpha: float = 1.0, beta: float = 0.0, *,
           model: Union[BlockFMA, str] = "H100", inputs: Optional[str] = None,
           output: Optional[str] = None) -> np.ndarray:
    """``D = alpha * A @ B + beta * C`` as the matrix units of a GPU compute it.

    As the anchor's ``GEMM.m`` does: ``alpha * A`` and ``B`` are rounded to the input
    format (to nearest, ties to even; tf32 toward zero, as tensor cores read fp32
    data), ``beta * C`` to the output format (fp16: to nearest; fp32: toward zero);
    each inner product then runs block by block through the model (see the module's
    description), the rounded result of a block being the addend of the next.

    Parameters
    ----------
    A : array_like, shape (M, K)
    B : array_like, shape (K, N)
    C : array_like, optional
        Broadcastable to (M, N); default zero.
    alpha, beta : float
        Scale factors.
    model : BlockFMA or str
        A model, or a GPU name for :func:`pychop_compat.hardware.model`.
    inputs, output : str, optional
        With a GPU name: the format pair (default ``'fp16'`` and ``'fp32'``).
        With a model: must be its formats if given.

    Returns
    -------
    numpy.ndarray
        Shape (M, N), dtype float32 for fp32 output and float16 for fp16 output.

    Raises
    ------
    TypeError
        For a string or complex, object or text data in ``A``, ``B`` or ``C`` (a GPU name
        goes to ``model=``).
    ValueError
        For shapes that do not multiply, or a GPU or format pair the anchor does not model.

    Examples
    --------
    >>> import numpy as np
    >>> from pychop_compat import hardware
    >>> a = np.array([[1.0, 2.0**-12, 2.0**-12, 2.0**-12]])
    >>> b = a.T  # products 1 and three times 2**-24
    >>> hardware.matmul(a, b, model='V100')  # 23 bits after the leading one: 2**-24 truncated
    array([[1.]], dtype=float32)
    >>> hardware.matmul(a, b, model='H100')  # two extra bits keep them: 1 + 3 * 2**-24, truncated
    array([[1.0000001]], dtype=float32)
    """
    if isinstance(model, str):
        spec = preset_model(model, inputs or "fp16", output or "fp32")
    else:
        spec = model
        if (inputs, output) != (None, None) and (inputs or spec.input_format, output or spec.output_format) \
                != (spec.input_format, spec.output_format):
            raise ValueError("inputs and output must be the model's formats when a BlockFMA is given.")
    A, B = _real_operand("A", A), _real_operand("B", B)
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        raise ValueError(f"A and B must be matrices with A.shape[1] == B.shape[0], got {A.shape} and {B.shape}.")
    input_rounding = _CPFLOAT_TOWARD_ZERO if spec.input_format == "tf32" else _CPFLOAT_NEAREST
    informat = INPUT_FORMATS[spec.input_format]
    A_in = round_to_format(alpha * A, informat, input_rounding)
    B_in = round_to_format(B, informat, input_rounding)
    if C is None:
        C_out = np.zeros((A.shape[0], B.shape[1]))
    else:
        output_rounding = _CPFLOAT_NEAREST if spec.output_format == "fp16" else _CPFLOAT_TOWARD_ZERO
        C_out = round_to_format(np.broadcast_to(beta * _real_operand("C", C),
                                                (A.shape[0], B.shape[1])).copy(),
                                OUTPUT_FORMATS[spec.output_format], output_rounding)
    if _compiled(spec):
        D = _compiled_matmul(A_in, B_in, C_out, spec)
    else:
        D = block_dot(A_in[:, None, :], B_in.T[None, :, :], C_out, spec)
    return D.astype(np.float16 if spec.output_format == "fp16" else np.float32)
