"""Where chop's random numbers come from.

chop.m draws uniform numbers for stochastic rounding from ``options.randfunc``
(default ``rand(n, 1)``) and, for bit flips, always from MATLAB's global
stream (``rand`` to pick elements, ``randi`` to pick bits).  A
:class:`RandomSources` bundles the three draws so that the rounding code owns
no global state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

from .matlab_random import default_randfunc, stream_randi, stream_uniform

__all__ = ["RandomSources", "sources_for", "generator_sources"]


@dataclass(frozen=True)
class RandomSources:
    """Three draws: ``stochastic(n)`` and ``flip_uniform(n)`` give ``n`` uniforms in (0, 1)
    as float64, ``flip_randi(imax, n)`` gives ``n`` integers in ``1..imax``."""

    stochastic: Callable[[int], np.ndarray]
    flip_uniform: Callable[[int], np.ndarray]
    flip_randi: Callable[[int, int], np.ndarray]


MATLAB_STREAM = RandomSources(stream_uniform, stream_uniform, stream_randi)


def _checked(randfunc) -> Callable[[int], np.ndarray]:
    def draw(n: int) -> np.ndarray:
        values = np.asarray(randfunc(n), dtype=np.float64).ravel()
        if values.size != n:
            raise ValueError(f"options.randfunc({n}) returned {values.size} numbers; it must return {n}.")
        return values

    return draw


def sources_for(randfunc: Optional[Callable[[int], Any]], flips: RandomSources = MATLAB_STREAM) -> RandomSources:
    """Sources as chop.m uses them: ``randfunc`` for stochastic rounding, ``flips`` for bit flips."""
    if randfunc is default_randfunc:
        return flips  # its own uniform draws serve stochastic rounding too
    return RandomSources(_checked(randfunc), flips.flip_uniform, flips.flip_randi)


def generator_sources(generator: np.random.Generator) -> RandomSources:
    """All draws from a NumPy :class:`~numpy.random.Generator` (fast, not MATLAB's stream)."""
    return RandomSources(
        generator.random,
        generator.random,
        lambda imax, n: generator.integers(1, imax, size=n, endpoint=True),
    )
