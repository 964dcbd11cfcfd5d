"""The MATLAB facade: ``chop``, ``clear_chop``, ``chop_options``, ``roundit`` and ``Chop``.

A call either succeeds or changes nothing: options are validated and the
input checked before any random number is drawn, and the persistent options
are stored only when the call returns.  The persistent options are kept per
thread (see :class:`PersistentOptions`).
"""

from __future__ import annotations

import numbers
import os
import sys
import threading
from typing import Any, Generic, Optional, TypeVar

import numpy as np

from ..random import matlab_stream
from ..engines import dispatch
from ..engines.numpy_engine import as_float_array, on_array_kind
from ..kernels import numpy_fast
from ..libraries import array_library, unsupported_type_error
from .options import (DEFAULT_SPEC, ChopSpec, Options, default_rules, given_fields, params_pair, as_switch,
                      options_are_empty, probability, resolve, round_mode)
from ..random.matlab_stream import default_randfunc
from ..rules.chop import roundit_vector
from ..spec import FLIP_PRECISION_ERROR, RoundingSpec
from ..random.sources import (MATLAB_STREAM, ForkedStreamError, RandomSources, counter_sources, fork_generation,
                         generator_sources, sources_for)

__all__ = ["chop", "clear_chop", "chop_options", "roundit", "Chop", "PersistentOptions", "explain", "chop_jax"]


#: The main thread's identity, looked up once (``threading.main_thread().ident`` costs two Python
#: calls on every chop call); a forked child's main thread is the one that forked.
_main_thread_ident = threading.main_thread().ident


def _forked_child_main_thread() -> None:
    global _main_thread_ident
    _main_thread_ident = threading.get_ident()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked_child_main_thread)


_Stored = TypeVar("_Stored")


class PersistentOptions(Generic[_Stored]):
    """chop.m's persistent ``fpopts``, one per thread (also cpfloat's).

    A thread that has stored nothing reads what the main thread has stored (so
    ``chop(None, options)`` in the main thread serves a thread pool), and a call
    without options stores nothing in it.
    """

    def __init__(self) -> None:
        self.main: Optional[_Stored] = None  # the main thread's (read by chop directly)
        self._local = threading.local()

    def state(self) -> tuple:
        """``(stored, owned)``: the stored options this thread sees (``None``: nothing stored), and
        whether this thread has its own (the main thread always has)."""
        if threading.get_ident() == _main_thread_ident:
            return self.main, True
        if getattr(self._local, "owned", False):
            return self._local.spec, True
        return self.main, False

    def write(self, spec: Optional[_Stored]) -> None:
        """Store ``spec`` (``None`` clears) for this thread."""
        if threading.get_ident() == _main_thread_ident:
            self.main = spec
        else:
            self._local.owned = True
            self._local.spec = spec


_persistent: PersistentOptions[ChopSpec] = PersistentOptions()


_SINGLE_DTYPE_NAMES = ("float32", "float16", "bfloat16")


def _reject_complex(x) -> None:
    """chop.m's first check, made before any option is stored: the input must be real."""
    dtype = getattr(x, "dtype", None)  # NumPy, CuPy and torch arrays, NumPy scalars
    if dtype is not None:
        complex_ = getattr(dtype, "is_complex", False) or getattr(dtype, "kind", "") == "c"
    elif isinstance(x, (list, tuple)):
        complex_ = np.iscomplexobj(np.asarray(x))
    else:
        complex_ = isinstance(x, complex)
    if complex_:
        raise ValueError("Chop requires a real input array.")


_FLOAT64, _FLOAT32 = np.dtype(np.float64), np.dtype(np.float32)


def _checked_class(x) -> str:
    """MATLAB class ('single' or 'double') of an accepted input, after rejecting complex input."""
    kind = type(x)
    if kind is float:  # the hot paths: MATLAB code chops scalars and small arrays in loops
        return "double"
    if kind is np.ndarray:
        dtype = x.dtype
        if dtype is _FLOAT64:  # (NumPy's own native float64 and float32 descriptors)
            return "double"
        if dtype is _FLOAT32:
            return "single"
    _reject_complex(x)
    if x is None:
        return "double"
    library = "numpy" if type(x) is np.ndarray else array_library(x)
    if library == "unsupported":
        raise unsupported_type_error(x)
    if library == "pandas" and not hasattr(x, "dtype"):  # a DataFrame: one class for all columns
        from ..engines.labelled import frame_dtype

        return "single" if str(frame_dtype(x)) in _SINGLE_DTYPE_NAMES else "double"
    if library != "numpy":
        # torch/cupy: float32, float16 and bfloat16 are computed in single; the rest in double.
        return "single" if str(x.dtype).rpartition(".")[2] in _SINGLE_DTYPE_NAMES else "double"
    return "single" if getattr(x, "dtype", None) in (np.float32, np.float16) else "double"


def _chop_checked(x, prepared: dispatch.PreparedRounding):
    """Round ``x`` by a spec that draws; on failure nothing has been drawn from MATLAB's stream.

    A call that may draw from the stream holds it (its numbers are a contiguous
    run), and puts it back when a user's ``randfunc`` fails after the flips drew.
    (A spec without random numbers is rounded by ``prepared`` directly.)
    """
    spec, sources = prepared.spec, prepared.sources
    if spec.flips and spec.fmt.t < 2:
        raise ValueError(FLIP_PRECISION_ERROR)
    if not sources.uses_matlab_stream:
        return prepared(x)
    if not (spec.flips and spec.stochastic and sources.stochastic is not MATLAB_STREAM.stochastic):
        return prepared.holding_stream(x)
    with matlab_stream.exclusive_stream():
        saved = matlab_stream.rng()
        try:
            return prepared(x)
        except BaseException:
            matlab_stream.restore_stream(saved)
            raise


def chop(x: Any = None, options: Any = None) -> Any:
    """Round the elements of ``x`` to a lower-precision format (MATLAB ``chop``).

    Parameters
    ----------
    x : array_like, scalar, torch.Tensor, cupy.ndarray or None
        Real values.  The result has the same type, shape, dtype (and device);
        integer and bool input is rounded as float64.  ``None`` (or ``[]``)
        only sets the options, like MATLAB's ``chop([], options)``.
    options : Mapping, Options, object with attributes, or None
        MATLAB's option struct (see :class:`Options`).  Given, it defines
        every setting, missing fields taking their defaults (an empty dict is
        MATLAB's ``struct()``: all defaults); ``None`` (MATLAB's ``[]``)
        reuses the settings stored by this thread's previous call (the
        defaults on first use or after :func:`clear_chop`).

    Returns
    -------
    same type as ``x``
        The rounded values (a new object: ``x`` is never modified); ``None``
        for ``x=None`` and an empty float64 array for ``x=[]``.

    Raises
    ------
    TypeError
        For options that are not a mapping or an object with attributes,
        an unsupported dtype or array kind, or ``randfunc`` output that is not real.
    ValueError
        For complex input, an unknown option or format, an option value out of
        its range, a custom precision over chop.m's limit for the class of
        ``x``, or ``randfunc`` output of the wrong size or outside [0, 1).
        A call that raises stores nothing and draws nothing from MATLAB's stream.
    ForkedStreamError
        On a draw from MATLAB's stream in a forked child that has not called
        :func:`rng`.

    Notes
    -----
    Stochastic rounding and bit flips draw from MATLAB's stream (:func:`rng`) in
    chop.m's order, unless ``options.randfunc`` supplies the stochastic draws.

    Examples
    --------
    >>> chop(1/3, {'format': 'h'})
    0.333251953125
    >>> chop(1/3, {'format': 'b', 'round': 2})
    0.333984375
    >>> chop(1/3)  # the options of the previous call
    0.333984375
    """
    scalar = type(x) is float  # (the hot paths first: MATLAB code chops scalars in loops)
    x_class = "double" if scalar or (type(x) is np.ndarray and x.dtype is _FLOAT64) else _checked_class(x)
    if threading.get_ident() == _main_thread_ident:  # (PersistentOptions.state, inlined: the usual call)
        stored, owned = _persistent.main, True
    else:
        stored, owned = _persistent.state()
    # chop.m stores on every call.  Without options that re-stores what is stored (or the
    # defaults, when nothing is): a thread reading the main thread's options keeps reading them.
    if options is None:  # MATLAB's []: the stored settings (the usual call in a loop)
        settings = DEFAULT_SPEC if stored is None else stored
        store = stored is None and owned
    else:
        settings = resolve(options, stored, x_class)
        store = type(options) is dict or not options_are_empty(options) or (stored is None and owned)
    result: Any
    if scalar and settings.scalar_path:
        # No random numbers, nothing to check, straight to the router's first kernel ('scalar').
        result = numpy_fast.chop_scalar(x, settings.spec, MATLAB_STREAM)
    elif type(x) is not np.ndarray and (x is None or (isinstance(x, (list, tuple)) and len(x) == 0)):
        # MATLAB's chop([], options): only set the options
        result = None if x is None else np.zeros(0)
    elif settings.spec.draws:
        result = _chop_checked(x, settings.prepared)
    else:  # no random numbers: nothing to check or hold
        result = settings.prepared(x)
    if store:
        _persistent.write(settings)
    return result


def clear_chop() -> None:
    """Forget this thread's persistent options (MATLAB ``clear chop``)."""
    _persistent.write(None)


def chop_options() -> Options:
    """The persistent options, filled in (MATLAB ``[~, options] = chop``); stores the defaults
    first when nothing is stored yet, as MATLAB does.

    Examples
    --------
    >>> clear_chop()
    >>> o = chop_options()
    >>> o.format, o.subnormal, o.round, o.params
    ('h', 1, 1, [11, 15])
    """
    stored, owned = _persistent.state()
    if stored is None:
        stored = resolve(None, None)
        if owned:
            _persistent.write(stored)
    return stored.to_options()


def roundit(x: Any, options: Any = None) -> Any:
    """Round to integers with one of chop's six modes (MATLAB ``roundit``).

    Parameters
    ----------
    x : array_like
        Real values (float32 or float64 arrays keep their dtype).
    options : dict, Options or object with attributes, optional
        ``round`` (1..6, default 1), ``flip`` (default 0), ``p`` (default 0.5),
        ``randfunc`` (default MATLAB's stream), and with ``flip``,
        ``params = [t, emax]`` (the bit to flip is among the ``t - 1`` lowest).

    Returns
    -------
    numpy.ndarray or scalar
        The rounded values, same shape and dtype.

    Examples
    --------
    >>> roundit([0.5, 1.5, 2.5, -2.5])
    array([ 0.,  2.,  2., -2.])
    >>> roundit([0.5, 1.5, -1.2], {'round': 4})
    array([ 0.,  1., -1.])
    """
    _reject_complex(x)
    given = given_fields(options) or {}
    mode = round_mode(given.get("round", 1))
    flip = bool(as_switch(given.get("flip", 0), "flip"))
    p = probability(given.get("p", 0.5))
    randfunc = given.get("randfunc", default_randfunc)
    if not callable(randfunc):
        raise ValueError(f"options.randfunc must be callable as randfunc(n), got {randfunc!r}.")
    t = 0
    if flip:
        if "params" not in given:
            raise ValueError("roundit with flip = 1 needs options.params = [t, emax] (t picks the bits).")
        t = params_pair(given["params"])[0]
        if t < 2:
            raise ValueError(FLIP_PRECISION_ERROR)
    sources = sources_for(randfunc)

    def compute(values):
        arr, restore = as_float_array(values)
        # roundit.m on the elements in MATLAB's column-major order (the order of its random numbers)
        out = roundit_vector(arr.ravel(order="F"), mode, sources, flip, p, t).reshape(arr.shape, order="F")
        return restore(out) if restore else out

    with matlab_stream.exclusive_stream():
        if isinstance(x, np.ndarray) and type(x) is not np.ndarray:
            return on_array_kind(x, compute)
        return compute(x)


class Chop:
    """A stateless chop: fixed options, no persistent state.

    ``Chop(options)`` or ``Chop(**options)`` (MATLAB option names), then
    ``ch(x)``.  Same semantics as :func:`~pychop_compat.chop` with those options, except that
    the persistent options are neither read nor changed.

    Parameters
    ----------
    options : Mapping, Options or object with attributes, optional
        The options; keyword arguments are merged over them.
    rng : int, numpy.random.Generator or numpy.random.SeedSequence, optional
        An int seed in ``[0, 2**64)`` (``ValueError`` otherwise): the counter-based generator of
        :mod:`pychop_compat.random.counter`; element ``i`` of the ``k``-th array
        (row-major) gets counter ``offset_k + i``, ``offset_k`` the total size of
        the arrays chopped before, so the results do not depend on the engine,
        the threads or the chunking.  A Generator (or a SeedSequence seeding
        one): sequential draws in chop.m's order.  Neither gives MATLAB's
        numbers; ``options.randfunc``, if given, still supplies the stochastic draws.
    **kwargs
        Options by name, e.g. ``format='b', round=5``.

    Notes
    -----
    A ``Chop`` pickles with its generator's state, and threads may share one
    (each call's numbers are a contiguous run of its generator).  One with its
    own generator that reaches a forked child by inheritance raises
    :class:`~pychop_compat.random.matlab_stream.ForkedStreamError` on its first
    draw there; make it in the child, or send it there pickled.

    Examples
    --------
    >>> to_bf16 = Chop(format='bfloat16')
    >>> to_bf16(1/3)
    0.333984375
    >>> to_bf16.options.subnormal
    0
    """

    def __init__(self, options: Any = None, /, *, rng: Any = None, **kwargs: Any) -> None:
        given = {**(given_fields(options) or {}), **kwargs}
        if isinstance(given.get("params"), (list, np.ndarray)):
            # Fixed options: a later change to the caller's list or array must not reach the
            # classes resolved on first use (MATLAB copies a struct; float32 calls resolve later).
            given["params"] = given["params"].copy()
        self._specs = {"double": resolve(given, None, "double")}
        self._given = given
        self._flips = _flip_sources(rng, "Chop's ")
        # An own generator inherited by fork would repeat its numbers in every child (see __call__).
        self._fork_generation = None if rng is None else fork_generation()
        self._draw_lock = threading.RLock()  # one call's draws from the generator are contiguous
        self._calls: dict = {}  # x_class -> (settings, PreparedRounding, per_element), made on first use

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        del state["_draw_lock"], state["_calls"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._draw_lock = threading.RLock()
        self._calls = {}
        if self._fork_generation is not None:  # a copy made here owns its generator here
            self._fork_generation = fork_generation()

    def _call_for(self, x_class: str) -> tuple:
        """``(settings, prepared rounding)`` of a call on an input of class ``x_class`` (found once)."""
        settings = self._specs.get(x_class) or self._specs.setdefault(x_class, resolve(self._given, None, x_class))
        prepared = dispatch.PreparedRounding(settings.spec, sources_for(settings.randfunc, self._flips))
        # Stochastic rounding with each element's counter number and no flips: one advance of the
        # counter, nothing to hold around the call (its fork check is the only thing left to do).
        per_element = prepared.sources is self._flips and self._flips.counter is not None and not settings.spec.flips
        found = self._calls[x_class] = (settings, prepared, per_element)
        return found

    @property
    def options(self) -> Options:
        """The resolved options (as :func:`chop_options` would report them)."""
        return self._specs["double"].to_options()

    @property
    def owns_rng(self) -> bool:
        """Whether this object draws from its own ``rng=`` (a seed or a generator), not chop's sources."""
        return self._fork_generation is not None

    def __call__(self, x):
        x_class = "double" if type(x) is np.ndarray and x.dtype is _FLOAT64 else _checked_class(x)
        settings, prepared, per_element = self._calls.get(x_class) or self._call_for(x_class)
        spec = settings.spec
        if not spec.draws:  # no random numbers: nothing to check or hold
            return prepared(x)
        if self._fork_generation is None:
            return _chop_checked(x, prepared)
        if (self._fork_generation != fork_generation()
                and (spec.flips or (spec.stochastic and settings.randfunc is default_randfunc))):
            raise ForkedStreamError(
                "This Chop's random generator was inherited from the parent process by fork: its draws "
                "would repeat the parent's (and every other child's). Create the Chop in this process "
                "(e.g. with a seed from numpy.random.SeedSequence(seed).spawn) or send it here pickled."
            )
        if per_element:
            return prepared(x)
        with self._draw_lock:
            return _chop_checked(x, prepared)

    def __repr__(self) -> str:
        o = self.options
        text = (f"Chop(format={o.format!r}, subnormal={o.subnormal}, round={o.round}, "
                f"flip={o.flip}, p={o.p}, explim={o.explim}, params={o.params}")
        if o.rules is not None and o.rules != default_rules(o.format or "h"):  # (what else changes the bits)
            text += f", rules={o.rules!r}"
        if o.randfunc is not None and o.randfunc is not default_randfunc:
            text += f", randfunc={o.randfunc!r}"
        counter = self._flips.counter
        if counter is not None:
            text += f", rng={counter.seed}"
        elif self._fork_generation is not None:
            text += ", rng=<a numpy.random.Generator>"
        return text + ")"


def _flip_sources(rng: Any, owner: str = "") -> RandomSources:
    """The sources of ``Chop(options, rng=rng)`` (MATLAB's stream for None; nothing is drawn).

    ``owner`` names the caller in the error; a ``Chop`` (``owner`` given) also takes a
    :class:`numpy.random.SeedSequence`, for a Generator of its own.
    """
    if rng is None:
        return MATLAB_STREAM
    if isinstance(rng, numbers.Integral) and not isinstance(rng, (bool, np.bool_)):
        return counter_sources(int(rng))  # the counter-based generator, the same on every engine
    if owner and isinstance(rng, np.random.SeedSequence):
        rng = np.random.default_rng(rng)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"{owner}rng must be a numpy.random.Generator or an integer seed, got {rng!r}.")
    return generator_sources(rng)


def explain(x: Any, options: Any = None, *, rng: Any = None) -> "dispatch.Explanation":
    """Which engine, kernel and random source ``chop(x, options)`` (or ``Chop(options, rng=rng)(x)``)
    would use, and why each kernel tried before was passed over (nothing is rounded, drawn or stored).

    Parameters
    ----------
    x : array_like, torch.Tensor, cupy.ndarray, jax.Array, dask array, ...
        The input, as it would be passed to :func:`chop`.
    options : Mapping, Options or object with attributes, optional
        chop's options; ``None``: the options :func:`chop` would use now (this thread's
        stored ones, or the defaults).
    rng : int, numpy.random.Generator or numpy.random.SeedSequence, optional
        ``Chop``'s ``rng``.

    Returns
    -------
    Explanation
        Its ``str`` is a readable summary; its fields hold the same as data.

    Examples
    --------
    >>> import numpy as np
    >>> e = explain(np.ones(1000), {'format': 'h', 'round': 5})
    >>> e.engine, e.source.value, e.order
    ('numpy', 'matlab_stream', 'column-major')
    >>> explain(1/3, {'format': 'h'}).kernel
    'scalar'
    """
    x_class = _checked_class(x)
    if rng is None:  # chop(x, options): the stored options when none are given
        settings = resolve(options, _persistent.state()[0], x_class)
    else:  # Chop(options, rng=rng)(x)
        settings = resolve(dict(given_fields(options) or {}), None, x_class)
    return dispatch.explain(x, settings.spec, sources_for(settings.randfunc, _flip_sources(rng, "explain's ")))


def chop_jax(x: Any, options: Any = None, *, key: Any = None, seed: Optional[int] = None, offset: Any = 0) -> Any:
    """Round a JAX array, stateless and traceable: ``jax.jit``/``jax.vmap`` friendly.

    Parameters
    ----------
    x : jax.Array
        Real values (float64, float32, float16, bfloat16; integers with x64).
    options : dict, Options, object with attributes, Chop or RoundingSpec, optional
        chop's options (the defaults when omitted; the persistent ones are neither
        read nor set), or a resolved :class:`~pychop_compat.spec.RoundingSpec`.
    key : jax.random key, optional
        The numbers of stochastic rounding and bit flips: element ``i`` (row-major) gets
        ``jax.random.uniform(jax.random.fold_in(key, s))[i]``, ``s = 1`` for rounding,
        ``2`` and ``3`` for flips.  Split the key between calls to get new numbers.
    seed, offset : int, optional
        Instead of ``key``: the counter-based generator of :mod:`pychop_compat.random.counter`,
        element ``i`` getting the numbers of counter ``offset + i`` (``offset`` may be traced).
        Equal to ``Chop(options, rng=seed)`` on NumPy (first call: ``offset = 0``).

    Returns
    -------
    jax.Array
        Same shape, dtype (float64 for integers), device and sharding as ``x``.

    Raises
    ------
    ValueError
        Stochastic rounding or flips without ``key`` or ``seed``; both given;
        ``options.randfunc`` (host code; use :func:`chop` outside jit); options only the
        host computes, such as bit flips on formats beyond chop.m's (``docs/engines.rst``,
        "What chop_jax refuses"; ``Chop(options, rng=seed)`` rounds them outside jit).
    TypeError
        ``x`` is not a JAX array, or needs 64-bit types that are off.

    Examples
    --------
    >>> import jax, jax.numpy as jnp                      # doctest: +SKIP
    >>> f = jax.jit(lambda x, k: chop_jax(x, {'format': 'h', 'round': 5}, key=k))  # doctest: +SKIP
    >>> f(jnp.linspace(0, 1, 5), jax.random.key(0))        # doctest: +SKIP
    """
    jax = sys.modules.get("jax")
    if jax is None or not isinstance(x, jax.Array):
        raise TypeError(f"chop_jax needs a jax.Array, not {type(x).__name__}; use pychop_compat.chop for others.")
    if isinstance(options, RoundingSpec):
        spec = options
    else:
        x_class = "single" if str(x.dtype) in _SINGLE_DTYPE_NAMES else "double"
        options = getattr(options, "options", options)  # a Chop object: its resolved options
        settings = resolve(options if options is not None else {}, None, x_class)
        if settings.randfunc is not default_randfunc:
            raise ValueError("chop_jax does not call options.randfunc (host code); pass key= or seed=.")
        spec = settings.spec
    return dispatch.round_jax(x, spec, key=key, seed=seed, offset=offset)
