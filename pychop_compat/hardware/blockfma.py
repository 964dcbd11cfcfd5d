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

(AMD's variants: the addend added after the products, ``late_addend_bits``; the products in two
interleaved groups, ``odd_even_groups``; exact and pairwise sums, ``block_sum``: see
:class:`~pychop_compat.hardware.BlockFMA`.  In the late addition the addend keeps every bit of
its output-format value until it is aligned, as in step 3: with fewer accumulator than output
fraction bits, its bits below the sum's last bit are rounded toward minus infinity as those of
the smaller operand are, even where it is the larger one.  The anchor's CDNA3 model always has
fp32's 23 and never drops any.)

An inner product with a NaN, or with infinite products or addend of both signs,
is NaN; otherwise one with an infinite one is that infinity (checked over the whole
inner product first, as the anchor does).  An exact zero sum is +0.

The rule is written once, against an array namespace (``kernels.xp``): NumPy arrays,
and torch, CuPy and JAX arrays on their own device, run the same operations (exact
integer significands, shifts and int64 sums, read and made from float64 bits), a few
rows of the result at a time (no (M, N, K) array).  For NumPy with Numba installed (and
the CPU engine not set to ``'numpy'``, see ``pychop_compat.kernels.compiled.cpu_engine``)
the blocks run compiled (``kernels.numba_blockfma``, the same bits), and so do aligned blocks
on CUDA torch tensors and CuPy arrays with Triton and torch installed
(``kernels.triton_blockfma``, the same bits); the namespace implementation is the fallback
and the oracle the tests compare them with.
"""

from __future__ import annotations

import functools
import numbers
from typing import Any, Callable, Optional, Tuple, Union

import numpy as np

from ..formats import Format, catalogue_format
from ..kernels import compiled
from ..kernels.xp import Namespace, exact_float32, exact_float64, library_namespace
from ..libraries import array_library
from ..rounding import round_to_format
from .models import INPUT_FORMATS, OUTPUT_FORMATS, BlockFMA, model as preset_model

__all__ = ["matmul", "block_dot"]

_CPFLOAT_NEAREST, _CPFLOAT_TOWARD_ZERO = 1, 4
#: Array libraries whose arrays the model computes on their own device.
_DEVICE_LIBRARIES = ("torch", "cupy", "jax")
#: Elements of one work array of the generic path (rows of the result at a time times N times
#: fma_size): about 8 MB each, whatever the size of the product.
_CHUNK_ELEMENTS = 1 << 20
#: What the compiled kernels (``kernels.numba_blockfma``, ``kernels.triton_blockfma``) are handed:
#: the exponent of a zero input, far below any real one (two of them sum below any real product
#: exponent, which is at least -600, and below the int32 floor NumPy starts from), and the codes
#: of the rounding modes in their parameters.
ZERO_EXPONENT = -(1 << 40)
ROUNDING_CODES = {"rz": 0, "rne": 1, "ru": 2, "rd": 3}
_NUMPY = library_namespace("numpy")


def _binary_exponents(ns: Namespace, magnitude: Any) -> Any:
    """floor(log2(magnitude)) of nonnegative finite float64 values, read from their bits (float64
    subnormals scaled up first); far below any real exponent for 0."""
    xp = ns.xp
    tiny = magnitude < 2.0 ** -1022
    scaled = xp.where(tiny, magnitude * 2.0 ** 64, magnitude)
    return (ns.bitcast(scaled, xp.int64) >> 52) - xp.where(tiny, 1023 + 64, 1023)


def _exponents(ns: Namespace, magnitude: Any, emin: int) -> Any:
    """floor(log2(magnitude)) clamped below at ``emin`` (for 0: ``emin``)."""
    return ns.xp.clip(_binary_exponents(ns, magnitude), min=emin)


def _powers_of_two(ns: Namespace, exponent: Any) -> Any:
    """``2.0**exponent`` (int64 ``exponent``), clipped to float64's normal range, from its bits."""
    return ns.bitcast((ns.xp.clip(exponent, min=-1022, max=1023) + 1023) << 52, ns.xp.float64)


def _ldexp(ns: Namespace, values: Any, exponent: Any) -> Any:
    """``values * 2**exponent`` in two exact steps (NumPy's ``ldexp`` wherever the result and the
    halfway product are normal: every use here)."""
    half = exponent // 2
    return values * _powers_of_two(ns, half) * _powers_of_two(ns, exponent - half)


def _significands(ns: Namespace, magnitude: Any, exponent: Any, fraction_bits: int) -> Any:
    """The integer ``magnitude * 2**(fraction_bits - exponent)`` (exact for values of the format)."""
    return ns.xp.astype(_ldexp(ns, magnitude, fraction_bits - exponent), ns.xp.int64)


def _floor_shift(ns: Namespace, values: Any, left: Any) -> Any:
    """``floor(values * 2**left)`` for int64 ``values``: rounded toward minus infinity, as an
    arithmetic right shift does (shifts past 63 give 0 or -1; no left shift of a nonzero term
    reaches 62: see :func:`_block` and :func:`_late_addend`)."""
    xp = ns.xp
    return xp.where(left >= 0, values << xp.clip(left, min=0, max=62), values >> xp.clip(-left, min=0, max=63))


def _round_scaled(ns: Namespace, total: Any, scale: Any, fraction_bits: int, out: Format,
                  rounding: str, subnormals: bool) -> Any:
    """``total * 2**scale`` (int64 ``total``) rounded to ``fraction_bits`` bits after the
    leading one, exponent floor ``out.emin``, overflow to infinity: as float64."""
    xp = ns.xp
    magnitude = xp.abs(total)
    # frexp's bit length, 0 for 0: the float64 conversion rounds a sum of 54 bits or more to
    # nearest, perhaps up to the next power of two (one too many), never down past one; the
    # integer comparison takes that back (BlockFMA accepts sums up to 2**62)
    estimate = xp.where(magnitude == 0, 0, _binary_exponents(ns, xp.astype(magnitude, xp.float64)) + 1)
    rounded_up = (magnitude != 0) & (magnitude < (xp.ones_like(magnitude) << xp.clip(estimate - 1, min=0, max=62)))
    bit_length = estimate - xp.astype(rounded_up, xp.int64)
    exponent = scale + bit_length - 1
    quantum = xp.clip(exponent, min=out.emin) - fraction_bits
    # past 63 every bit of |total| (below 2**62) is dropped just as at 63: kept 0, remainder
    # |total|, below the half of 2**63 (a cap any lower would keep some of a sum of 2**60 or more)
    dropped = xp.clip(quantum - scale, min=0, max=63)
    kept = magnitude >> dropped
    remainder = magnitude - (kept << dropped)
    negative = total < 0
    if rounding == "rz":
        up = xp.zeros_like(negative)
    elif rounding == "rne":
        one = xp.ones_like(dropped)
        half = xp.where(dropped > 0, one << xp.clip(dropped - 1, min=0), one)
        up = (dropped > 0) & ((remainder > half) | ((remainder == half) & ((kept & 1) == 1)))
    elif rounding == "ru":
        up = (remainder > 0) & ~negative
    else:
        up = (remainder > 0) & negative
    rounded = quantum > scale
    value = xp.where(rounded, _ldexp(ns, xp.astype(kept + xp.astype(up, xp.int64), xp.float64), quantum),
                     _ldexp(ns, xp.astype(magnitude, xp.float64), scale))
    value = xp.where(value >= 2.0 ** (out.emax + 1), xp.inf, value)
    if not subnormals:
        value = xp.where(value < 2.0 ** out.emin, 0.0, value)
    return xp.where(negative, -value, value)


def _block(ns: Namespace, a: Any, b: Any, c: Any, spec: BlockFMA, informat: Format, outformat: Format) -> Any:
    """One block: finite ``a``, ``b`` (..., fma_size; broadcastable) and addend ``c`` (...), as float64."""
    xp = ns.xp
    if spec.block_sum == "pairwise":
        return _pairwise_block(ns, a, b, c, spec, informat, outformat)
    if not spec.input_subnormals:
        a = xp.where(xp.abs(a) < 2.0 ** informat.emin, 0.0, a)
        b = xp.where(xp.abs(b) < 2.0 ** informat.emin, 0.0, b)
    if not spec.output_subnormals:
        c = xp.where(xp.abs(c) < 2.0 ** outformat.emin, 0.0, c)
    if spec.block_sum == "exact":
        return _exact_block(ns, a * b, c, spec, outformat)
    input_fraction = informat.t - 1
    magnitude_a, magnitude_b = xp.abs(a), xp.abs(b)
    exp_a, exp_b = _exponents(ns, magnitude_a, informat.emin), _exponents(ns, magnitude_b, informat.emin)
    products = _significands(ns, magnitude_a, exp_a, input_fraction) * \
        _significands(ns, magnitude_b, exp_b, input_fraction)
    product_exp = exp_a + exp_b
    # products = significand * 2**(product_scale)
    product_scale = product_exp - 2 * input_fraction
    if spec.normalised_products:
        product_exp = product_exp + xp.astype(products >= (1 << (2 * input_fraction + 1)), xp.int64)
    nonzero = products != 0
    negative = xp.signbit(a) != xp.signbit(b)
    acc_fraction = spec.accumulator_fraction_bits
    magnitude_c = xp.abs(c)
    exp_c = _exponents(ns, magnitude_c, spec.accumulator_emin)
    # the addend keeps its output-format bits until it is aligned: truncated with the products
    # (step 3), or rounded down in the late addition; not cut to accumulator_fraction_bits at
    # its own exponent first, nor at accumulator_emin (which only places it in the alignment):
    # its significand is read at its exponent floored at the output format's emin at most, where
    # every value of that format is an integer of addend_fraction bits
    value_exp = _exponents(ns, magnitude_c, min(spec.accumulator_emin, outformat.emin))
    addend_fraction = _addend_fraction(spec, outformat)
    addend = _significands(ns, magnitude_c, value_exp, addend_fraction)
    lowest = -(1 << 31)  # below every exponent: the largest of no terms

    def largest_of(group: slice) -> Any:
        return xp.max(xp.where(nonzero[..., group], product_exp[..., group], lowest), axis=-1)

    def aligned_sum(group: slice, largest: Any) -> Any:
        # the group's products truncated to multiples of 2**scale and added exactly
        scale = largest - acc_fraction - spec.extra_alignment_bits
        aligned = _floor_shift(ns, products[..., group], product_scale[..., group] - scale[..., None])
        return xp.sum(xp.where(nonzero[..., group], xp.where(negative[..., group], -aligned, aligned), 0), axis=-1)

    if spec.odd_even_groups:
        # two groups aligned apart; the one of the smaller exponent rounded toward minus infinity
        groups = [(group, xp.clip(largest_of(group), min=spec.min_alignment_exponent))
                  for group in (slice(0, None, 2), slice(1, None, 2))]
        largest = xp.maximum(groups[0][1], groups[1][1])
        total = sum(_floor_shift(ns, aligned_sum(group, exponent), exponent - largest) for group, exponent in groups)
    else:
        largest = largest_of(slice(None))
        if spec.late_addend_bits is None:
            largest = xp.maximum(largest, xp.where(c != 0, exp_c, lowest))
        largest = xp.clip(largest, min=spec.min_alignment_exponent)
        total = aligned_sum(slice(None), largest)
    scale = largest - acc_fraction - spec.extra_alignment_bits
    if spec.late_addend_bits is None:
        aligned_c = _floor_shift(ns, addend, value_exp - addend_fraction - scale)
        total = total + xp.where(xp.signbit(c), -aligned_c, aligned_c)
    else:
        total, scale = _late_addend(ns, total, largest, xp.where(xp.signbit(c), -addend, addend), exp_c,
                                    value_exp, addend_fraction, spec)
    # The result keeps no more fraction bits than the aligned terms had (fewer than fp32's
    # with negative extra bits: fp8 on Ada and Hopper).
    result_fraction = min(outformat.t - 1, acc_fraction + spec.extra_alignment_bits)
    return _round_scaled(ns, total, scale, result_fraction, outformat, spec.rounding, spec.output_subnormals)


def _addend_fraction(spec: BlockFMA, outformat: Format) -> int:
    """Fraction bits of the addend's significand before it is aligned with the products (or, with
    ``late_addend_bits``, with their sum): all of a value of the output format, and at least
    ``accumulator_fraction_bits`` (as many as before the alignment could keep: its left shift
    stays within ``extra_alignment_bits``, and ``late_addend_bits`` more in the late addition)."""
    return max(spec.accumulator_fraction_bits, outformat.t - 1)


def _two_sum(a: Any, b: Any) -> Tuple[Any, Any]:
    """``(s, e)`` with ``s = fl(a + b)`` and ``a + b = s + e`` exactly (Knuth's TwoSum: any order
    of magnitudes; exact for finite float64 that do not overflow)."""
    total = a + b
    b_part = total - a
    return total, (a - (total - b_part)) + (b - b_part)


def _rounded_from_float64(ns: Namespace, value: Any, residual: Any, outformat: Format, rounding: str,
                          subnormals: bool) -> Any:
    """``value + r`` rounded to ``outformat`` (23 fraction bits at most), where ``value`` is a
    finite float64 and ``r`` an exact remainder known only by its sign ``residual`` (-1, 0, +1),
    smaller than the distance from ``value`` to its float64 neighbour on that side.  ``value``
    is first rounded to odd on its own last bit (an even last bit moves one unit toward ``r``):
    with at least 2 bits more than the output's 24 that keeps what every rounding mode needs."""
    xp = ns.xp
    magnitude = xp.abs(value)
    exponent = _binary_exponents(ns, magnitude)
    significand = _significands(ns, magnitude, exponent, 52)
    sign = xp.where(value < 0, -1, 1)
    total = sign * significand + xp.where((significand & 1) == 0, xp.astype(residual, xp.int64), 0)
    # exponent is far below any real one for value 0 (its residual is 0 then: total is 0)
    result_fraction = min(outformat.t - 1, 23)
    return _round_scaled(ns, total, exponent - 52, result_fraction, outformat, rounding, subnormals)


def _exact_block(ns: Namespace, products: Any, c: Any, spec: BlockFMA, outformat: Format) -> Any:
    """``block_sum='exact'``: the exact sum of the exact float64 ``products`` (..., fma_size) and
    ``c`` (...), rounded once.  The terms are distilled into a nonoverlapping expansion
    (Shewchuk's Grow-Expansion: exact TwoSums), then added from the top until a step is inexact:
    that step's sum is within one unit of its last place of the exact sum, and its error gives
    the sign of the rest (every lower component is smaller than the error's last bit)."""
    xp = ns.xp
    terms = [c] + [products[..., index] for index in range(products.shape[-1])]
    expansion: list = []
    for term in terms:
        grown = []
        for component in expansion:
            term, error = _two_sum(term, component)
            grown.append(error)
        expansion = grown + [term]
    value = expansion[-1]
    residual = xp.zeros_like(value)
    inexact = xp.zeros_like(value, dtype=xp.bool)  # (on value's device)
    for component in reversed(expansion[:-1]):
        total, error = _two_sum(value, component)
        value = xp.where(inexact, value, total)
        residual = xp.where(inexact, residual, xp.sign(error))
        inexact = inexact | (error != 0)
    return _rounded_from_float64(ns, value, residual, outformat, spec.rounding, spec.output_subnormals)


def _pairwise_block(ns: Namespace, a: Any, b: Any, c: Any, spec: BlockFMA, informat: Format,
                    outformat: Format) -> Any:
    """``block_sum='pairwise'`` (AMD CDNA2): every product rounded to the output format, added in
    a pairwise tree, then to the addend ``c``, every sum rounded to the output format; without
    output subnormals a rounded product or addend below the smallest normal number is +0, a sum
    a zero of its sign.  ``c`` may be infinite or NaN (a previous block's result).  Each sum is
    exact as TwoSum's float64 sum and error, rounded through :func:`_rounded_from_float64`."""
    xp = ns.xp
    smallest_normal = 2.0 ** outformat.emin
    zero = xp.zeros_like(c)

    def rounded(value: Any, error: Any, subnormals: bool) -> Any:
        # value + error exactly (error: TwoSum's, below value's last bit)
        finite = xp.isfinite(value)
        result = _rounded_from_float64(ns, xp.where(finite, value, 0.0), xp.where(finite, xp.sign(error), 0.0),
                                       outformat, spec.rounding, subnormals)
        # a zero sum keeps its IEEE sign (-0 + -0 is -0); infinities and NaN pass
        return xp.where(finite & (value != 0), result, value)

    def added(x: Any, y: Any) -> Any:
        with np.errstate(invalid="ignore"):  # Inf - Inf in TwoSum's error, masked
            return rounded(*_two_sum(x, y), spec.output_subnormals)

    products = a * b  # exact
    if not spec.input_subnormals:
        tiny = 2.0 ** informat.emin
        products = xp.where((xp.abs(a) < tiny) | (xp.abs(b) < tiny), 0.0, products)
    terms = [rounded(products[..., index], zero, True) for index in range(products.shape[-1])]
    if not spec.output_subnormals:
        terms = [xp.where(xp.abs(term) < smallest_normal, 0.0, term) for term in terms]
        c = xp.where(xp.abs(c) < smallest_normal, 0.0, c)
    while len(terms) > 1:
        terms = [added(terms[index], terms[index + 1]) for index in range(0, len(terms), 2)]
    return added(c, terms[0])


def _late_addend(ns: Namespace, products: Any, largest: Any, addend: Any, exp_c: Any, value_exp: Any,
                 addend_fraction: int, spec: BlockFMA) -> Tuple[Any, Any]:
    """The sum of a block's aligned ``products`` (an integer times ``2**(largest - f - x)``) and the
    signed ``addend`` significand (times ``2**(value_exp - addend_fraction)``: every bit of the
    output-format value; ``exp_c`` its exponent in the alignment, at least accumulator_emin) as
    the late addition of ``spec.late_addend_bits`` makes it: the operand of the smaller exponent
    rounded toward minus infinity to the other's last bit, ``late_addend_bits`` more when the
    products are that one (with ``odd_even_groups`` an addend more than ``f + x + 1`` binades
    below adds nothing).  The sum's last bit is ``f + x`` bits below the larger exponent
    (``f + x + late_addend_bits`` when that is the addend's); an addend with bits below it (fewer
    accumulator than output fraction bits) is rounded toward minus infinity there too, whichever
    operand is the larger.  Returns the integer sum and its scale
    (f: ``accumulator_fraction_bits``, x: ``extra_alignment_bits``)."""
    xp = ns.xp
    assert spec.late_addend_bits is not None
    extra = spec.extra_alignment_bits
    products_smaller = largest < exp_c
    if spec.odd_even_groups:  # every bit of the addend below the products' last: dropped, not floored
        addend = xp.where(exp_c < largest - (spec.accumulator_fraction_bits + extra + 1), 0, addend)
    scale = xp.where(products_smaller, exp_c - spec.late_addend_bits, largest) - spec.accumulator_fraction_bits - extra
    # the products' sum has fewer than fma_size * 2**(f + x + 2) units of 2**(largest - f - x), the
    # addend fewer than 2**(f + x + 1) of 2**(exp_c - f - x) (its left shift, at most x +
    # late_addend_bits, as addend_fraction is at least f): at the sum's scale they stay below
    # 2**62 (BlockFMA refuses larger late_addend_bits)
    products = _floor_shift(ns, products, largest - spec.accumulator_fraction_bits - extra - scale)
    addend = _floor_shift(ns, addend, value_exp - addend_fraction - scale)
    return products + addend, scale


def _inner_products(ns: Namespace, a: Any, b: Any, c: Any, spec: BlockFMA) -> Any:
    """``sum(a * b, axis=-1) + c`` through the model, block after block: ``a``, ``b`` float64
    (..., K), broadcastable (one row of A against every column of B, or pairs), ``c`` float64 of
    the broadcast shape without K.  Non-finite terms give the module's special results; the
    blocks see them as zeros (their results are replaced)."""
    xp = ns.xp
    has_nan, plus, minus = _non_finite(xp, c[..., None])
    state = (has_nan, plus, minus, xp.where(xp.isfinite(c), c, 0.0))
    a, b = _padded(ns, a, spec.fma_size), _padded(ns, b, spec.fma_size)
    step = _compiled_step(ns, spec) if ns.name == "jax" else functools.partial(_block_step, ns, spec)
    for start in range(0, a.shape[-1], spec.fma_size):
        state = step(a[..., start:start + spec.fma_size], b[..., start:start + spec.fma_size], *state)
    return _special_or(xp, *state)


def _padding(inner: int, fma_size: int) -> int:
    """Zeros that make every block full: ``inner`` up to a multiple of ``fma_size``, one block at least."""
    return max(-(-inner // fma_size), 1) * fma_size - inner


def _padded(ns: Namespace, x: Any, fma_size: int) -> Any:
    """``x`` with :func:`_padding` zeros appended to its last axis."""
    import array_api_compat

    padding = _padding(x.shape[-1], fma_size)
    if padding == 0:
        return x
    zeros = ns.xp.zeros(tuple(x.shape[:-1]) + (padding,), dtype=ns.xp.float64, device=array_api_compat.device(x))
    return ns.xp.concat([x, zeros], axis=-1)


def _formats(spec: BlockFMA) -> Tuple[Format, Format]:
    """The catalogue formats of ``spec``'s inputs and output."""
    return catalogue_format(INPUT_FORMATS[spec.input_format]), catalogue_format(OUTPUT_FORMATS[spec.output_format])


def _block_step(ns: Namespace, spec: BlockFMA, a: Any, b: Any, has_nan: Any, plus: Any, minus: Any,
                accumulator: Any) -> Tuple[Any, Any, Any, Any]:
    """One block of every inner product: whether one has a NaN, a +Inf, a -Inf among its
    products so far, and the accumulator (the result of the block, kept where it overflowed)."""
    xp = ns.xp
    with np.errstate(invalid="ignore", over="ignore"):
        products = a * b
    block_nan, block_plus, block_minus = _non_finite(xp, products)
    # pairwise: IEEE arithmetic, an infinite or NaN result is the next addend
    overflowed = xp.isinf(accumulator) & (spec.block_sum != "pairwise")
    result = _block(ns, xp.where(xp.isfinite(a), a, 0.0), xp.where(xp.isfinite(b), b, 0.0),
                    xp.where(overflowed, 0.0, accumulator), spec, *_formats(spec))
    return (has_nan | block_nan, plus | block_plus, minus | block_minus,
            xp.where(overflowed, accumulator, result))


@functools.lru_cache(maxsize=64)
def _compiled_step(ns: Namespace, spec: BlockFMA) -> Callable[..., Tuple[Any, Any, Any, Any]]:
    """:func:`_block_step` through ``jax.jit``: compiled once per model and shape, not op by op
    (inside the caller's ``jit`` it is traced as it is)."""
    import jax

    return jax.jit(functools.partial(_block_step, ns, spec))


def _non_finite(xp: Any, terms: Any) -> Tuple[Any, Any, Any]:
    """Whether each row of ``terms`` (the last axis) has a NaN, a +Inf, a -Inf."""
    return xp.any(xp.isnan(terms), axis=-1), xp.any(terms == xp.inf, axis=-1), xp.any(terms == -xp.inf, axis=-1)


def _special_or(xp: Any, has_nan: Any, plus: Any, minus: Any, values: Any) -> Any:
    """NaN where an inner product has a NaN or infinite terms of both signs, else its infinity,
    else ``values``."""
    return xp.where(has_nan | (plus & minus), xp.nan, xp.where(plus, xp.inf, xp.where(minus, -xp.inf, values)))


def _compiled(spec: BlockFMA) -> bool:
    """Whether the compiled kernels compute ``spec``'s blocks here: Numba wanted, and aligned
    blocks whose every sum is exact in float64 (``numba_blockfma.exact_sums``; true of every
    preset), or AMD's unaligned ones rounded to nearest binary32 (the MI100's, MI210's, MI250's)."""
    if spec.block_sum != "aligned":
        return compiled.wanted() and spec.rounding == "rne" and spec.output_format == "fp32"
    return compiled.wanted() and _kernels().exact_sums(spec.accumulator_fraction_bits, spec.extra_alignment_bits,
                                                       spec.fma_size, spec.late_addend_bits or 0)


def _kernels() -> Any:
    """The compiled kernels' module (imports Numba on first use)."""
    from ..kernels import numba_blockfma

    return numba_blockfma


def _kernel_parameters(spec: BlockFMA, outformat: Format) -> np.ndarray:
    """``spec`` as the compiled kernels' integer parameters (Numba's and Triton's)."""
    result_fraction = min(outformat.t - 1, spec.accumulator_fraction_bits + spec.extra_alignment_bits)
    return np.array([spec.fma_size, spec.accumulator_fraction_bits, spec.extra_alignment_bits,
                     spec.min_alignment_exponent, spec.accumulator_emin, result_fraction, outformat.emin,
                     outformat.emax, ROUNDING_CODES[spec.rounding], spec.output_subnormals,
                     spec.normalised_products, -1 if spec.late_addend_bits is None else spec.late_addend_bits,
                     spec.odd_even_groups, _addend_fraction(spec, outformat)],
                    dtype=np.int64)


def _truncated(values: Any, spec: BlockFMA, informat: Format, ns: Namespace = _NUMPY) -> Tuple[Any, Any]:
    """Finite inputs as the compiled kernels take them (``numba_blockfma``, and
    ``triton_blockfma`` on torch tensors, ``ns``): ``sign * I * 2**(e - f)`` with ``I``, ``e``
    as :func:`_block` computes them (inputs below the format's emin flushed without input
    subnormals), and ``e``, or :data:`ZERO_EXPONENT` where ``I`` is 0; both contiguous (one
    compiled layout)."""
    xp = ns.xp
    magnitude = xp.abs(values)
    if not spec.input_subnormals:
        magnitude = xp.where(magnitude < 2.0 ** informat.emin, 0.0, magnitude)
    exponent = _exponents(ns, magnitude, informat.emin)
    significand = _significands(ns, magnitude, exponent, informat.t - 1)
    # _ldexp is NumPy's ldexp here: the values and the halfway factors are normal float64
    truncated = _ldexp(ns, xp.astype(significand, xp.float64), exponent - (informat.t - 1))
    truncated = xp.where(xp.signbit(values), -truncated, truncated)
    exponent = xp.where(significand != 0, exponent, ZERO_EXPONENT)
    if ns.name == "numpy":
        return np.ascontiguousarray(truncated), np.ascontiguousarray(exponent)
    return truncated.contiguous(), exponent.contiguous()  # torch's


def _unaligned_parameters(spec: BlockFMA) -> np.ndarray:
    """``spec`` as the unaligned kernels' integer parameters (``numba_blockfma._unaligned_inner``)."""
    return np.array([spec.fma_size, spec.block_sum == "pairwise", spec.input_subnormals, spec.output_subnormals],
                    dtype=np.int64)


def _suspect(ns: Namespace, A: Any, B: Any, C: Any) -> Any:
    """Where an inner product of rounded ``A`` (M, K) and ``B`` (K, N) plus ``C`` may be NaN or
    infinite: every product is finite where the largest of its row and column multiply to a
    finite number (true of any two finite values of an input format: at most 2**128 each)."""
    xp = ns.xp
    if A.shape[1] == 0:
        return ~xp.isfinite(C)
    with np.errstate(invalid="ignore", over="ignore"):
        largest = xp.max(xp.abs(A), axis=1)[:, None] * xp.max(xp.abs(B), axis=0)[None, :]
    return ~xp.isfinite(largest) | ~xp.isfinite(C)


def _compiled_matmul(A: np.ndarray, B: np.ndarray, C: np.ndarray, spec: BlockFMA) -> np.ndarray:
    """:func:`matmul`'s inner products on rounded ``A``, ``B`` and ``C`` (M, N), by the compiled
    kernel: the same bits, no (M, N, K) array."""
    kernels = _kernels()
    informat, outformat = _formats(spec)
    padding = _padding(A.shape[1], spec.fma_size)
    suspect = _suspect(_NUMPY, A, B, C)  # special_values says which of these are NaN or infinite
    QA, EA = _truncated(np.pad(np.where(np.isfinite(A), A, 0.0), [(0, 0), (0, padding)]), spec, informat)
    QB, EB = _truncated(np.pad(np.where(np.isfinite(B), B, 0.0), [(0, padding), (0, 0)]), spec, informat)
    D = np.where(np.isfinite(C), C, 0.0).astype(np.float64)
    if spec.block_sum == "aligned":
        kernels.block_matmul(QA, EA, QB, EB, D, _kernel_parameters(spec, outformat))
    else:
        kernels.unaligned_matmul(QA, np.ascontiguousarray(QB.T), D, _unaligned_parameters(spec))
    if suspect.any():
        rows, columns = np.nonzero(suspect)
        special = kernels.special_values(*(np.ascontiguousarray(x, dtype=np.float64) for x in (A, B, C)),
                                         rows, columns)
        D[rows, columns] = np.where(special != 0, special, D[rows, columns])
    return D


def _triton_wanted(ns: Namespace, A: Any, B: Any, spec: BlockFMA) -> bool:
    """Whether :func:`matmul` on ``A`` and ``B`` (of ``ns``'s library) takes the Triton kernel:
    torch tensors on CUDA or CuPy arrays, with Triton and torch installed, aligned blocks (exact
    int64 sums for every such model: ``triton_blockfma``), a result not empty."""
    if ns.name not in ("torch", "cupy") or spec.block_sum != "aligned" or 0 in (A.shape[0], B.shape[1]):
        return False
    from ..kernels import triton_blockfma

    return triton_blockfma.wanted(ns.name, A)


def _triton_matmul(ns: Namespace, A: Any, B: Any, C: Any, spec: BlockFMA) -> Any:
    """:func:`_compiled_matmul` on the device: rounded ``A``, ``B`` and ``C`` (M, N), torch
    tensors or CuPy arrays (seen as torch tensors through DLPack, no copy), prepared by
    :func:`_truncated` with torch and computed by ``triton_blockfma``; NaN and infinite inner
    products by the namespace's rule (:func:`_non_finite`, :func:`_special_or`) on the few
    inner products that may have them.  Returns float64 of ``ns``'s library."""
    import torch

    from ..kernels import triton_blockfma

    if ns.name == "cupy":
        A, B, C = (torch.from_dlpack(x) for x in (A, B, C))
    torch_ns = library_namespace("torch")
    informat, outformat = _formats(spec)
    A_padded = _padded(torch_ns, torch.where(torch.isfinite(A), A, 0.0), spec.fma_size)
    B_padded = _padded(torch_ns, torch.where(torch.isfinite(B), B, 0.0).T, spec.fma_size).T
    QA, EA = _truncated(A_padded, spec, informat, torch_ns)
    QB, EB = _truncated(B_padded, spec, informat, torch_ns)
    D = torch.where(torch.isfinite(C), C, 0.0).contiguous()
    parameters = _kernel_parameters(spec, outformat)
    triton_blockfma.block_matmul(QA, EA, QB, EB, D, parameters)
    rows, columns = torch.nonzero(_suspect(torch_ns, A, B, C), as_tuple=True)
    step = max(1, _CHUNK_ELEMENTS // (A.shape[1] + 1))
    for first in range(0, rows.shape[0], step):  # about _CHUNK_ELEMENTS terms at a time
        r, c = rows[first:first + step], columns[first:first + step]
        terms = torch.cat([A[r] * B[:, c].T, C[r, c][:, None]], dim=1)
        D[r, c] = _special_or(torch_ns.xp, *_non_finite(torch_ns.xp, terms), D[r, c])
    return ns.xp.from_dlpack(D) if ns.name == "cupy" else D


def _compiled_block_dot(a: np.ndarray, b: np.ndarray, c: np.ndarray, spec: BlockFMA) -> np.ndarray:
    """:func:`block_dot` on broadcast float64 ``a``, ``b`` and ``c`` by the compiled kernel."""
    informat, outformat = _formats(spec)
    padding = [(0, 0)] * (a.ndim - 1) + [(0, _padding(a.shape[-1], spec.fma_size))]
    a, b = np.pad(a, padding), np.pad(b, padding)
    accumulator = c.copy()
    with np.errstate(invalid="ignore", over="ignore"):
        terms = np.concatenate([a * b, accumulator[..., None]], axis=-1)
    special = _special_or(np, *_non_finite(np, terms), np.zeros_like(accumulator))
    finite = special == 0
    a = np.where(finite[..., None], a, 0.0)
    b = np.where(finite[..., None], b, 0.0)
    accumulator = np.where(finite, accumulator, 0.0)
    kernels = _kernels()
    QA, EA = _truncated(a.reshape(-1, a.shape[-1]), spec, informat)
    flat = accumulator.reshape(-1).copy()
    if spec.block_sum != "aligned":
        QB, _ = _truncated(b.reshape(-1, b.shape[-1]), spec, informat)
        kernels.unaligned_rows(QA, QB, flat, _unaligned_parameters(spec))
    else:
        QB, EB = _truncated(b.reshape(-1, b.shape[-1]).T, spec, informat)
        kernels.block_rows(QA, EA, QB, EB, flat, _kernel_parameters(spec, outformat))
    return np.where(finite, flat.reshape(accumulator.shape), special)


def _computing_namespace(*values: Any, narrow_jax: bool = False) -> Tuple[Namespace, Any]:
    """The namespace that computes a call with these arguments: that of the torch, CuPy or JAX
    arrays among them, else NumPy's (for NumPy data and everything NumPy converts); JAX's
    without 64-bit types only if ``narrow_jax`` (the caller computes on host copies then).  And
    the device of the first of them in its library (None for NumPy, and for a JAX array being traced)."""
    libraries = sorted({array_library(v) for v in values} & set(_DEVICE_LIBRARIES))
    if len(libraries) > 1:
        raise TypeError(f"hardware: arguments mix {' and '.join(libraries)} arrays; convert them to one library.")
    ns = library_namespace(libraries[0] if libraries else "numpy")
    if not ns.wide:
        from ..engines import jax_engine

        if not narrow_jax or any(array_library(v) == "jax" and jax_engine.is_traced(v) for v in values):
            raise ValueError("hardware on JAX arrays needs 64-bit integers and floats (on traced arrays, or for "
                             "block_dot): enable jax.config.update('jax_enable_x64', True) first.")
    if ns.name == "numpy":
        return ns, None
    import array_api_compat

    return ns, array_api_compat.device(next(v for v in values if array_library(v) == ns.name))


def _real_operand(ns: Namespace, device: Any, name: str, value: Any) -> Any:
    """``value`` as float64 of ``ns``'s library on ``device``, refusing what a tensor core cannot
    take instead of NumPy's coercions (a GPU name given where C goes, complex numbers whose
    imaginary part would be dropped)."""
    if isinstance(value, str):
        raise TypeError(f"{name} must be an array, not the string {value!r}"
                        + (" (give the GPU by keyword: model='H100')" if name == "C" else "") + ".")
    xp = ns.xp
    if ns.name != "numpy" and array_library(value) == ns.name:
        if not xp.isdtype(value.dtype, ("bool", "integral", "real floating")):
            raise TypeError(f"{name} must hold real numbers, got dtype {value.dtype}.")
        if ns.name == "torch":
            value = value.detach()  # the model's result has no gradient
        if ns.name == "jax":
            return _jax_float64(value)
        if ns.name == "cupy" and value.dtype == xp.float32:
            return exact_float64(ns, value)  # (CuPy's conversion flushes float32 subnormals)
        return xp.astype(value, xp.float64)
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers, got dtype {array.dtype}.")
    array = array.astype(np.float64, copy=False)
    return array if ns.name == "numpy" else xp.asarray(array, device=device)


def _check_scale_factor(ns: Namespace, name: str, value: Any) -> None:
    """Refuse an ``alpha`` or ``beta`` (``name``) that is no real number: a Python or NumPy real
    scalar, or a 0-d array of NumPy or of ``ns``'s library (another library's array would take
    over the arithmetic on the operands, or mix devices)."""
    if isinstance(value, numbers.Real):
        return
    library = array_library(value)
    if (isinstance(value, np.ndarray) or library in _DEVICE_LIBRARIES and library == ns.name) and value.ndim == 0:
        return
    shape = f" of shape {tuple(value.shape)}" if hasattr(value, "shape") else ""
    raise TypeError(f"{name} must be a real number (a Python or NumPy scalar, or a 0-d array of NumPy or of the "
                    f"operands' library), got {type(value).__module__}.{type(value).__qualname__}{shape}.")


def _jax_float64(value: Any) -> Any:
    """A JAX array as float64, exactly: XLA's conversions flush float32 and bfloat16 subnormals."""
    import jax

    from ..engines import jax_engine

    jnp = jax.numpy
    if value.dtype == jnp.bfloat16:  # its bits are the upper half of a float32's
        widened = jax.lax.bitcast_convert_type(value, jnp.uint16).astype(jnp.uint32) << 16
        value = jax.lax.bitcast_convert_type(widened, jnp.float32)
    if value.dtype == jnp.float32:
        return jax_engine.widen_float32(value)
    return value.astype(jnp.float64)


def _output(ns: Namespace, D: Any, spec: BlockFMA) -> Any:
    """The float64 results ``D`` (values of the output format) in its dtype, exactly (the
    conversions of XLA and CuPy to float32 flush subnormals: measured on an H200, 2026-11-27)."""
    if spec.output_format == "fp32" and ns.name in ("jax", "cupy"):
        return exact_float32(ns, D)
    return ns.xp.astype(D, ns.xp.float16 if spec.output_format == "fp16" else ns.xp.float32)


def block_dot(a: Any, b: Any, c: Any, spec: BlockFMA) -> Any:
    """Inner products ``sum(a * b, axis=-1) + c`` through the block-FMA model ``spec``.

    Parameters
    ----------
    a, b : array_like
        Values of ``spec.input_format`` (not rounded here), the same shape
        ``(..., K)``; the last axis is the inner dimension, padded with zeros to a
        multiple of ``spec.fma_size``.  NumPy data, or torch, CuPy or JAX arrays
        (computed on their device; JAX with ``jax_enable_x64``).
    c : array_like
        Addends, values of ``spec.output_format``, broadcastable to ``a.shape[:-1]``.
    spec : BlockFMA or str
        The model, or a GPU name for :func:`pychop_compat.hardware.model` (its model for
        fp16 inputs and fp32 output, as :func:`matmul`'s default).

    Returns
    -------
    array
        float64 array of shape ``a.shape[:-1]`` holding values of the output format: a
        NumPy array, or one of the inputs' library on their device.

    Raises
    ------
    TypeError
        For a ``spec`` that is neither a :class:`BlockFMA` nor a GPU name, and for data
        :func:`matmul` refuses.
    ValueError
        For ``a`` or ``b`` without an axis (no inner dimension), or shapes that do not broadcast.
    """
    spec = _model_of(spec, "spec")
    ns, device = _computing_namespace(a, b, c)
    xp = ns.xp
    a, b = xp.broadcast_arrays(_real_operand(ns, device, "a", a), _real_operand(ns, device, "b", b))
    if a.ndim == 0:
        raise ValueError("a and b must have at least one axis (the last is the inner dimension), got scalars.")
    c = xp.broadcast_to(_real_operand(ns, device, "c", c), a.shape[:-1])
    if ns.name == "numpy" and _compiled(spec):
        return _compiled_block_dot(a, b, c, spec)
    return _inner_products(ns, a, b, c, spec)


def _outer_products(ns: Namespace, A: Any, B: Any, C: Any, spec: BlockFMA) -> Any:
    """:func:`matmul`'s inner products on rounded ``A`` (M, K), ``B`` (K, N) and ``C`` (M, N),
    a few rows at a time: no (M, N, K) array, at most about :data:`_CHUNK_ELEMENTS` elements in
    one work array."""
    xp = ns.xp
    rows = max(1, _CHUNK_ELEMENTS // max(1, B.shape[1] * spec.fma_size))
    A, columns = _padded(ns, A, spec.fma_size), _padded(ns, xp.permute_dims(B, (1, 0)), spec.fma_size)[None, :, :]
    parts = [_inner_products(ns, A[first:first + rows, None, :], columns, C[first:first + rows], spec)
             for first in range(0, max(A.shape[0], 1), rows)]
    return parts[0] if len(parts) == 1 else xp.concat(parts, axis=0)


def _model_of(model: Any, name: str, inputs: Optional[str] = None, output: Optional[str] = None) -> BlockFMA:
    """``model`` (the argument ``name``) as a :class:`BlockFMA`: a GPU name through
    :func:`~pychop_compat.hardware.model` with the formats ``inputs`` and ``output`` (default fp16
    and fp32), a model as it is, anything else refused."""
    if isinstance(model, str):
        return preset_model(model, inputs or "fp16", output or "fp32")
    if not isinstance(model, BlockFMA):
        raise TypeError(f"{name} must be a GPU name such as 'H100' or a hardware.BlockFMA, "
                        f"not {type(model).__name__}.")
    return model


def matmul(A: Any, B: Any, C: Any = None, alpha: float = 1.0, beta: float = 1.0, *,
           model: Union[BlockFMA, str] = "H100", inputs: Optional[str] = None,
           output: Optional[str] = None) -> Any:
    """``D = alpha * A @ B + beta * C`` as the matrix units of a GPU compute it.

    As the anchor's ``GEMM.m`` does: ``alpha * A`` and ``B`` are rounded to the input
    format (to nearest, ties to even; tf32 toward zero, as tensor cores read fp32
    data), ``beta * C`` to the output format (fp16: to nearest; fp32: toward zero);
    each inner product then runs block by block through the model (see the module's
    description), the rounded result of a block being the addend of the next.

    Parameters
    ----------
    A : array_like, shape (M, K)
        NumPy data, or a torch, CuPy or JAX array: computed on its device (JAX with
        ``jax_enable_x64``; without it, eagerly on host copies), NumPy data of the
        other operands joining it.
    B : array_like, shape (K, N)
    C : array_like, optional
        Broadcastable to (M, N); default zero (None: no addend, ``beta`` unused).
    alpha, beta : float
        Scale factors: real numbers (Python or NumPy scalars, or 0-d arrays of NumPy or of the
        operands' library); ``beta`` defaults to 1: a given ``C`` is added, as ``torch.addmm``
        adds it; ``beta = 0`` still computes ``0 * C``, NaN where ``C`` is infinite or NaN,
        as ``GEMM.m`` does.
    model : BlockFMA or str
        A model, or a GPU name for :func:`pychop_compat.hardware.model`.
    inputs, output : str, optional
        With a GPU name: the format pair (default ``'fp16'`` and ``'fp32'``).
        With a model: must be its formats if given.

    Returns
    -------
    array
        Shape (M, N), dtype float32 for fp32 output and float16 for fp16 output: a NumPy
        array, or one of the operands' library on their device (torch: no gradient).

    Raises
    ------
    TypeError
        For a string or complex, object or text data in ``A``, ``B`` or ``C`` (a GPU name
        goes to ``model=``), arrays of two of torch, CuPy and JAX, a ``model`` that is
        neither a :class:`BlockFMA` nor a string, or an ``alpha`` or ``beta`` that is no real
        number of those kinds.
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
    spec = _model_of(model, "model", inputs, output)
    if not isinstance(model, str):
        if (inputs or spec.input_format, output or spec.output_format) != (spec.input_format, spec.output_format):
            raise ValueError("inputs and output must be the model's formats when a BlockFMA is given.")
    ns, device = _computing_namespace(A, B, C, narrow_jax=True)
    for name, factor in (("alpha", alpha), ("beta", beta)):
        _check_scale_factor(ns, name, factor)
    if not ns.wide:  # JAX without int64 and float64: NumPy computes on host copies (exact)
        import jax

        host = [np.asarray(x) if array_library(x) == "jax" else x for x in (A, B, C)]
        alpha, beta = (float(x) if array_library(x) == "jax" else x for x in (alpha, beta))  # (0-d, not traced)
        return jax.device_put(matmul(host[0], host[1], host[2], alpha, beta, model=spec), device)
    xp = ns.xp
    A, B = _real_operand(ns, device, "A", A), _real_operand(ns, device, "B", B)
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        raise ValueError(f"A and B must be matrices with A.shape[1] == B.shape[0], got {tuple(A.shape)} "
                         f"and {tuple(B.shape)}.")
    input_rounding = _CPFLOAT_TOWARD_ZERO if spec.input_format == "tf32" else _CPFLOAT_NEAREST
    informat = INPUT_FORMATS[spec.input_format]
    # GEMM.m rounds to the FNUZ formats (the MI300X's fp8) with CPFloat's saturation
    saturation = True if catalogue_format(informat).encoding == "fnuz" else None
    A_in = round_to_format(alpha * A, informat, input_rounding, saturation=saturation)
    B_in = round_to_format(B, informat, input_rounding, saturation=saturation)
    shape = (A.shape[0], B.shape[1])
    if C is None:
        C_out = xp.zeros(shape, dtype=xp.float64, device=device)
    else:
        output_rounding = _CPFLOAT_NEAREST if spec.output_format == "fp16" else _CPFLOAT_TOWARD_ZERO
        C_out = round_to_format(xp.asarray(xp.broadcast_to(beta * _real_operand(ns, device, "C", C), shape),
                                           copy=True),
                                OUTPUT_FORMATS[spec.output_format], output_rounding)
    if ns.name == "numpy" and _compiled(spec):
        D = _compiled_matmul(A_in, B_in, C_out, spec)
    elif _triton_wanted(ns, A_in, B_in, spec):
        D = _triton_matmul(ns, A_in, B_in, C_out, spec)
    else:
        D = _outer_products(ns, A_in, B_in, C_out, spec)
    return _output(ns, D, spec)
