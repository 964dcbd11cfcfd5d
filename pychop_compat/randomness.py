"""Where chop's random numbers come from.

chop.m draws uniform numbers for stochastic rounding from ``options.randfunc``
(default ``rand(n, 1)``) and, for bit flips, always from MATLAB's global
stream (``rand`` to pick elements, ``randi`` to pick bits).  A
:class:`RandomSources` bundles the three draws so that the rounding code owns
no global state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from .matlab_random import default_randfunc, stream_randi, stream_uniform

__all__ = ["RandomSources", "sources_for", "generator_sources", "counter_sources"]


@dataclass(frozen=True)
class RandomSources:
    """Three draws: ``stochastic(n)`` and ``flip_uniform(n)`` give ``n`` uniforms in (0, 1)
    as float64, ``flip_randi(imax, n)`` gives ``n`` integers in ``1..imax``.

    ``counter``: when not None (``Chop(..., rng=<int>)``), a
    :class:`~pychop_compat.engines.counter_host.CounterRng`; engines then give
    each element its own numbers from the counter-based generator (a function
    of seed, call counter and row-major element index) instead of calling the
    three draws in chop.m's order."""

    stochastic: Callable[[int], np.ndarray]
    flip_uniform: Callable[[int], np.ndarray]
    flip_randi: Callable[[int, int], np.ndarray]
    counter: Optional[object] = None


MATLAB_STREAM = RandomSources(stream_uniform, stream_uniform, stream_randi)


def _checked(randfunc) -> Callable[[int], np.ndarray]:
    def draw(n: int) -> np.ndarray:
        values = np.asarray(randfunc(n), dtype=np.float64).ravel()
        if values.size != n:
            raise ValueError(f"options.randfunc({n}) returned {values.size} numbers; it must return {n}.")
        return values

    return draw


def sources_for(randfunc, flips: RandomSources = MATLAB_STREAM) -> RandomSources:
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


def counter_sources(seed: int) -> RandomSources:
    """The sources of ``Chop(..., rng=seed)``: the counter-based generator with that seed.

    Engines use ``counter`` (per-element numbers); the three draws are the
    same generator's numbers taken call by call, for the one case that needs
    them (a ``randfunc`` supplies the stochastic draws; bit flips then follow
    chop.m's call order).
    """
    from .engines.counter_host import CounterRng

    counter = CounterRng(seed)
    return RandomSources(counter.stochastic, counter.flip_uniform, counter.flip_randi, counter)
