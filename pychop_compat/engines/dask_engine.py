"""The Dask adapter: chop on ``dask.array.Array``, lazily, block by block (``map_blocks``).

The result is a lazy Dask array of the same shape, chunks and dtype, each
block rounded by the kernel the router picks for it.  Stochastic rounding and
bit flips need ``Chop(options, rng=seed)``: element ``i`` of the whole array
(row-major) gets counter ``offset + i`` (:func:`global_indices`), so results do
not depend on the chunking or the scheduler; sequential sources are refused
(``docs/engines.rst``, "Dask arrays").
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

__all__ = ["working_dtypes", "map_blocks", "global_indices", "check_chunks"]


def working_dtypes(dtype: Any) -> tuple:
    """``(dtype to compute in, dtype to give back)`` for a Dask array's dtype: native byte order
    (a byte-swapped float array gives a native result, as on NumPy)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        dtype = dtype.newbyteorder("=")
    if dtype in (np.float64, np.float32):
        return dtype, dtype
    if dtype == np.float16:
        return np.dtype(np.float32), dtype
    if dtype.kind in "biu":
        return np.dtype(np.float64), np.dtype(np.float64)
    raise TypeError(f"chop supports float64, float32 and float16 Dask arrays (and integers), not {dtype}.")


def map_blocks(x: Any, func: Callable[..., np.ndarray], dtype: Any, token: tuple) -> Any:
    """``func`` on every block of ``x`` (lazily): a new Dask array of ``dtype``; ``token`` names the
    graph's layer (the same token, the same layer)."""
    from dask.base import tokenize

    name = "chop-" + tokenize(x.name, *token)
    return x.map_blocks(func, dtype=dtype, name=name, meta=np.empty((0,) * x.ndim, dtype))


def check_chunks(x: Any) -> None:
    """Random numbers by global position need known chunk sizes.

    Raises
    ------
    ValueError
        With unknown (NaN) chunk sizes.
    """
    if any(math.isnan(c) for chunks in x.chunks for c in chunks):
        raise ValueError("chop with random numbers needs known chunk sizes: call x.compute_chunk_sizes() first.")


def global_indices(block_info: dict, shape: tuple) -> np.ndarray:
    """Row-major indices in the whole array (int64, wrapping modulo 2**64) of the elements of the
    block that ``block_info`` (``map_blocks``' argument) describes, in the block's shape."""
    info = block_info[0]
    location, whole = info["array-location"], info["shape"]
    index = np.zeros((1,) * len(whole), dtype=np.uint64)
    stride = 1
    for axis in reversed(range(len(whole))):
        start, stop = location[axis]
        along = np.arange(start, stop, dtype=np.uint64) * np.uint64(stride)
        index = index + along.reshape((-1,) + (1,) * (len(whole) - 1 - axis))
        stride *= whole[axis]
    block_shape = tuple(stop - start for start, stop in location)
    return np.ascontiguousarray(np.broadcast_to(index, block_shape)).astype(np.int64)
