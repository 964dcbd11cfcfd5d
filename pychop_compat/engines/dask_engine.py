"""The Dask engine: chop on ``dask.array.Array``, lazily, block by block (``map_blocks``).

Imported only when a Dask array reaches :func:`pychop_compat.chop`.  The
result is a new lazy Dask array with the same shape, chunks and dtype
(float16 computed in single and cast back; integers and bool give float64);
nothing is computed until the caller computes it, so arrays larger than memory
(or than a cluster's workers' memory) are rounded block by block, on threads,
processes or a ``dask.distributed`` cluster.

* Deterministic modes (1 to 4, no flips): each block goes through the NumPy
  engine; rounding is elementwise, so the result does not depend on the chunks.
* Stochastic rounding and bit flips need numbers that depend only on an
  element's global position: ``Chop(options, rng=seed)`` (the counter-based
  generator of :mod:`pychop_compat.random.counter`).  Element ``i`` of the whole array, in
  row-major order, gets the numbers of counter ``offset + i``, where ``offset``
  is the ``Chop`` object's call counter, taken when ``chop`` is called (not
  when the graph is computed).  Each block computes its elements' global
  indices from ``block_info``, so results are the same for every chunking,
  worker count and scheduler, and equal to ``Chop(options, rng=seed)`` on the
  same values as one NumPy array.  MATLAB's stream, a NumPy Generator and
  ``options.randfunc`` are sequential (chop.m's column-major order over the
  whole array) and are refused with a ``ValueError``.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import numpy as np

from ..spec import RoundingSpec
from ..random.sources import RandomSources
from ..kernels.elementwise import chop_elementwise, numpy_namespace
from ..kernels.xp import library_namespace
from ..random.counter import uniform
from ..spec import FLIP_PRECISION_ERROR

__all__ = ["chop_dask"]


def _working_dtypes(dtype: np.dtype):
    """``(dtype to compute in, dtype to give back)`` for a Dask array's dtype."""
    if dtype in (np.float64, np.float32):
        return dtype, dtype
    if dtype == np.float16:
        return np.dtype(np.float32), dtype
    if dtype.kind in "biu":
        return np.dtype(np.float64), np.dtype(np.float64)
    raise TypeError(f"chop supports float64, float32 and float16 Dask arrays (and integers), not {dtype}.")


def _round_block(block: np.ndarray, spec: RoundingSpec, sources: RandomSources, work, give_back) -> np.ndarray:
    from .numpy_engine import chop_array

    values = np.asarray(block, dtype=work)
    with np.errstate(over="ignore", invalid="ignore"):
        out = chop_array(values, spec, sources) if values.size else values.copy()
    return out.astype(give_back, copy=False)


def _global_indices(location, shape) -> np.ndarray:
    """Row-major indices in the whole array (uint64) of the block at ``location`` ((start, stop) per axis)."""
    index = np.zeros((1,) * len(shape), dtype=np.uint64)
    stride = 1
    for axis in reversed(range(len(shape))):
        start, stop = location[axis]
        along = np.arange(start, stop, dtype=np.uint64) * np.uint64(stride)
        index = index + along.reshape((-1,) + (1,) * (len(shape) - 1 - axis))
        stride *= shape[axis]
    return index


#: Elements rounded at a time inside a block: the per-element path makes a few dozen
#: temporaries, so slices keep a worker's memory near the size of its blocks.
_SLICE = 1 << 16


def _round_block_counter(block: np.ndarray, spec: RoundingSpec, keys, offset: int, work, give_back,
                         block_info=None) -> np.ndarray:
    values = np.ascontiguousarray(block, dtype=work).reshape(-1)
    info = block_info[0]
    index = np.broadcast_to(_global_indices(info["array-location"], info["shape"]), block.shape)
    index = np.ascontiguousarray(index).reshape(-1).astype(np.int64)  # (wraps modulo 2**64)
    out = np.empty(values.shape, dtype=give_back)
    stochastic = spec.stochastic
    namespace = numpy_namespace()
    with np.errstate(over="ignore", invalid="ignore"):
        for start in range(0, values.size, _SLICE):
            piece = slice(start, start + _SLICE)
            numbers = [uniform(library_namespace("numpy").xp, key, offset, index[piece]) for key in keys]
            out[piece] = chop_elementwise(namespace, values[piece], spec, numbers[0] if stochastic else None,
                                          *(numbers[1:] if spec.flips else (None, None)))
    return out.reshape(block.shape)


def chop_dask(x: Any, spec: RoundingSpec, sources: RandomSources) -> Any:
    """Round the Dask array ``x`` by ``spec``: a lazy Dask array (see the module notes).

    Raises
    ------
    ValueError
        Stochastic rounding or flips without ``Chop(..., rng=<int>)``; or with
        unknown chunk sizes (call ``x.compute_chunk_sizes()`` first).
    """
    work, give_back = _working_dtypes(np.dtype(x.dtype))
    random = spec.draws
    from dask.base import tokenize

    if not random:
        name = "chop-" + tokenize(x.name, repr(spec))
        func = partial(_round_block, spec=spec, sources=sources, work=work, give_back=give_back)
        return x.map_blocks(func, dtype=give_back, name=name, meta=np.empty((0,) * x.ndim, give_back))
    counter = getattr(sources, "counter", None)
    if counter is None:
        raise ValueError(
            "Stochastic rounding and bit flips on a Dask array need numbers that depend only on each "
            "element's position: use Chop(options, rng=<int seed>) (the counter-based generator). "
            "MATLAB's stream, NumPy Generators and options.randfunc draw in chop.m's sequential order.")
    if getattr(spec, "extended", False):
        raise ValueError("Stochastic rounding and flips with this format's extended options are not "
                         "supported on Dask arrays; compute the array and use the NumPy engine.")
    if spec.flips and spec.fmt.t < 2:
        raise ValueError(FLIP_PRECISION_ERROR)
    if any(math.isnan(c) for chunks in x.chunks for c in chunks):
        raise ValueError("chop with random numbers needs known chunk sizes: call x.compute_chunk_sizes() first.")
    stream = counter.take(int(np.prod(x.shape, dtype=np.int64)))
    name = "chop-" + tokenize(x.name, repr(spec), stream.keys, stream.offset)
    func = partial(_round_block_counter, spec=spec, keys=stream.keys, offset=stream.offset, work=work,
                   give_back=give_back)
    return x.map_blocks(func, dtype=give_back, name=name, meta=np.empty((0,) * x.ndim, give_back))
