"""MATLAB's global random stream: ``rng``, ``rand`` and ``randi``.

MATLAB's default generator is the Mersenne Twister mt19937ar, seeded with
``init_genrand(s)`` (``rng(0)`` is the reference seed 5489); ``rand`` makes each
double from two 32-bit outputs ``a, b`` as ``((a >> 5) * 2^26 + (b >> 6)) / 2^53``,
column-major; ``randi(imax)`` is ``1 + floor(imax * u)``.  NumPy's legacy
:class:`numpy.random.RandomState` is exactly this generator, so it drives the stream.

There is one stream per process, guarded by a re-entrant lock
(:func:`exclusive_stream`).  In a forked child, or any child started by
``multiprocessing``, the first draw raises :class:`ForkedStreamError` unless
:func:`rng` was called there first: it would repeat the parent's or its
siblings' numbers (``docs/randomness.rst``).
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import operator
import os
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional, Tuple, TypeVar, Union

import numpy as np

__all__ = ["rng", "rand", "randi", "RngSettings", "stream_uniform", "stream_uniform_one", "stream_randi",
           "ForkedStreamError", "exclusive_stream", "fork_generation", "restore_stream", "stream_state",
           "on_stream_state"]

_DEFAULT_SEED_WORD = 5489  # mt19937ar's reference seed, used by MATLAB for rng(0)
_bit_generator = np.random.MT19937()
_stream = np.random.RandomState(_bit_generator)
_stream.seed(_DEFAULT_SEED_WORD)
T = TypeVar("T")
_state_view: Any = None  # (key, pos) sharing memory with _bit_generator's state, or False
_seed: int = 0
_lock = threading.RLock()

# Fork tracking: _generation counts the forks between the first process and this
# one; _seeded_generation is the generation in which rng() last set the stream.
_generation = 0
_seeded_generation = 0



def _in_multiprocessing_child() -> bool:
    """Whether this process is a child started by ``multiprocessing`` (any start method)."""
    mp = sys.modules.get("multiprocessing")  # a child's bootstrap imports it before any user code
    if mp is None:
        return False
    # parent_process() is set only once the child's bootstrap is done.  Spawn and forkserver import the
    # main module (and with it, often, this package) earlier, in spawn.prepare() or the server's preload,
    # while current_process() is marked "_inheriting": the flag CPython's own spawn module reads to
    # tell that import from the parent's (spawn._check_not_importing_main).
    return mp.parent_process() is not None or bool(getattr(mp.current_process(), "_inheriting", False))


# A child started by multiprocessing starts at rng('default'), like all its siblings: not seeded for this
# process.  (A forkserver's children are forks of the server: _generation counts those forks.)
if _in_multiprocessing_child():
    _seeded_generation = -1


class ForkedStreamError(RuntimeError):
    """A random draw in a child process from a generator not seeded there.

    Raised for MATLAB's stream in a forked child, or any child started by
    ``multiprocessing``, that has not called :func:`rng`, and for a
    ``Chop(..., rng=...)`` inherited by ``fork``: the child would repeat the
    numbers of its parent or siblings.  Seed the generator in the child first
    (``rng(seed)``), or make it there (a ``Chop`` created in, or pickled to, the child).
    """


def fork_generation() -> int:
    """How many ``fork`` calls separate this process from the one that imported the package
    (objects that own random state record it, to detect that a forked child inherited them)."""
    return _generation


def _after_fork_in_child() -> None:
    global _lock, _generation
    _lock = threading.RLock()  # the parent's lock belongs to the parent's threads
    _generation += 1


if hasattr(os, "register_at_fork"):  # the lock is held across fork: no draw is half done in the child's copy
    os.register_at_fork(before=lambda: _lock.acquire(), after_in_parent=lambda: _lock.release(),
                        after_in_child=_after_fork_in_child)


def exclusive_stream() -> threading.RLock:
    """The stream's lock: ``with exclusive_stream(): ...`` makes a run of draws no other thread enters
    (re-entrant; chop holds it for a whole call, so each call's numbers are a contiguous run)."""
    return _lock


def restore_stream(settings: RngSettings) -> None:
    """Put the stream back to ``settings`` (from ``rng()``) after a failed call; unlike
    ``rng(settings)``, this does not count as seeding the stream in a child process."""
    global _seed
    with _lock:
        state = np.asarray(settings.State, dtype=np.uint32)
        _stream.set_state(("MT19937", state[:624], int(state[624]), 0, 0.0))
        _seed = settings.Seed


def _check_seeded() -> None:
    """Refuse a draw in a child process that has not seeded the stream (see the module notes)."""
    if _seeded_generation != _generation:
        raise ForkedStreamError(
            "MATLAB's random stream was not seeded in this child process: it would repeat the numbers "
            "of the parent or of the other children (fork copies the parent's stream; spawn and "
            "forkserver start every child at rng('default')). Seed it in this process first, e.g. "
            "pychop_compat.rng(seed_of_this_task), or use a Chop(..., rng=...) made for each task "
            "(see the randomness contract in the docs).")


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

    def __repr__(self) -> str:
        # Short, as MATLAB shows a struct with an array field ("State: [625x1 uint32]").
        position = int(self.State[-1]) if self.State.size else 0
        return (f"RngSettings(Type={self.Type!r}, Seed={self.Seed!r}, "
                f"State=<{self.State.size} uint32 words, position {position}>)")

    # State compared by value.  (hash() raises: the frozen dataclass's __hash__ meets the array.)
    def __eq__(self, other):
        return (isinstance(other, RngSettings) and (self.Type, self.Seed) == (other.Type, other.Seed)
                and np.array_equal(self.State, other.State))


def _whole_number(value: Any) -> Optional[int]:
    """An integer, or a float with an integer value, as an int; else None."""
    try:
        return operator.index(value)
    except TypeError:
        return int(value) if isinstance(value, float) and value.is_integer() else None


# MATLAB's other generators (the rng page's "generator" argument): refused by name, not as unknown options.
_OTHER_GENERATORS = ("simdTwister", "combRecursive", "multFibonacci", "philox", "threefry", "v4", "v5uniform",
                     "v5normal")


def _checked_settings(settings: RngSettings) -> RngSettings:
    """``settings`` for ``rng(settings)``, the State as 625 flat words; ``ValueError`` if they are not
    a twister state that ``rng()`` could have returned."""
    if settings.Type != "twister":  # MATLAB's rng(s) switches to the generator s.Type names
        raise ValueError(f"rng(s): only the 'twister' generator is supported, got s.Type = {settings.Type!r}.")
    seed = _whole_number(settings.Seed)
    if seed is None or not 0 <= seed < 2**32:
        raise ValueError(f"rng(s): s.Seed must be a nonnegative integer less than 2^32, got {settings.Seed!r}.")
    state = np.asarray(settings.State)
    if state.dtype != np.uint32 or state.size != 625:
        raise ValueError(f"rng(s): s.State must be 625 uint32 words (as rng() returns), got {state.size} "
                         f"of dtype {state.dtype}.")
    state = state.ravel()
    # MT19937's recurrence uses the top bit of key[0] and all of key[1:]: if those are zero, the state
    # is its fixed point and every later word is 0.  A position beyond 624 would read past the key.
    if not (state[0] & 0x80000000 or state[1:624].any()):
        raise ValueError("rng(s): s.State is the all-zero Mersenne Twister key, which is not a valid state.")
    if state[624] > 624:
        raise ValueError(f"rng(s): the position s.State[624] must be at most 624, got {int(state[624])}.")
    return RngSettings("twister", seed, state)


def rng(*args: Any) -> RngSettings:
    """Control MATLAB's global random stream (MATLAB ``rng``).

    Calling forms::

        rng(seed)             # Mersenne Twister seeded with init_genrand(seed); rng(0) = rng('default')
        rng(seed, 'twister')
        rng('default')        # the state MATLAB starts with (also the state at import)
        rng('twister')        # rng(0, 'twister'), as MATLAB's rng(generator) is rng(0, generator)
        rng('shuffle')        # seed from the clock
        s = rng()             # current settings
        rng(s)                # restore settings returned earlier

    Parameters
    ----------
    *args
        As above.  Only the ``'twister'`` generator exists: another generator name,
        or settings ``s`` whose ``Type`` is not ``'twister'``, raises ``ValueError``,
        as do settings whose ``State`` is not 625 ``uint32`` words (the 624-word key,
        not all zero, then a position at most 624) or whose ``Seed`` is not a seed.

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
    global _seed, _seeded_generation
    with _lock:
        _, key, pos, _, _ = _stream.get_state(legacy=True)
        previous = RngSettings("twister", _seed, np.append(np.asarray(key, dtype=np.uint32), np.uint32(pos)))
        if not args:
            return previous
        if len(args) > 2:
            raise ValueError("rng takes at most two arguments: rng(seed, 'twister').")
        if len(args) == 2 and args[1] != "twister":
            raise ValueError(f"Only the 'twister' generator is supported, got {args[1]!r}.")
        arg = args[0]
        if isinstance(arg, RngSettings):
            restore_stream(_checked_settings(arg))
            _seeded_generation = _generation
            return previous
        if isinstance(arg, str):
            if arg == "default":
                arg = 0
            elif arg == "shuffle":
                arg = int(time.time_ns() % 2**32)
            elif arg == "twister" and len(args) == 1:  # MATLAB's rng(generator) is rng(0, generator) (R2023b)
                arg = 0
            elif arg in _OTHER_GENERATORS:
                raise ValueError(f"Only the 'twister' generator is supported, got {arg!r}.")
            else:
                raise ValueError(f"Unknown rng option {arg!r}; use a seed, 'default', 'shuffle' or settings.")
        word = _whole_number(arg)
        if word is None or not 0 <= word < 2**32:
            raise ValueError(f"The seed must be a nonnegative integer less than 2^32, got {arg!r}.")
        _stream.seed(word or _DEFAULT_SEED_WORD)
        _seed = word
        _seeded_generation = _generation
        return previous


def stream_uniform(n: int) -> np.ndarray:
    """The next ``n`` doubles of the stream, in order (``rand(n, 1)`` as a flat array).

    Raises
    ------
    ForkedStreamError
        In a forked child that has not called :func:`rng`.
    """
    with _lock:
        _check_seeded()
        return _stream.random_sample(n)


def stream_uniform_one() -> float:
    """The next double of the stream as a Python float: ``float(stream_uniform(1)[0])``, faster
    (raising as :func:`stream_uniform` does)."""
    _lock.acquire()  # (measured faster than ``with``; this runs once per scalar operation)
    try:
        _check_seeded()
        return _stream.random_sample()
    finally:
        _lock.release()


def _shared_state() -> Optional[Tuple[np.ndarray, np.ndarray]]:
    """``(key, pos)`` arrays on the generator's own state (NumPy's ``mt19937_state``: 624 words,
    then the position as a C int), or None when that layout does not check out here."""
    global _state_view
    if _state_view is None:
        _state_view = False
        with contextlib.suppress(Exception):  # another NumPy's layout: copy the state instead
            words = (ctypes.c_uint32 * 625).from_address(_bit_generator.ctypes.state_address)
            raw = np.ctypeslib.as_array(words)
            key, pos = raw[:624], raw[624:].view(np.intc)
            state = _bit_generator.state["state"]
            if np.array_equal(key, state["key"]) and int(pos[0]) == int(state["pos"]):
                _state_view = (key, pos)
    return _state_view or None


@contextlib.contextmanager
def stream_state() -> Iterator[Tuple[np.ndarray, np.ndarray]]:
    """Lend the stream's MT19937 state to code that draws as :func:`stream_uniform` does.

    ``with stream_state() as (key, pos): ...`` holds the stream's lock and
    yields the 624 state words (``uint32``) and a one-element array with the
    position of the next word; what the block leaves in them is the stream's
    state afterwards (the generator's own memory where NumPy's layout allows,
    else a copy written back).  The block must not call the other draws here.

    Raises
    ------
    ForkedStreamError
        In a forked child that has not called :func:`rng`.
    """
    with _lock:
        _check_seeded()
        shared = _shared_state()
        if shared is not None:
            yield shared
            return
        state = _bit_generator.state
        key = np.array(state["state"]["key"], np.uint32)
        pos = np.array([state["state"]["pos"]], np.intc)
        yield key, pos
        state["state"] = {"key": key, "pos": int(pos[0])}
        _bit_generator.state = state


def on_stream_state(draw: Callable[..., T], *args: Any) -> T:
    """``draw(*args, key, pos)`` on the stream's state, as in ``with stream_state() as (key,
    pos)``, and its result: the same loan as a call (a ``with`` block on a generator costs a
    microsecond, as much as a small call's rounding)."""
    with _lock:
        if _seeded_generation != _generation:
            _check_seeded()
        shared = _state_view or _shared_state()
        if shared:
            return draw(*args, *shared)
    with stream_state() as (key, pos):
        return draw(*args, key, pos)


def stream_randi(imax: int, n: int) -> np.ndarray:
    """The next ``n`` integers ``1 + floor(imax * u)`` of the stream (``randi(imax, n, 1)`` flat)."""
    return 1 + np.floor(imax * stream_uniform(n)).astype(np.int64)


def _shape_and_class(args, name):
    args = list(args)
    cls = "double"
    if args and isinstance(args[-1], str):
        cls = args.pop()
        if cls not in ("double", "single"):
            raise ValueError(f"{name}: the class must be 'double' or 'single', got {cls!r}.")
    if len(args) == 1:  # rand(n) is n-by-n, and so is rand([n]): MATLAB's [n] is the scalar n
        size = list(np.ravel(args[0])) if np.ndim(args[0]) else [args[0]]
        # rand([]) is MATLAB's 0-by-0 empty array (as zeros([]) is): no number drawn
        shape = (0, 0) if not size else tuple(size) if len(size) != 1 else (size[0], size[0])
    else:
        shape = tuple(args) or (1, 1)
    dims = [_whole_number(d) for d in shape]
    if None in dims:
        raise ValueError(f"{name}: size arguments must be integers, got {shape[dims.index(None)]!r}.")
    while len(dims) > 2 and dims[-1] == 1:  # MATLAB drops trailing singleton dimensions beyond the second
        dims.pop()
    return tuple(max(d, 0) for d in dims), cls


def _fill(values: np.ndarray, shape, cls):
    out = values.reshape(shape, order="F").astype(np.float32 if cls == "single" else np.float64, copy=False)
    return out[0, 0] if out.shape == (1, 1) else out


def rand(*args: Any) -> Union[float, np.ndarray]:
    """Uniform random numbers in (0, 1) from MATLAB's stream (MATLAB ``rand``).

    ``rand()`` is a scalar, ``rand(n)`` is n-by-n, ``rand(m, n, ...)`` and
    ``rand([m, n])`` have that shape, filled in column-major order as in
    MATLAB; ``rand([])`` is a 0-by-0 array (nothing drawn); a trailing
    ``'single'`` or ``'double'`` picks the class.

    Notes
    -----
    ``'single'`` rounds the double draws to single; MATLAB's own single draws
    are undocumented and unchecked: do not rely on them for bit-exact ports.

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
    The bounds must be finite integers with ``imin <= imax``, at most flintmax
    (``2**53``) in magnitude, and the range holds at most ``2**53`` integers, the
    most that one double ``u`` can reach (MATLAB refuses larger ranges too);
    ``ValueError`` otherwise.

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
    bounds = np.asarray(imax).ravel()  # MATLAB's [imin imax] may come as a 1 x 2 matrix (from a MAT-file)
    if bounds.size not in (1, 2):
        raise ValueError("randi: the first argument must be imax or [imin, imax].")
    lo, hi = (1, bounds[0]) if bounds.size == 1 else bounds
    # Compared as exact Python ints: a uint64 or a huge int (an object array) must not round to flintmax.
    ilo, ihi = (_whole_number(b.item() if isinstance(b, np.generic) else b) for b in (lo, hi))
    if ilo is None or ihi is None:  # MATLAB refuses Inf and NaN too (it would return Inf or NaN)
        raise ValueError(f"randi: imin and imax must be finite integers, got [{lo}, {hi}].")
    if ihi < ilo:
        raise ValueError(f"randi: need integers imin <= imax, got [{lo}, {hi}].")
    # Beyond flintmax the doubles skip integers, and 2^53 uniforms u = k/2^53 reach at most 2^53 of them.
    if max(abs(ilo), abs(ihi)) > 2**53 or ihi - ilo + 1 > 2**53:
        raise ValueError(f"randi: imin and imax must be at most flintmax (2^53) in magnitude and span at most "
                         f"2^53 integers, got [{lo}, {hi}].")
    shape, cls = _shape_and_class(args, "randi")
    u = stream_uniform(math.prod(shape))
    return _fill(float(ilo) + np.floor((float(ihi) - float(ilo) + 1.0) * u), shape, cls)


def default_randfunc(n: int) -> np.ndarray:
    """chop.m's default ``randfunc``: ``@(n) rand(n, 1)``, as a column of the stream."""
    return stream_uniform(n).reshape(n, 1)
