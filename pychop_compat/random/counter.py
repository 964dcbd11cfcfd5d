"""The counter-based generator: chop's numbers as a function of (seed, stream, counter).

It serves arrays on GPUs without ``randfunc`` or ``rng`` (one counter per
device, :func:`seed_device`) and ``Chop(..., rng=<int seed>)`` on every engine
(one counter per object, :class:`CounterRng`).  :func:`counter_uniform` is the
definition on Python integers; :func:`uniform` computes it with any array
library's operations, so no numbers travel between devices (the CUDA, Triton
and Numba kernels have their own copies).

With ``G = 0x9E3779B97F4A7C15`` and SplitMix64's finaliser, modulo 2**64::

    mix(z):  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
             z = (z ^ (z >> 27)) * 0x94D049BB133111EB
             return z ^ (z >> 31)

    key_s  = mix(seed + s * G)                                 s = 1, 2, 3
    u_s(j) = ((mix(key_s + j * G) >> 12) + 1/2) * 2**-52         in (0, 1)

Element ``i`` of a call (row-major) has counter ``j = offset + i``.  Stochastic
rounding compares with ``u_1(j)``; with ``flip = 1`` bit
``1 + floor((t - 1) * u_3(j))`` flips when ``u_2(j) <= p``.  Each device, and
each :class:`CounterRng`, keeps its own ``offset`` (0 at the start), which each
call advances by its size.  The same seed and calls give the same results on
every GPU and engine; these are not MATLAB's numbers.
"""

from __future__ import annotations

import numbers
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["checked_seed", "seed_device", "take", "CounterStream", "CounterRng", "mix64", "counter_uniform", "uniform",
           "stream_keys", "GOLDEN", "MIX1", "MIX2", "ROUND", "FLIP_CHOICE", "FLIP_BIT", "STREAMS"]

GOLDEN = 0x9E3779B97F4A7C15
MIX1 = 0xBF58476D1CE4E5B9
MIX2 = 0x94D049BB133111EB
_MASK = (1 << 64) - 1

#: Stream numbers: stochastic rounding, the choice of flipped elements, the flipped bit.
ROUND, FLIP_CHOICE, FLIP_BIT = 1, 2, 3
#: The stream numbers, in the order of ``CounterStream.keys``.
STREAMS = (ROUND, FLIP_CHOICE, FLIP_BIT)


def mix64(z: int) -> int:
    """SplitMix64's finaliser on a 64-bit unsigned integer (a Python int)."""
    z &= _MASK
    z = ((z ^ (z >> 30)) * MIX1) & _MASK
    z = ((z ^ (z >> 27)) * MIX2) & _MASK
    return z ^ (z >> 31)


def counter_uniform(key: int, j: int) -> float:
    """``u(j) = ((mix(key + j * G) >> 12) + 1/2) * 2**-52`` for one counter (the definition)."""
    return ((mix64(key + j * GOLDEN) >> 12) + 0.5) * 2.0**-52


def stream_keys(seed: int) -> tuple:
    """``(key_1, key_2, key_3)`` of ``seed`` (taken modulo 2**64), in the order of :data:`STREAMS`."""
    return tuple(mix64(int(seed) + s * GOLDEN) for s in STREAMS)


def _signed(value: int) -> int:
    """The int64 with the bits of the 64-bit unsigned ``value`` (two's complement)."""
    value &= _MASK
    return value - (1 << 64) if value >= 1 << 63 else value


def _as_int64(xp: Any, value: Any) -> Any:
    """A key or an offset as int64: a Python int as the int64 with its bits, an array (a 0-d
    tensor under ``torch.compile``, a traced JAX value) converted, which wraps modulo 2**64."""
    if isinstance(value, numbers.Integral):  # Python and NumPy integers
        return _signed(int(value))
    return value if value.dtype == xp.int64 else xp.astype(value, xp.int64)


def uniform(xp: Any, key: Any, offset: Any, index: Any) -> Any:
    """``u(offset + i)`` for each counter ``i`` in ``index``: the numbers of :func:`counter_uniform`
    as a float64 array, for any array library.

    Parameters
    ----------
    xp : array namespace
        The library's namespace (``array_api_compat``'s wrapper or ``jax.numpy``):
        ``astype`` and ``int64``/``float64`` are all this needs from it.
    key : int or 0-d int64 array
        The stream's key (``CounterStream.keys[s - 1]``).  An array holds its bits
        as int64: compiled torch code passes a tensor so that a new key does not
        recompile.
    offset : int or 0-d integer array
        The first counter (an array: its bits as int64, e.g. a traced JAX value).
    index : int64 array
        Element indices ``i`` (e.g. ``arange(n)`` in row-major order); not modified.

    Returns
    -------
    array
        float64, the shape and device of ``index``.

    Notes
    -----
    Every library has 64-bit signed integers (torch has no general unsigned ones):
    int64 addition and multiplication wrap modulo 2**64 as the definition's
    arithmetic does, and each logical right shift is an arithmetic shift with
    the copies of the sign bit masked off.  The top 52 bits ``k`` give
    ``(2k + 1) 2**-53``, every step exact, so a fused multiply-add gives the same.
    JAX needs ``jax_enable_x64``.
    """
    z = (index + _as_int64(xp, offset)) * _signed(GOLDEN) + _as_int64(xp, key)
    for shift, multiplier in ((30, MIX1), (27, MIX2), (31, None)):
        z = z ^ ((z >> shift) & ((1 << (64 - shift)) - 1))
        if multiplier is not None:
            z = z * _signed(multiplier)
    k = (z >> 12) & ((1 << 52) - 1)
    return xp.astype(k, xp.float64) * 2.0**-52 + 2.0**-53


@dataclass(frozen=True)
class CounterStream:
    """The numbers of one call: ``keys[s - 1]`` is ``key_s``; element i has counter ``offset + i``."""

    keys: tuple
    offset: Any


# --- the device generator: one seed, one counter per device ------------------------------------

_lock = threading.Lock()
_seed_keys = stream_keys(0)
_offsets: dict = {}


def checked_seed(seed: Any) -> int:
    """``seed`` as an int in ``[0, 2**64)``, else a ValueError: a seed taken modulo 2**64 would give
    two seeds the same numbers (NumPy's generators refuse negative seeds too)."""
    value = int(seed)
    if not 0 <= value <= _MASK:
        raise ValueError(f"rng: an integer seed must be in [0, 2**64), got {value}.")
    return value


def seed_device(seed: int) -> None:
    """Seed chop's random numbers for arrays on GPUs (torch tensors and CuPy arrays).

    Sets the seed (an integer in ``[0, 2**64)``) and every device's counter back to 0;
    arrays on the CPU use MATLAB's stream instead (:func:`pychop_compat.rng`).
    """
    global _seed_keys
    keys = stream_keys(checked_seed(seed))
    with _lock:
        _seed_keys = keys
        _offsets.clear()


def take(device: str, n: int) -> CounterStream:
    """The stream for a call of ``n`` elements on ``device`` (e.g. ``'cuda:0'``); advances its counter."""
    with _lock:
        offset = _offsets.get(device, 0)
        _offsets[device] = (offset + n) & _MASK
        return CounterStream(_seed_keys, offset)


# --- Chop(..., rng=<int seed>): one counter per object ------------------------------------------

@dataclass
class CounterRng:
    """The numbers of ``Chop(..., rng=seed)``: a seed and a call counter (plain data; picklable;
    equal when seed and counter are).

    Element ``i`` of a call (row-major) gets ``u_s(offset + i)``, ``offset`` this
    object's counter, which every call that draws advances (under a lock:
    concurrent calls get disjoint counters) by the array's size.

    Parameters
    ----------
    seed : int
        An integer in ``[0, 2**64)`` (``ValueError`` otherwise: a seed taken modulo 2**64 would
        give two seeds the same numbers; NumPy's generators refuse negative seeds too).
    offset : int
        The counter of the next call's first element (default 0).
    """

    seed: int
    offset: int = 0

    def __post_init__(self) -> None:
        self.seed = checked_seed(self.seed)
        self.keys = stream_keys(self.seed)
        self._lock = threading.Lock()

    def take(self, n: int) -> CounterStream:
        """The stream of a call on ``n`` elements: its keys and first counter; advances the counter."""
        return CounterStream(self.keys, self.advance(int(n)))

    def advance(self, n: int) -> int:
        """The first counter of a call on ``n`` elements (a Python int; the keys are ``keys``);
        advances the counter (:meth:`take` without the stream object: what a small call needs)."""
        lock = self._lock  # (acquire and release: half the cost of a with block on a small call)
        lock.acquire()
        try:
            offset = self.offset
            self.offset = (offset + n) & _MASK
        finally:
            lock.release()
        return offset

    # Sequential draws: the flips of a call whose randfunc supplies the stochastic numbers.

    def _sequential(self, stream_index: int, n: int) -> np.ndarray:
        import array_api_compat.numpy

        stream = self.take(n)
        return uniform(array_api_compat.numpy, stream.keys[stream_index], stream.offset, np.arange(n, dtype=np.int64))

    def stochastic(self, n: int) -> np.ndarray:
        """``n`` numbers of the ROUND stream at the next ``n`` counters (float64 NumPy array)."""
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
        CounterRng.__init__(self, state["seed"], int(state["offset"]))
