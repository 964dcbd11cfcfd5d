"""The NumPy engine: float32/float64 ndarrays on the CPU.

:func:`chop_array` runs the compiled engine (:mod:`.compiled`, when Numba is
installed and :func:`.compiled.set_cpu_engine` allows it) or the fast exact
NumPy engine (:mod:`.numpy_fast`), which give the same bits;
:func:`chop_array_reference` (or ``chop_array(..., reference=True)``) runs
the executable specification (:mod:`pychop_compat.rules.chop`), which the
fast engine is tested against bit for bit.
"""

from __future__ import annotations

import numpy as np

from ..random.matlab_stream import stream_uniform
from ..spec import RoundingSpec
from ..random.sources import RandomSources
from ..rules.chop import chop_vector, roundit_vector
from ..kernels import compiled, numpy_fast

__all__ = ["chop_array", "chop_array_reference", "roundit_array"]


def _in_matlab_order(x: np.ndarray) -> np.ndarray:
    return x.ravel(order="F")


def _from_matlab_order(v: np.ndarray, shape) -> np.ndarray:
    return v.reshape(shape, order="F")


def chop_array_reference(x: np.ndarray, spec: RoundingSpec, sources: RandomSources) -> np.ndarray:
    """:func:`chop_array` by the reference algorithm (slow; the specification)."""
    if getattr(spec, "extended", False):
        from . import numpy_extended

        return numpy_extended.chop_array(x, spec, sources, reference=True)
    return _from_matlab_order(chop_vector(_in_matlab_order(x), spec, sources), x.shape)


def chop_array(x: np.ndarray, spec: RoundingSpec, sources: RandomSources, reference: bool = False) -> np.ndarray:
    """Round ``x`` (float32 or float64, any shape) by ``spec``; a new array of the same shape.

    Parameters
    ----------
    x : numpy.ndarray
        float32 or float64 values; never modified.
    spec : RoundingSpec
        The resolved options.  Specs beyond chop.m (``spec.extended``: OCP/ML
        formats, CPFloat's modes and range rules, saturation, ...) go to
        ``numpy_extended``; other engines hand such specs here.
    sources : RandomSources
        Where stochastic rounding and bit flips draw their numbers (used in
        MATLAB's column-major element order, as chop.m does).
    reference : bool, optional
        Use the reference algorithm instead of the fast engine (same result).
    """
    if reference:
        return chop_array_reference(x, spec, sources)
    if compiled.wanted() and compiled.handles(x, spec) and not _streamed_is_faster(spec, sources):
        return compiled.chop_array(x, spec, sources)  # chop.m's specs and most beyond (handles)
    if getattr(spec, "extended", False):
        from . import numpy_extended  # semantics beyond chop.m (other formats, modes, rules)

        return numpy_extended.chop_array(x, spec, sources)
    return numpy_fast.chop_array(x, spec, sources)


def _streamed_is_faster(spec: RoundingSpec, sources: RandomSources) -> bool:
    """Under ``'auto'``: stochastic rounding from a NumPy Generator without flips stays on the
    NumPy engine, which draws block by block into the cache while it rounds; the compiled
    engine draws every number in bulk first, a round trip through memory that measured slower
    (docs/performance.rst).  MATLAB's stream goes to the compiled engine, which draws it inside
    its loop.  Same bits either way."""
    return (compiled.get_cpu_engine() == "auto" and spec.stochastic and not spec.flips
            and getattr(sources, "counter", None) is None and sources.stochastic is not stream_uniform
            and numpy_fast.is_sequential_stream(sources.stochastic))


def roundit_array(x: np.ndarray, mode: int, sources: RandomSources, flip: bool, p: float, t: int) -> np.ndarray:
    """roundit.m on an array of any shape (random numbers assigned in column-major order)."""
    y = roundit_vector(_in_matlab_order(x), mode, sources, flip, p, t)
    return _from_matlab_order(y, x.shape)
