"""The counter-based generator of :mod:`pychop_compat.random.counter` on the host: ``Chop(..., rng=<int>)``.

``Chop(options, rng=seed)`` draws its stochastic-rounding and bit-flip numbers
from the counter-based generator defined in :mod:`pychop_compat.random.counter` (SplitMix64
of seed, stream, counter), not from a sequential generator: element ``i`` of a
call, in row-major (C) order of the array's elements, gets the numbers
``u_s(offset + i)`` of streams ``s = ROUND, FLIP_CHOICE, FLIP_BIT``, where
``offset`` is the :class:`CounterRng`'s own call counter (0 at construction;
every call that draws advances it by the number of elements of the array).

So the numbers depend only on (seed, call counter, element index): not on the
engine (NumPy, compiled, torch), the number of threads or the chunking, and
a :class:`CounterRng` is plain data (a seed and a counter) that pickles.

This module holds the host side: the per-object counter and the numbers as
NumPy uint64 arithmetic.  The definition (``mix64``, ``GOLDEN``, the stream
numbers) is imported from :mod:`pychop_compat.random.counter`, never re-defined.
"""

from __future__ import annotations

import threading

import numpy as np

from .counter import FLIP_BIT, FLIP_CHOICE, GOLDEN, MIX1, MIX2, ROUND, CounterStream, mix64

__all__ = ["CounterRng", "uniform_array", "STREAMS"]

_MASK = (1 << 64) - 1
#: The stream numbers, in the order of ``CounterStream.keys`` (:class:`~pychop_compat.random.counter.CounterStream`).
STREAMS = (ROUND, FLIP_CHOICE, FLIP_BIT)


def uniform_array(key: int, offset: int, n: int, start: int = 0) -> np.ndarray:
    """``u(offset + i)`` for ``i = start .. start + n - 1`` as float64 (NumPy uint64 arithmetic).

    The same numbers as :func:`pychop_compat.random.counter.counter_uniform`: NumPy's uint64
    addition and multiplication wrap modulo 2**64 as the definition's arithmetic does.
    """
    z = np.arange(start, start + n, dtype=np.uint64)
    z *= np.uint64(GOLDEN)
    z += np.uint64((key + offset * GOLDEN) & _MASK)
    shifted = np.empty_like(z)
    for k, multiplier in ((30, MIX1), (27, MIX2), (31, None)):
        np.right_shift(z, np.uint64(k), out=shifted)
        z ^= shifted
        if multiplier is not None:
            z *= np.uint64(multiplier)
    z >>= np.uint64(12)
    u = z.astype(np.float64)  # exact: below 2**52
    u += 0.5
    u *= 2.0**-52
    return u


class CounterRng:
    """The numbers of ``Chop(..., rng=seed)``: a seed and a call counter (plain data; picklable).

    Parameters
    ----------
    seed : int
        Any integer (taken modulo 2**64).

    Notes
    -----
    :meth:`take` hands out the counters of one call and advances the counter
    under a lock, so concurrent calls from several threads get disjoint
    counters (which call gets which depends on scheduling).
    """

    def __init__(self, seed: int):
        self.seed = int(seed) & _MASK
        self.keys = tuple(mix64(self.seed + s * GOLDEN) for s in STREAMS)
        self.offset = 0
        self._lock = threading.Lock()

    def take(self, n: int) -> CounterStream:
        """The stream of a call on ``n`` elements: its keys and first counter; advances the counter."""
        with self._lock:
            offset = self.offset
            self.offset = (offset + int(n)) & _MASK
        return CounterStream(self.keys, offset)

    # Sequential draws: only for a chop that follows chop.m's call order (a user's randfunc
    # supplies the stochastic numbers, so the bit flips are drawn call by call from here).

    def _sequential(self, stream_index: int, n: int) -> np.ndarray:
        stream = self.take(n)
        return uniform_array(stream.keys[stream_index], stream.offset, n)

    def stochastic(self, n: int) -> np.ndarray:
        """``n`` numbers of the ROUND stream at the next ``n`` counters."""
        return self._sequential(0, n)

    def flip_uniform(self, n: int) -> np.ndarray:
        """``n`` numbers of the FLIP_CHOICE stream at the next ``n`` counters."""
        return self._sequential(1, n)

    def flip_randi(self, imax: int, n: int) -> np.ndarray:
        """``1 + floor(imax * u)`` for ``n`` numbers of the FLIP_BIT stream (MATLAB's randi rule)."""
        return 1 + np.floor(imax * self._sequential(2, n)).astype(np.int64)

    def __getstate__(self) -> dict:
        return {"seed": self.seed, "offset": self.offset}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["seed"])
        self.offset = int(state["offset"])

    def __eq__(self, other) -> bool:
        return isinstance(other, CounterRng) and (self.seed, self.offset) == (other.seed, other.offset)

    __hash__ = None

    def __repr__(self) -> str:
        return f"CounterRng(seed={self.seed}, offset={self.offset})"
