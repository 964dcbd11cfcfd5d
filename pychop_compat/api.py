"""The MATLAB facade: ``chop``, ``clear_chop``, ``chop_options``, ``roundit`` and ``Chop``."""

from __future__ import annotations

import numbers
from typing import Any, Callable, Optional

import numpy as np

from .engines import array_library, numpy_fast, unsupported_type_error
from .options import ChopSpec, Options, _as_int, _as_real, _given_fields, resolve, round_mode
from .matlab_random import default_randfunc
from .randomness import MATLAB_STREAM, RandomSources, generator_sources, sources_for

__all__ = ["chop", "clear_chop", "chop_options", "roundit", "Chop"]

_stored: Optional[ChopSpec] = None  # chop.m's persistent fpopts


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


def _checked_class(x) -> str:
    """MATLAB class ('single' or 'double') of an accepted input, after rejecting complex input."""
    if type(x) is float:  # the hot path: MATLAB code chops scalars in loops
        return "double"
    _reject_complex(x)
    if x is None:
        return "double"
    library = "numpy" if type(x) is np.ndarray else array_library(x)
    if library == "unsupported":
        raise unsupported_type_error(x)
    if library == "pandas" and not hasattr(x, "dtype"):  # a DataFrame: one class for all columns
        from .engines.labelled import frame_dtype

        return "single" if str(frame_dtype(x)) in _SINGLE_DTYPE_NAMES else "double"
    if library != "numpy":
        # torch/cupy: float32, float16 and bfloat16 are computed in single; the rest in double.
        return "single" if str(x.dtype).rpartition(".")[2] in _SINGLE_DTYPE_NAMES else "double"
    return "single" if getattr(x, "dtype", None) in (np.float32, np.float16) else "double"


def _as_float_array(x):
    """``(array, restore)``: a float32/float64 ndarray to compute on, and how to give the result back."""
    if isinstance(x, np.ndarray):
        arr = x
        restore = None
    elif isinstance(x, np.generic):
        arr = np.asarray(x)
        restore = lambda out: out[()]  # noqa: E731  (a NumPy scalar of the result's dtype)
    elif isinstance(x, numbers.Real):
        arr = np.asarray(float(x))
        restore = lambda out: float(out)  # noqa: E731
    else:
        arr = np.asarray(x)
        restore = None
    dtype = arr.dtype
    if dtype == np.float64 or dtype == np.float32:
        return arr, restore
    if dtype == np.float16:
        # No MATLAB class is half precision: compute in single, give back half.
        base = restore or (lambda out: out)
        return arr.astype(np.float32), lambda out: base(out.astype(np.float16))
    if dtype.kind in "biu" or dtype == object:
        return arr.astype(np.float64), restore
    raise TypeError(f"chop supports float64, float32 and float16 arrays (and integers), not {dtype}.")


def _engine_chop(x, spec: ChopSpec, sources: RandomSources):
    if type(x) is float and not spec.flips and not spec.extended:
        # MATLAB code calls chop on scalars in loops: no array for a Python float.
        return numpy_fast.chop_scalar(x, spec, sources)
    library = "numpy" if type(x) is np.ndarray else array_library(x)
    if library == "torch":
        from .engines import torch_engine

        return torch_engine.chop_tensor(x, spec, sources)
    if library == "cupy":
        from .engines import cupy_engine

        return cupy_engine.chop_cupy(x, spec, sources)
    if library == "jax":
        from .engines import jax_engine

        return jax_engine.chop_jax_array(x, spec, sources)
    if library == "dask":
        from .engines import dask_engine

        return dask_engine.chop_dask(x, spec, sources)
    if library in ("pandas", "xarray"):  # same type, index and coordinates; the values rounded
        from .engines import labelled

        return labelled.chop_labelled(x, lambda values: _engine_chop(values, spec, sources))
    if type(x) is not np.ndarray and isinstance(x, np.ndarray):  # a subclass: its data, then its type and mask
        from .engines.labelled import as_subclass

        return as_subclass(_engine_chop(x.view(np.ndarray), spec, sources), x)
    from .engines.numpy_engine import chop_array

    arr, restore = _as_float_array(x)
    out = chop_array(arr, spec, sources) if arr.size else arr.copy()
    return restore(out) if restore else out


def _is_placeholder(x) -> bool:
    """MATLAB's ``chop([], options)``: only set the options."""
    return x is None or (isinstance(x, (list, tuple)) and len(x) == 0)


def chop(x: Any = None, options: Any = None) -> Any:
    """Round the elements of ``x`` to a lower-precision format (MATLAB ``chop``).

    Parameters
    ----------
    x : array_like, scalar, torch.Tensor, cupy.ndarray or None
        Real values.  The result has the same type, shape, dtype (and device);
        integer and bool input is rounded as float64.  ``None`` (or ``[]``)
        only sets the options, like MATLAB's ``chop([], options)``.
    options : dict, Options, object with attributes, or None
        MATLAB's option struct (see :class:`Options`).  Given and non-empty,
        it defines every setting, missing fields taking their defaults; omitted
        or empty, the settings of the previous call are reused (the defaults
        on first use or after :func:`clear_chop`).

    Returns
    -------
    same type as ``x``
        The rounded values (a new object: ``x`` is never modified); ``None``
        for ``x=None`` and an empty float64 array for ``x=[]``.

    Raises
    ------
    ValueError
        For complex input, an unknown format, a rounding mode outside 1..6, or
        a custom precision over chop.m's limit for the class of ``x``.

    Notes
    -----
    Stochastic rounding (modes 5, 6) and bit flips draw from MATLAB's random
    stream (see :func:`rng`) in MATLAB's column-major element order, exactly
    as chop.m does, unless ``options.randfunc`` supplies the stochastic draws.

    Examples
    --------
    >>> chop(1/3, {'format': 'h'})
    0.333251953125
    >>> chop(1/3, {'format': 'b', 'round': 2})
    0.333984375
    >>> chop(1/3)  # the options of the previous call
    0.333984375
    """
    global _stored
    spec = resolve(options, _stored, _checked_class(x))
    _stored = spec
    if _is_placeholder(x):
        return None if x is None else np.zeros(0)
    return _engine_chop(x, spec, sources_for(spec.randfunc))


def clear_chop() -> None:
    """Forget the persistent options (MATLAB ``clear chop``)."""
    global _stored
    _stored = None


def chop_options() -> Options:
    """The persistent options, filled in (MATLAB ``[~, options] = chop``).

    Like MATLAB, stores the defaults first when nothing is stored yet.

    Examples
    --------
    >>> clear_chop()
    >>> o = chop_options()
    >>> o.format, o.subnormal, o.round, o.params
    ('h', 1, 1, [11, 15])
    """
    global _stored
    if _stored is None:
        _stored = resolve(None, None)
    return _stored.to_options()


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
    given = _given_fields(options) or {}
    mode = round_mode(given.get("round", 1))
    flip = bool(_as_real(given.get("flip", 0), "flip"))
    p = _as_real(given.get("p", 0.5), "p")
    t = 0
    if flip:
        if "params" not in given:
            raise ValueError("roundit with flip = 1 needs options.params = [t, emax] (t picks the bits).")
        t = _as_int(np.asarray(given["params"]).ravel()[0], "params")
    from .engines.numpy_engine import roundit_array

    arr, restore = _as_float_array(x)
    sources = sources_for(given.get("randfunc", default_randfunc))
    out = roundit_array(arr, mode, sources, flip, p, t)
    return restore(out) if restore else out


class Chop:
    """A stateless chop: fixed options, no persistent state.

    ``Chop(options)`` or ``Chop(**options)`` (MATLAB option names), then
    ``ch(x)``.  Same semantics as :func:`chop` with those options, except that
    the global persistent options are neither read nor changed.

    Parameters
    ----------
    options : dict, Options or object with attributes, optional
        The options; keyword arguments are merged over them.
    rng : numpy.random.Generator or int, optional
        Draw stochastic rounding and bit flips from this NumPy generator (or
        ``numpy.random.default_rng(seed)``) instead of MATLAB's stream: faster,
        reproducible from its seed, but not MATLAB's numbers.  ``options.randfunc``,
        if given, still supplies the stochastic draws.
    **kwargs
        Options by name, e.g. ``format='b', round=5``.

    Examples
    --------
    >>> to_bf16 = Chop(format='bfloat16')
    >>> to_bf16(1/3)
    0.333984375
    >>> to_bf16.options.subnormal
    0
    """

    def __init__(self, options=None, /, *, rng=None, **kwargs: Any):
        given = dict(_given_fields(options) or {})
        given.update(kwargs)
        self._given = given
        self._specs = {"double": resolve(given, None, "double")}
        if rng is None:
            self._flips = MATLAB_STREAM
        else:
            generator = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
            self._flips = generator_sources(generator)

    def _spec(self, x_class: str) -> ChopSpec:
        spec = self._specs.get(x_class)
        if spec is None:
            spec = self._specs[x_class] = resolve(self._given, None, x_class)
        return spec

    @property
    def options(self) -> Options:
        """The resolved options (as :func:`chop_options` would report them)."""
        return self._specs["double"].to_options()

    def __call__(self, x):
        spec = self._spec(_checked_class(x))
        return _engine_chop(x, spec, sources_for(spec.randfunc, self._flips))

    def __repr__(self) -> str:
        o = self.options
        return (f"Chop(format={o.format!r}, subnormal={o.subnormal}, round={o.round}, "
                f"flip={o.flip}, p={o.p}, explim={o.explim}, params={o.params})")
