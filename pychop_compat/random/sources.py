"""Where chop's random numbers come from: the randomness contract, in one module.

chop.m draws stochastic rounding's numbers from ``options.randfunc`` (default
``rand(n, 1)``) and bit flips' from MATLAB's stream; a :class:`RandomSources`
bundles the three draws so that the rounding code owns no global state.
:func:`default_source` and :func:`source_for` state the contract
(``docs/randomness.rst``) as functions; the counter-based generator is
defined in :mod:`pychop_compat.random.counter` only.
"""

from __future__ import annotations

import contextlib
import functools
import contextvars
import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional, Sequence

import numpy as np

from ..spec import FLIP_PRECISION_ERROR, RoundingSpec
from .matlab_stream import (ForkedStreamError, default_randfunc, exclusive_stream, fork_generation,
                            stream_randi, stream_uniform)

if TYPE_CHECKING:
    from .counter import CounterRng

__all__ = ["RandomSources", "sources_for", "generator_sources", "GeneratorIntegers", "MATLAB_STREAM",
           "Source", "SourcePlan", "default_source", "source_for", "INT_SEED_SOURCE", "ELEMENT_ORDER",
           "ForkedStreamError", "fork_generation", "exclusive_stream", "check_randfunc_output", "counter_sources",
           "matlab_stream_on_device", "draws_on_device", "host_draw_plan", "given_sources"]


@dataclass(frozen=True)
class RandomSources:
    """Three draws: ``stochastic(n)`` and ``flip_uniform(n)`` give ``n`` uniforms in (0, 1)
    as float64, ``flip_randi(imax, n)`` gives ``n`` integers in ``1..imax``.

    ``counter`` (``Chop(..., rng=<int>)``): a :class:`~pychop_compat.random.counter.CounterRng`
    whose numbers engines give each element by its index instead of the three draws.
    ``given`` (:func:`given_sources`): stochastic rounding's numbers given per element."""

    stochastic: Callable[[int], np.ndarray]
    flip_uniform: Callable[[int], np.ndarray]
    flip_randi: Callable[[int, int], np.ndarray]
    counter: Optional[CounterRng] = None
    given: Any = field(default=None, compare=False)

    @functools.cached_property  # asked on every call that draws
    def uses_matlab_stream(self) -> bool:
        """Whether any of the three draws comes from MATLAB's stream."""
        return self.stochastic is stream_uniform or self.flip_uniform is stream_uniform


MATLAB_STREAM = RandomSources(stream_uniform, stream_uniform, stream_randi)


def check_randfunc_output(values: Any, n: int) -> np.ndarray:
    """``randfunc(n)``'s result as a flat float64 array, checked: ``n`` real numbers in [0, 1).

    Raises
    ------
    TypeError
        When the values are not real numbers (strings, complex numbers, objects).
    ValueError
        When there are not ``n`` of them, or one is NaN, infinite, negative or at least 1.
    """
    array = np.asarray(values)
    if array.dtype.kind not in "fiu":
        raise TypeError(f"options.randfunc({n}) must return {n} real numbers in [0, 1), "
                        f"got an array of {array.dtype}.")
    flat = array.astype(np.float64, copy=False).reshape(-1)
    if flat.size != n:
        raise ValueError(f"options.randfunc({n}) returned {flat.size} numbers; it must return {n}.")
    if n and not bool(np.all((flat >= 0.0) & (flat < 1.0))):  # False for NaN too
        bad = float(flat[~((flat >= 0.0) & (flat < 1.0))][0])
        raise ValueError(f"options.randfunc({n}) must return numbers in [0, 1), got {bad!r}.")
    return flat


class CheckedRandfunc:
    """A user's ``randfunc``, called as chop.m calls it, with its output checked (picklable)."""

    def __init__(self, randfunc: Callable[[int], object]):
        self.randfunc = randfunc

    def __call__(self, n: int) -> np.ndarray:
        return check_randfunc_output(self.randfunc(n), n)


def sources_for(randfunc: Optional[Callable[[int], Any]] = None, flips: RandomSources = MATLAB_STREAM
                ) -> RandomSources:
    """Sources as chop.m uses them: ``randfunc`` (None: chop's default) for stochastic rounding,
    ``flips`` for bit flips."""
    if randfunc is None or randfunc is default_randfunc:
        return flips  # its own uniform draws serve stochastic rounding too
    return RandomSources(CheckedRandfunc(randfunc), flips.flip_uniform, flips.flip_randi)


class GeneratorIntegers:
    """``flip_randi`` of a NumPy Generator: ``n`` integers in ``1..imax`` (a class, so it pickles)."""

    def __init__(self, generator: np.random.Generator):
        self.generator = generator

    def __call__(self, imax: int, n: int) -> np.ndarray:
        return self.generator.integers(1, imax, size=n, endpoint=True)


def generator_sources(generator: np.random.Generator) -> RandomSources:
    """All draws from a NumPy :class:`~numpy.random.Generator` (pickled with its state)."""
    return RandomSources(generator.random, generator.random, GeneratorIntegers(generator))


def counter_sources(seed: int) -> RandomSources:
    """The sources of ``Chop(..., rng=seed)``: the counter-based generator with that seed.

    Engines use ``counter``; the three draws (its numbers call by call) serve the
    flips when a ``randfunc`` supplies the stochastic draws.
    """
    from .counter import CounterRng

    counter = CounterRng(seed)
    return RandomSources(counter.stochastic, counter.flip_uniform, counter.flip_randi, counter)


def _no_sequential_draws(*args: Any) -> np.ndarray:
    raise ValueError("these sources hold numbers per element only: stochastic rounding without bit flips.")


def given_sources(numbers: Any) -> RandomSources:
    """Stochastic rounding with the numbers the caller gives, one per element (an array of
    the values' library, broadcastable to their shape): element ``i`` rounds with
    ``numbers[i]`` (row-major), as :class:`pychop_compat.nn.Rounder` takes ``uniforms``.
    Nothing is drawn in chop.m's order, and there are no numbers for bit flips."""
    return RandomSources(_no_sequential_draws, _no_sequential_draws, _no_sequential_draws, given=numbers)


# --- GPU arrays: numbers made on the device, unless asked for MATLAB's stream ------------------

_MATLAB_STREAM_ON_DEVICE: contextvars.ContextVar = contextvars.ContextVar("matlab_stream_on_device", default=False)


@contextlib.contextmanager
def matlab_stream_on_device(enabled: bool = True) -> Iterator[None]:
    """Draw from MATLAB's stream on the host even for GPU inputs (torch and CuPy), within ``with``.

    Results are then those of the NumPy engine and MATLAB, at the cost of
    transfers.  The setting belongs to the calling thread (and task).

    Examples
    --------
    >>> with matlab_stream_on_device():  # doctest: +SKIP
    ...     c = chop(x_cuda, {'round': 5})
    """
    token = _MATLAB_STREAM_ON_DEVICE.set(bool(enabled))
    try:
        yield
    finally:
        _MATLAB_STREAM_ON_DEVICE.reset(token)


def draws_on_device(sources: RandomSources) -> bool:
    """Whether a GPU input draws its numbers on the device: chop's default source (MATLAB's
    stream, no ``randfunc``, no ``Chop(rng=...)``) outside :func:`matlab_stream_on_device`."""
    return sources == MATLAB_STREAM and not _MATLAB_STREAM_ON_DEVICE.get()


def host_draw_plan(spec: RoundingSpec, sources: RandomSources, block_sizes: Sequence[int],
                   draw_counts: Sequence[int]) -> list:
    """The random numbers chop.m draws, in its order, as NumPy arrays.

    Parameters
    ----------
    spec : RoundingSpec
    sources : RandomSources
    block_sizes : (int, int)
        Elements in the normal block and in the subnormal block.
    draw_counts : (int, int)
        Elements of each block whose scaled value needs a stochastic draw.

    Returns
    -------
    list of (draws, flip_bits)
        Per block: the float64 draws (or ``None``) and, with flips, an int64
        array over the block's elements holding ``2**(bit-1)`` for a chosen
        element and 0 elsewhere (or ``None``).  The subnormal block is only
        visited when it is not empty, as in chop.m.

    Raises
    ------
    ValueError
        For flips with ``t < 2``, after the normal block's stochastic draws (as chop.m).
    """
    plan: list = []
    for block, (size, count) in enumerate(zip(block_sizes, draw_counts)):
        if block == 1 and size == 0:
            plan.append((None, None))
            continue
        draws = np.asarray(sources.stochastic(count), dtype=np.float64).ravel() if spec.stochastic and count else None
        flip_bits = None
        if spec.flips:
            if spec.fmt.t < 2:
                raise ValueError(FLIP_PRECISION_ERROR)
            chosen = np.asarray(sources.flip_uniform(size), dtype=np.float64).ravel() <= spec.p
            flip_bits = np.zeros(size, dtype=np.int64)
            n_chosen = int(np.count_nonzero(chosen))
            if n_chosen:
                bits = np.asarray(sources.flip_randi(spec.fmt.t - 1, n_chosen)).astype(np.int64).ravel()
                flip_bits[chosen] = np.left_shift(np.int64(1), bits - 1)
        plan.append((draws, flip_bits))
    return plan


# --- the contract --------------------------------------------------------------------------------


class Source(enum.Enum):
    """The generators chop can draw from."""

    #: MATLAB's global Mersenne Twister stream (:func:`pychop_compat.rng`), one per process.
    MATLAB_STREAM = "matlab_stream"
    #: The counter-based generator of :mod:`pychop_compat.random.counter`, one counter
    #: per device, seeded by ``seed_device``.
    DEVICE_COUNTER = "device_counter"
    #: A NumPy Generator owned by a ``Chop`` object, drawn from sequentially.
    GENERATOR = "generator"
    #: The counter-based generator with a ``Chop`` object's own seed and call counter.
    SEEDED_COUNTER = "seeded_counter"
    #: ``options.randfunc`` (stochastic rounding only).
    RANDFUNC = "randfunc"
    #: Numbers given per element by the caller (:func:`given_sources`; ``nn``'s ``uniforms``).
    GIVEN = "given"


#: The order in which each source's numbers go to the elements: ``'column-major'``
#: (chop.m's sequential order) or ``'row-major index'`` (element ``i`` in C order gets
#: counter ``offset + i``, whatever the memory layout).
ELEMENT_ORDER = {
    Source.MATLAB_STREAM: "column-major",
    Source.GENERATOR: "column-major",
    Source.RANDFUNC: "column-major",
    Source.DEVICE_COUNTER: "row-major index",
    Source.SEEDED_COUNTER: "row-major index",
    Source.GIVEN: "row-major index",
}

#: What ``Chop(..., rng=<int seed>)`` draws from: the counter-based generator
#: (:attr:`Source.SEEDED_COUNTER`), the same numbers on every engine.
INT_SEED_SOURCE = Source.SEEDED_COUNTER


@dataclass(frozen=True)
class SourcePlan:
    """Where one call's numbers come from: ``stochastic`` for rounding modes 5 and 6,
    ``flips`` for bit flips."""

    stochastic: Source
    flips: Source


def default_source(library: str, device_type: str = "cpu") -> Source:
    """The source of an array with neither ``rng`` nor ``randfunc``.

    Parameters
    ----------
    library : {'numpy', 'torch', 'cupy', 'jax'}
        The array's library (a concrete JAX array draws on the host; see the
        JAX rows of ``docs/randomness.rst`` for keys and traced arrays).
    device_type : str
        ``'cpu'`` or a GPU type such as ``'cuda'``.

    Returns
    -------
    Source
        :attr:`Source.MATLAB_STREAM` on the CPU; :attr:`Source.DEVICE_COUNTER`
        on a GPU, except inside ``matlab_stream_on_device()`` (then MATLAB's stream).
    """
    if library == "cupy" or (library == "torch" and device_type != "cpu"):
        return Source.DEVICE_COUNTER if draws_on_device(MATLAB_STREAM) else Source.MATLAB_STREAM
    if library in ("numpy", "torch", "jax"):  # a concrete JAX array draws on the host
        return Source.MATLAB_STREAM
    raise ValueError(f"Unknown array library {library!r}; expected 'numpy', 'torch', 'cupy' or 'jax'.")


def source_for(x: Any, *, randfunc: Optional[Callable] = None, rng: Any = None) -> SourcePlan:
    """Where ``chop(x, options)`` (``rng=None``) or ``Chop(options, rng=rng)(x)`` draws.

    Parameters
    ----------
    x : array
        The input (its library and device pick the default).
    randfunc : callable, optional
        ``options.randfunc``, if given.
    rng : numpy.random.Generator or int, optional
        ``Chop``'s ``rng`` argument.

    Returns
    -------
    SourcePlan

    Examples
    --------
    >>> import numpy as np
    >>> from pychop_compat.random.sources import source_for
    >>> source_for(np.zeros(3))
    SourcePlan(stochastic=<Source.MATLAB_STREAM: 'matlab_stream'>, flips=<Source.MATLAB_STREAM: 'matlab_stream'>)
    >>> source_for(np.zeros(3), randfunc=np.random.default_rng(0).random, rng=7).stochastic
    <Source.RANDFUNC: 'randfunc'>
    """
    from ..libraries import array_library

    if rng is None:
        library = array_library(x)
        device = getattr(x, "device", "cpu")
        device_type = getattr(device, "type", None) or ("cpu" if library != "cupy" else "cuda")
        base = default_source(library, device_type)
    elif isinstance(rng, np.random.Generator):
        base = Source.GENERATOR
    else:
        base = INT_SEED_SOURCE
    stochastic = Source.RANDFUNC if randfunc is not None and randfunc is not default_randfunc else base
    return SourcePlan(stochastic=stochastic, flips=base)
