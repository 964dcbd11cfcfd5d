"""Random numbers for arrays on GPUs: a counter-based generator, the same for torch and CuPy.

For an array on a GPU, with neither ``randfunc`` nor ``Chop(..., rng=...)``,
chop's random numbers are made on the device by a function of (seed, stream,
counter) instead of a sequential generator.  The CUDA kernel computes each
element's numbers itself, so stochastic rounding is one pass over memory with
no array of draws, and torch computes the same numbers with integer tensor
operations, so a tensor gets the same result with or without CuPy.

The numbers
-----------
With ``G = 0x9E3779B97F4A7C15`` and SplitMix64's finaliser, in arithmetic
modulo 2**64::

    mix(z):  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
             z = (z ^ (z >> 27)) * 0x94D049BB133111EB
             return z ^ (z >> 31)

    key_s  = mix(seed + s * G)                                 s = 1, 2, 3
    u_s(j) = ((mix(key_s + j * G) >> 12) + 1/2) * 2**-52         in (0, 1)

Element ``i`` of a call, in row-major (C) order of the array's elements, has
the counter ``j = offset + i`` (modulo 2**64).  Stochastic rounding compares with
``u_1(j)``; with ``flip = 1`` the element's bit ``1 + floor((t - 1) * u_3(j))``
is flipped when ``u_2(j) <= p`` (the rule of MATLAB's ``randi``).  Each device
keeps its own ``offset``: 0 after :func:`seed_device` (and at import), and every
call that draws on the device advances it by its number of elements.

The contract: the same seed, then the same sequence of calls with the same
options, shapes and values, gives the same results on any GPU, through torch
or CuPy.  These are not MATLAB's numbers, and :func:`pychop_compat.rng` does
not affect them.  Each ``u_s(j)`` is an odd multiple of ``2**-53``, uniform
on the 2**52 midpoints of ``[0, 1)``, so its mean is exactly 1/2.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

__all__ = ["seed_device", "CounterStream", "mix64", "counter_uniform", "GOLDEN", "MIX1", "MIX2"]

GOLDEN = 0x9E3779B97F4A7C15
MIX1 = 0xBF58476D1CE4E5B9
MIX2 = 0x94D049BB133111EB
_MASK = (1 << 64) - 1

#: Stream numbers: stochastic rounding, the choice of flipped elements, the flipped bit.
ROUND, FLIP_CHOICE, FLIP_BIT = 1, 2, 3


def mix64(z: int) -> int:
    """SplitMix64's finaliser on a 64-bit unsigned integer (a Python int)."""
    z &= _MASK
    z = ((z ^ (z >> 30)) * MIX1) & _MASK
    z = ((z ^ (z >> 27)) * MIX2) & _MASK
    return z ^ (z >> 31)


def counter_uniform(key: int, j: int) -> float:
    """``u(j) = ((mix(key + j * G) >> 12) + 1/2) * 2**-52`` for one counter (the definition)."""
    return ((mix64(key + j * GOLDEN) >> 12) + 0.5) * 2.0**-52


@dataclass(frozen=True)
class CounterStream:
    """The numbers of one call: ``keys[s - 1]`` is ``key_s``; element i has counter ``offset + i``."""

    keys: tuple
    offset: int


def _keys(seed: int) -> tuple:
    return tuple(mix64(seed + s * GOLDEN) for s in (ROUND, FLIP_CHOICE, FLIP_BIT))


_lock = threading.Lock()
_seed_keys = _keys(0)
_offsets: dict = {}


def seed_device(seed: int) -> None:
    """Seed chop's random numbers for arrays on GPUs (torch tensors and CuPy arrays).

    Sets the seed (taken modulo 2**64) and puts every device's counter back
    to 0.  The same seed, then the same sequence of chop calls with the same
    options, shapes and values, gives the same results.  Arrays on the CPU
    are not affected: they use MATLAB's stream (see :func:`pychop_compat.rng`).
    """
    global _seed_keys
    keys = _keys(int(seed) & _MASK)
    with _lock:
        _seed_keys = keys
        _offsets.clear()


def take(device: str, n: int) -> CounterStream:
    """The stream for a call of ``n`` elements on ``device`` (e.g. ``'cuda:0'``); advances its counter."""
    with _lock:
        offset = _offsets.get(device, 0)
        _offsets[device] = (offset + n) & _MASK
        return CounterStream(_seed_keys, offset)
