"""Block floating point: blocks of fixed-point elements sharing one exponent
``E = floor(log2(max |x|))`` (see :doc:`/numbers`)."""

from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from ._common import Blocks, HostArray, check_int, check_mode, random_sources
from .fixed import fixed_point_codes
from .mx import block_scales, with_shared_scales

__all__ = ["block_quantize"]


def block_quantize(x: Any, mantissa_bits: int = 8, block_size: Optional[int] = None, axis: int = -1, *,
                   round: int = 1, rng: Optional[np.random.Generator] = None,
                   randfunc: Optional[Callable[[int], Any]] = None, return_scales: bool = False) -> Any:
    """Round ``x`` to block floating point.

    Parameters
    ----------
    x : array_like, torch.Tensor or cupy.ndarray
        Real values; never modified.
    mantissa_bits : int
        Magnitude bits of each element, the sign not counted (1..52).
    block_size : int, optional
        Elements per block along ``axis`` (the last may be shorter); None
        (default): the whole array shares one exponent.
    axis : int
        The axis along which blocks run (ignored when ``block_size`` is None).
    round, rng, randfunc : optional
        Rounding and its random numbers, as for :func:`~pychop_compat.fixed_point`.
    return_scales : bool
        Return ``(scales, elements)``: ``2^E`` per block (float64, NaN for a NaN
        block) and ``k * 2^(1 - mantissa_bits)`` in ``(-2, 2)`` shaped like ``x``.

    Returns
    -------
    same type as ``x``, or a tuple
        Values with the dtype (integer input: float64), shape and device of ``x``.

    Examples
    --------
    >>> block_quantize([1.0, 0.3, -0.1, 6.5], mantissa_bits=3)  # E = 2: steps of 2^(2-3+1) = 1, 6.5 a tie
    array([ 1.,  0., -0.,  6.])
    >>> block_quantize([1.0, 0.3, -0.1, 6.5], mantissa_bits=3, block_size=2)
    array([ 1.  ,  0.25, -0.  ,  6.  ])
    """
    mantissa_bits = check_int(mantissa_bits, "mantissa_bits", 1, 52)
    if block_size is not None:
        block_size = check_int(block_size, "block_size", 1)
    mode = check_mode(round)
    host = HostArray(x)
    blocks = Blocks(host.values.shape, axis, block_size)
    # emax_elem = 0 and no exponent range: E itself, zero blocks get any exponent (0 here).
    shared = block_scales(host.values, blocks, 0, emin=-1100, emax=1100)
    shared = np.where(shared == -1100, 0.0, shared)
    fl = mantissa_bits - 1
    top = (1 << mantissa_bits) - 1
    sources = random_sources(rng, randfunc)

    def quantize(scaled: np.ndarray) -> np.ndarray:
        codes = fixed_point_codes(scaled, mantissa_bits + 1, fl, True, "saturate", mode, sources)
        return np.ldexp(np.clip(codes, -top, top), -fl)

    return with_shared_scales(host, blocks, shared, quantize, return_scales)
