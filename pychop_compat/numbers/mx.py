"""OCP Microscaling (MX) formats, specification v1.0: blocks sharing an E8M0 scale.

``shared_exp = floor(log2(max_i |V_i|)) - emax_elem``, ``X = 2^shared_exp`` and
``P_i = V_i / X`` rounded to the element format (clamped to +-max); the choices the
specification leaves open are its reference implementation's (see :doc:`/numbers`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

from ..formats import Format, catalogue_format
from ._common import Blocks, HostArray, check_int, check_mode, random_sources, shift
from .fixed import fixed_point_codes

__all__ = ["mx_quantize", "MXElement", "mx_element", "MX_ELEMENT_NAMES"]

#: E8M0's exponent range.
SCALE_EMIN, SCALE_EMAX = -127, 127


@dataclass(frozen=True)
class MXElement:
    """An MX element type: its name, its floating-point format (None for INT8) and ``emax_elem``."""

    name: str
    format: Optional[Format]
    emax: int


_ELEMENTS = {
    "e4m3": ("float8_e4m3fn", "mxfp8_e4m3", "fp8_e4m3"),
    "e5m2": ("float8_e5m2", "mxfp8_e5m2", "fp8_e5m2"),
    "e2m3": ("float6_e2m3fn", "mxfp6_e2m3", "fp6_e2m3"),
    "e3m2": ("float6_e3m2fn", "mxfp6_e3m2", "fp6_e3m2"),
    "e2m1": ("float4_e2m1fn", "mxfp4_e2m1", "mxfp4", "fp4_e2m1"),
    "int8": ("mxint8",),
}

#: Every accepted spelling of an MX element type.
MX_ELEMENT_NAMES: tuple[str, ...] = tuple(n for short, more in _ELEMENTS.items() for n in (short,) + more)


def mx_element(name: str) -> MXElement:
    """The MX element type called ``name`` (e.g. ``'e4m3'``, ``'float8_e4m3fn'``, ``'mxfp4'``, ``'int8'``).

    >>> from pychop_compat.numbers import mx_element
    >>> mx_element('mxfp4').emax, mx_element('float8_e4m3fn').format.xmax
    (2, 448.0)
    """
    for short, more in _ELEMENTS.items():
        if name == short or name in more:
            if short == "int8":
                return MXElement("int8", None, 0)
            fmt = catalogue_format(more[0])
            return MXElement(short, fmt, fmt.emax)
    raise ValueError(f"Unknown MX element format {name!r}. Allowed: {', '.join(map(repr, MX_ELEMENT_NAMES))}.")


def quantize_elements(scaled: np.ndarray, element: MXElement, mode: int, sources: Any) -> np.ndarray:
    """The elements ``P_i`` of the scaled values (float64): rounded to the element format by
    ``mode``, overflow clamped to the largest magnitude."""
    if element.format is None:  # INT8: k * 2^-6, |k| <= 127
        codes = fixed_point_codes(scaled, 8, 6, True, "saturate", mode, sources)
        return np.ldexp(np.clip(codes, -127, 127), -6)
    from ..engines.dispatch import round_array
    from ..rounding import make_spec

    spec = make_spec(element.format, mode, saturation=True)
    return round_array(scaled, spec, sources)


def block_scales(values: np.ndarray, blocks: Blocks, emax_elem: int, emin: int = SCALE_EMIN,
                 emax: int = SCALE_EMAX) -> np.ndarray:
    """Per-block shared exponents ``floor(log2(max|V|)) - emax_elem`` clamped below to ``emin``;
    NaN for blocks with NaN/Inf or an exponent above ``emax`` (float64, per-block shape)."""
    amax = blocks.block_max(np.abs(values))
    finite = np.isfinite(amax)
    exponent = np.frexp(np.where(finite, amax, 1.0))[1] - 1 - emax_elem  # frexp: exact floor(log2)
    shared = np.array(np.maximum(np.where(amax > 0, exponent, emin), emin), dtype=np.float64)
    shared[~finite | (shared > emax)] = np.nan
    return shared


def mx_quantize(x: Any, element_format: str, block_size: int = 32, axis: int = -1, *, round: int = 1,
                rng: Optional[np.random.Generator] = None, randfunc: Optional[Callable[[int], Any]] = None,
                return_scales: bool = False) -> Any:
    """Quantize ``x`` to an OCP MX format (v1.0): blocks along ``axis`` sharing an E8M0 scale.

    Parameters
    ----------
    x : array_like, torch.Tensor or cupy.ndarray
        Real values; never modified.
    element_format : str
        ``'e4m3'``, ``'e5m2'`` (MXFP8), ``'e2m3'``, ``'e3m2'`` (MXFP6), ``'e2m1'``
        (MXFP4), ``'int8'`` (MXINT8), or another of :data:`MX_ELEMENT_NAMES`.
    block_size : int
        Elements per block (the specification's 32); the last may be shorter.
    axis : int
        The axis along which blocks run.
    round, rng, randfunc : optional
        Rounding of the elements (default nearest, the specification's) and its random
        numbers, as for :func:`~pychop_compat.fixed_point`; results beyond the element's largest
        magnitude are clamped to it.
    return_scales : bool
        Return ``(scales, elements)`` instead of the dequantized array: float64
        powers of two (NaN for a NaN block; one entry per block along the axis)
        and the float64 elements, shaped like ``x``.

    Returns
    -------
    same type as ``x``, or a tuple
        Dequantized values ``X * P_i`` with the dtype (integer input: float64),
        shape and device of ``x``.

    Examples
    --------
    >>> mx_quantize([1.0, 0.3, -5.0, 100.0], 'e2m1')  # X = 2^(6 - 2) = 16
    array([ 0.,  0., -8., 96.])
    >>> scales, elements = mx_quantize([1.0, 0.3, -5.0, 100.0], 'e4m3', return_scales=True)
    >>> scales.tolist(), elements.tolist()  # X = 2^(6 - 8); 400 is a tie between 384 and 416
    ([0.25], [4.0, 1.25, -20.0, 384.0])
    """
    element = mx_element(element_format)
    block_size = check_int(block_size, "block_size", 1)
    mode = check_mode(round)
    host = HostArray(x)
    blocks = Blocks(host.values.shape, axis, block_size)
    shared = block_scales(host.values, blocks, element.emax)
    sources = random_sources(rng, randfunc)
    return with_shared_scales(host, blocks, shared, lambda scaled: quantize_elements(scaled, element, mode, sources),
                              return_scales)


def with_shared_scales(host: HostArray, blocks: Blocks, shared: np.ndarray,
                       quantize: Callable[[np.ndarray], np.ndarray], return_scales: bool) -> Any:
    """The end of :func:`mx_quantize` and :func:`~pychop_compat.block_quantize`: the values divided
    by their block's ``2^shared``, rounded by ``quantize`` (NaN for a block without a scale) and
    given back multiplied again, or as ``(scales, elements)``."""
    spread = blocks.spread(shared)
    usable = np.isfinite(spread)
    exponent = np.where(usable, spread, 0).astype(np.int64)
    elements = np.array(quantize(np.where(usable, shift(host.values, -exponent), 0.0)))  # an array even for 0-d
    elements[~usable] = np.nan
    if return_scales:
        finite = np.isfinite(shared)
        scales = np.where(finite, np.ldexp(1.0, np.where(finite, shared, 0).astype(np.int64)), np.nan)
        return host.give_back_float64(scales), host.give_back_float64(elements)
    return host.give_back(np.ldexp(elements, exponent))
