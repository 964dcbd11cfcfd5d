"""MATLAB's global random stream: ``rng``, ``rand`` and ``randi``.

MATLAB's default generator is the Mersenne Twister mt19937ar.  ``rng(s)``
seeds it with ``init_genrand(s)`` (``rng(0)`` and ``rng('default')`` use the
reference seed 5489); ``rand`` forms each double from two 32-bit outputs
``a, b`` as ``((a >> 5) * 2^26 + (b >> 6)) / 2^53`` and fills arrays in
column-major order; ``randi(imax)`` maps one such uniform ``u`` to
``1 + floor(imax * u)``.  NumPy's legacy :class:`numpy.random.RandomState`
implements exactly this generator, seeding and double construction, so it
drives the stream here.  The evidence for each rule (MathWorks' published
outputs, and the stored MATLAB corpus) is in the test suite.
"""

from __future__ import annotations

import math
import operator
import time
from dataclasses import dataclass
from typing import Any, Union

import numpy as np

__all__ = ["rng", "rand", "randi", "RngSettings", "stream_uniform", "stream_randi"]

_DEFAULT_SEED_WORD = 5489  # mt19937ar's reference seed, used by MATLAB for rng(0)
_stream = np.random.RandomState(_DEFAULT_SEED_WORD)
_seed: int = 0


@dataclass(frozen=True)
class RngSettings:
    """Generator settings, as returned by MATLAB's ``s = rng``.

    Attributes
    ----------
    Type : str
        Always ``'twister'``.
    Seed : int
        The seed given to :func:`rng` (0 for ``'default'``).
    State : numpy.ndarray
        625 ``uint32`` words: the 624-word Mersenne Twister key followed by the
        position in it.  Pass the object back to :func:`rng` to restore it.
    """

    Type: str
    Seed: int
    State: np.ndarray

    def __eq__(self, other):
        return (
            isinstance(other, RngSettings)
            and (self.Type, self.Seed) == (other.Type, other.Seed)
            and np.array_equal(self.State, other.State)
        )

    __hash__ = None


def _settings() -> RngSettings:
    _, key, pos, _, _ = _stream.get_state(legacy=True)
    state = np.append(np.asarray(key, dtype=np.uint32), np.uint32(pos))
    return RngSettings("twister", _seed, state)


def _seed_word(seed) -> int:
    try:
        s = operator.index(seed)
    except TypeError:
        if isinstance(seed, float) and seed.is_integer():
            s = int(seed)
        else:
            raise ValueError(f"The seed must be a nonnegative integer less than 2^32, got {seed!r}.") from None
    if not 0 <= s < 2**32:
        raise ValueError(f"The seed must be a nonnegative integer less than 2^32, got {seed!r}.")
    return s


def rng(*args: Any) -> RngSettings:
    """Control MATLAB's global random stream (MATLAB ``rng``).

    Calling forms::

        rng(seed)             # Mersenne Twister seeded with init_genrand(seed); rng(0) = rng('default')
        rng(seed, 'twister')
        rng('default')        # the state MATLAB starts with (also the state at import)
        rng('shuffle')        # seed from the clock
        s = rng()             # current settings
        rng(s)                # restore settings returned earlier

    Parameters
    ----------
    *args
        As above.  Only the ``'twister'`` generator exists.

    Returns
    -------
    RngSettings
        The settings in force *before* the call (MATLAB's ``sprev = rng(...)``);
        with no argument, the current settings.

    Examples
    --------
    >>> _ = rng(1)
    >>> round(float(rand()), 15)
    0.417022004702574
    """
    global _seed
    previous = _settings()
    if not args:
        return previous
    if len(args) > 2:
        raise ValueError("rng takes at most two arguments: rng(seed, 'twister').")
    if len(args) == 2 and args[1] != "twister":
        raise ValueError(f"Only the 'twister' generator is supported, got {args[1]!r}.")
    arg = args[0]
    if isinstance(arg, RngSettings):
        state = np.asarray(arg.State, dtype=np.uint32)
        _stream.set_state(("MT19937", state[:624], int(state[624]), 0, 0.0))
        _seed = arg.Seed
        return previous
    if isinstance(arg, str):
        if arg == "default":
            arg = 0
        elif arg == "shuffle":
            arg = int(time.time_ns() % 2**32)
        else:
            raise ValueError(f"Unknown rng option {arg!r}; use a seed, 'default', 'shuffle' or settings.")
    word = _seed_word(arg)
    _stream.seed(word if word != 0 else _DEFAULT_SEED_WORD)
    _seed = word
    return previous


def stream_uniform(n: int) -> np.ndarray:
    """The next ``n`` doubles of the stream, in order (``rand(n, 1)`` as a flat array)."""
    return _stream.random_sample(n)


def stream_randi(imax: int, n: int) -> np.ndarray:
    """The next ``n`` integers ``1 + floor(imax * u)`` of the stream (``randi(imax, n, 1)`` flat)."""
    return 1 + np.floor(imax * _stream.random_sample(n)).astype(np.int64)


def _shape_and_class(args, name):
    args = list(args)
    cls = "double"
    if args and isinstance(args[-1], str):
        cls = args.pop()
        if cls not in ("double", "single"):
            raise ValueError(f"{name}: the class must be 'double' or 'single', got {cls!r}.")
    if not args:
        shape = (1, 1)
    elif len(args) == 1 and np.ndim(args[0]) == 1:
        shape = tuple(args[0])
    elif len(args) == 1:
        shape = (args[0], args[0])
    else:
        shape = tuple(args)
    dims = []
    for d in shape:
        try:
            dims.append(max(operator.index(d), 0))
        except TypeError:
            if isinstance(d, float) and d.is_integer():
                dims.append(max(int(d), 0))
            else:
                raise ValueError(f"{name}: size arguments must be integers, got {d!r}.") from None
    return tuple(dims), cls


def _fill(values: np.ndarray, shape, cls):
    out = values.reshape(shape, order="F")
    if cls == "single":
        out = out.astype(np.float32)
    if out.shape == (1, 1):
        return out[0, 0]
    return out


def rand(*args: Any) -> Union[float, np.ndarray]:
    """Uniform random numbers in (0, 1) from MATLAB's stream (MATLAB ``rand``).

    ``rand()`` is a scalar, ``rand(n)`` is n-by-n, ``rand(m, n, ...)`` and
    ``rand([m, n])`` have that shape; a trailing ``'single'`` or ``'double'``
    picks the class.  Arrays are filled in column-major order, so they hold
    the same numbers in the same places as in MATLAB.

    Notes
    -----
    ``'single'`` returns the double draws rounded to single precision.  MATLAB's
    own construction of single-precision draws is undocumented and has not
    been checked against MATLAB; do not rely on it for bit-exact ports.

    Returns
    -------
    numpy.float64 or numpy.ndarray
        A scalar for a 1-by-1 result, else a ``(m, n, ...)`` array.

    Examples
    --------
    >>> _ = rng('default')
    >>> rand(1, 5).round(4)
    array([[0.8147, 0.9058, 0.127 , 0.9134, 0.6324]])
    """
    shape, cls = _shape_and_class(args, "rand")
    return _fill(stream_uniform(math.prod(shape)), shape, cls)


def randi(imax: Any, *args: Any) -> Union[float, np.ndarray]:
    """Uniform random integers from MATLAB's stream (MATLAB ``randi``).

    ``randi(imax, ...)`` draws from ``1..imax`` and ``randi([imin, imax], ...)``
    from ``imin..imax``, one uniform ``u`` per integer:
    ``imin + floor((imax - imin + 1) * u)``.  Size arguments are as for :func:`rand`.

    Returns
    -------
    numpy.float64 or numpy.ndarray
        Integer values stored as doubles (MATLAB's default class).

    Examples
    --------
    >>> _ = rng('default')
    >>> randi([-5, 5], 10, 1).ravel().astype(int).tolist()
    [3, 4, -4, 5, 1, -4, -2, 1, 5, 5]
    """
    bounds = np.atleast_1d(np.asarray(imax))
    if bounds.size == 1:
        lo, hi = 1, bounds[0]
    elif bounds.size == 2:
        lo, hi = bounds
    else:
        raise ValueError("randi: the first argument must be imax or [imin, imax].")
    if lo != np.floor(lo) or hi != np.floor(hi) or hi < lo:
        raise ValueError(f"randi: need integers imin <= imax, got [{lo}, {hi}].")
    shape, cls = _shape_and_class(args, "randi")
    u = stream_uniform(math.prod(shape))
    return _fill(float(lo) + np.floor((float(hi) - float(lo) + 1.0) * u), shape, cls)


def default_randfunc(n: int) -> np.ndarray:
    """chop.m's default ``randfunc``: ``@(n) rand(n, 1)``, as a column of the stream."""
    return stream_uniform(n).reshape(n, 1)
