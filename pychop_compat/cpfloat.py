"""The CPFloat facade: ``cpfloat(x, fpopts)`` with the MATLAB MEX interface of CPFloat.

CPFloat (M. Fasi and M. Mikaitis, ACM TOMS 49(2), 2023) takes a struct
``fpopts`` much like chop's, with differences this facade keeps: ``params`` is
``[t, emin, emax]``; ``round`` also takes -1, 0 and 7 (any code outside -1..7:
no rounding); ``saturation``, ``infinity`` and ``flip = 2`` (any bit of the
encoding); its own named formats (``'E4M3'`` is ``[4, -6, 8]``, largest 480);
fields left out keep their values, except ``subnormal`` and ``infinity`` (the
format's defaults) and the parameters (they follow ``format``); CPFloat's range
rules (:func:`pychop_compat.rules.cpfloat.round_cpfloat`).  ``format`` also
takes any name of the format catalogue.
"""

from __future__ import annotations

import numbers
import warnings
from dataclasses import dataclass, field, replace
from typing import Any, Optional

import numpy as np

from .engines import dispatch
from .libraries import array_library, unsupported_type_error
from .formats import Format, catalogue_format
from .matlab.options import atomic_values, isempty, items_snapshot
from .random.sources import MATLAB_STREAM
from .spec import RoundingSpec

__all__ = ["cpfloat", "cpfloat_options", "clear_cpfloat", "CpfloatOptions", "CPFLOAT_FORMATS",
           "CpfloatError"]


class CpfloatError(ValueError):
    """An error the MEX interface raises; ``identifier`` is MATLAB's (``'cpfloat:...'``)."""

    def __init__(self, identifier: str, message: str):
        super().__init__(f"{identifier}: {message}")
        self.identifier = identifier


# CPFloat's named formats: names -> (precision, emin, emax); subnormal and infinity defaults.
_NAMED: tuple[tuple[tuple[str, ...], tuple[int, int, int], dict[str, int]], ...] = (
    (("q43", "fp8-e4m3", "E4M3"), (4, -6, 8), {"infinity": 0}),
    (("q52", "fp8-e5m2", "E5M2"), (3, -14, 15), {}),
    (("b", "bfloat16", "bf16"), (8, -126, 127), {"subnormal": 0}),
    (("h", "half", "binary16", "fp16"), (11, -14, 15), {}),
    (("t", "TensorFloat-32", "tf32"), (11, -126, 127), {}),
    (("s", "single", "binary32", "fp32"), (24, -126, 127), {}),
    (("d", "double", "binary64", "fp64"), (53, -1022, 1023), {}),
)
#: CPFloat's format names and their ``[precision, emin, emax]``.
CPFLOAT_FORMATS = {name: list(params) for names, params, _ in _NAMED for name in names}
_DEFAULTS = {name: defaults for names, _, defaults in _NAMED for name in names}
_CUSTOM = ("c", "custom")
_DOUBLE_NAMES = ("d", "double", "binary64", "fp64")
_FIELDS = ("format", "params", "explim", "infinity", "round", "saturation", "subnormal", "flip", "p",
           "drcheck")


@dataclass
class CpfloatOptions:
    """CPFloat's options, with the MEX's field names (what ``[~, options] = cpfloat`` returns).

    Attributes
    ----------
    format : str
        Target format (default ``'h'``).
    params : list of int
        ``[precision, emin, emax]`` of the target format.
    explim : int
        1: the format's exponent range; 0: the storage format's.
    infinity : int
        1: overflow may give Inf; 0: it gives NaN (see the docs for the exceptions).
    round : int
        -1, 0, 1 (nearest: ties away, to zero, to even), 2 (up), 3 (down), 4 (toward zero),
        5, 6 (stochastic), 7 (to odd); any other value: no rounding.
    saturation : int
        1: overflow and Inf give the largest finite number.
    subnormal : int
        1: subnormal numbers are kept; 0: flushed.
    flip : int
        0 no soft errors; 1 a bit of the fraction; 2 any bit of the encoding.
    p : float
        Probability of a soft error per element.
    """

    format: str = "h"
    params: list = field(default_factory=lambda: [11, -14, 15])
    explim: Any = 1
    infinity: Any = 1
    round: Any = 1
    saturation: Any = 0
    subnormal: Any = 1
    flip: Any = 0
    p: Any = 0.5


@dataclass(frozen=True)
class _State:
    options: CpfloatOptions
    drcheck: Any = 1
    catalogue: Optional[Format] = None  # the catalogue's format, for names beyond the MEX's


_state: Optional[_State] = None


def _default_state() -> _State:
    return _State(CpfloatOptions())


def _given(fpopts) -> Optional[dict]:
    """The fields of ``fpopts`` that are present (None for an empty struct)."""
    if isempty(fpopts):
        return None
    if isinstance(fpopts, dict):
        unknown = set(fpopts) - set(_FIELDS)
        if unknown:
            raise ValueError(f"Unknown cpfloat field(s) {sorted(unknown)}; allowed: {', '.join(_FIELDS)}.")
        return dict(fpopts)
    if isinstance(fpopts, str):  # a format name: shorthand for struct('format', name)
        return {"format": fpopts}
    if isinstance(fpopts, (bytes, numbers.Number, list, tuple, np.ndarray)):
        raise CpfloatError("cpfloat:invalidstruct", "Second argument must be a struct.")
    return {name: getattr(fpopts, name) for name in _FIELDS if hasattr(fpopts, name)}


def _number(value, name: str, integer: bool = True):
    if isinstance(value, (complex, np.complexfloating, str, bytes)):
        raise ValueError(f"fpopts.{name} must be a real number, got {value!r}.")
    try:
        as_float = float(np.asarray(value, dtype=np.float64).reshape(()))
    except (TypeError, ValueError):
        raise ValueError(f"fpopts.{name} must be a real number, got {value!r}.") from None
    if integer:
        if not as_float.is_integer():
            raise ValueError(f"fpopts.{name} must be an integer, got {value!r}.")
        return int(as_float)
    return as_float


def _update(state: _State, given: dict) -> _State:
    """The MEX's rules for a non-empty ``fpopts`` (see the module notes)."""
    o = replace(state.options, params=list(state.options.params))
    catalogue = state.catalogue
    if "format" in given:
        value = given["format"]
        if isempty(value):
            o.format = "h"
        elif isinstance(value, str):
            o.format = value
        else:
            raise ValueError(f"fpopts.format must be a string, got {value!r}.")
    params = given.get("params")
    if "params" in given and o.format not in _CUSTOM:
        warnings.warn("cpfloat:ignoredparams: Floating-point parameters ignored.", stacklevel=3)
    defaults: dict = {}
    if o.format in CPFLOAT_FORMATS:
        o.params = list(CPFLOAT_FORMATS[o.format])
        defaults = _DEFAULTS[o.format]
        catalogue = None
    elif o.format in _CUSTOM:
        values = None if params is None else np.asarray(params, dtype=object).ravel()
        if values is None or values.size != 3:
            raise CpfloatError("cpfloat:invalidparams", "Invalid floating-point parameters specified.")
        o.params = [_number(v, "params") for v in values]
        catalogue = None
    else:
        try:
            catalogue = catalogue_format(o.format)
        except ValueError:
            raise CpfloatError("cpfloat:invalidformat", "Invalid floating-point format specified.") from None
        o.params = [catalogue.t, catalogue.emin, catalogue.emax]
        defaults = {"infinity": int(catalogue.has_inf), "subnormal": int(catalogue.subnormals)}
        if catalogue.overflow == "saturate" and "saturation" not in given:
            defaults["saturation"] = 1
    # Left out: subnormal and infinity take the format's defaults; the rest keep their values.
    o.subnormal = defaults.get("subnormal", 1)
    o.infinity = defaults.get("infinity", 1)
    if "saturation" in defaults:
        o.saturation = defaults["saturation"]
    empty_defaults = {"subnormal": 1, "explim": 1, "infinity": 1, "round": 1, "saturation": 0,
                      "flip": 0, "p": 0.5}
    for name, empty in empty_defaults.items():
        if name in given:
            value = given[name]
            setattr(o, name, empty if isempty(value) else _number(value, name, integer=name != "p"))
    drcheck = state.drcheck
    if "drcheck" in given:
        drcheck = 1 if isempty(given["drcheck"]) else _number(given["drcheck"], "drcheck")
    if o.flip not in (0, 1, 2):
        raise ValueError(f"fpopts.flip must be 0 (no flips), 1 (a fraction bit) or 2 (any bit), got {o.flip}.")
    if o.flip and not 0 <= o.p <= 1:
        raise ValueError(f"fpopts.p must be a probability in [0, 1], got {o.p}.")
    return _State(o, drcheck, catalogue)


def _updated(state: _State, fpopts: Any) -> _State:
    """``state`` after a call with ``fpopts``: :func:`_update`'s result, found once for a dict of
    options repeated with the same content (the usual call in a loop).

    A result equal to ``state`` is ``state`` itself, so that the next call with the same dict
    finds it (the cache is keyed by the state's identity and the dict's content, taken afresh
    on every call: a dict changed in place is looked up anew)."""
    content = None
    if type(fpopts) is dict:
        try:
            content = (id(state), items_snapshot(fpopts))
            found = _UPDATES.get(content)
        except TypeError:  # an unhashable value (a list of params)
            content = found = None
        if found is not None and found[0] is state:
            return found[1]
    given = _given(fpopts)
    if given is None:
        return state
    new = _update(state, given)
    if (new.options == state.options and new.drcheck == state.drcheck and new.catalogue is state.catalogue
            and type(new.options.format) is type(state.options.format)):
        new = state
    # ("params" warns on every call with a named format: such calls are not cached.)
    if content is not None and "params" not in given and atomic_values(fpopts):
        if len(_UPDATES) >= _CACHE_MAX:
            _UPDATES.clear()
        _UPDATES[content] = (state, new)
    return new


#: (id(state), items_snapshot(fpopts)) -> (state, the state after the call); the entry holds the
#: state, so its id is not reused while the entry lives.
_UPDATES: dict = {}
#: (id(state), x_class) -> (state, its RoundingSpec for an input of that class).
_SPECS: dict = {}
_CACHE_MAX = 64


def _spec_for(state: _State, x_class: str) -> RoundingSpec:
    """:func:`_checked_spec`, found once per state and class: one spec object for the calls of
    a loop, which the router's and the kernels' caches then find by identity."""
    key = (id(state), x_class)
    found = _SPECS.get(key)
    if found is not None and found[0] is state:
        return found[1]
    spec = _checked_spec(state, x_class)
    if len(_SPECS) >= _CACHE_MAX:
        _SPECS.clear()
    _SPECS[key] = (state, spec)
    return spec


_FLOAT64, _FLOAT32 = np.dtype(np.float64), np.dtype(np.float32)


def _storage_class(x) -> str:
    """'single' or 'double' for an accepted input; the MEX's error otherwise."""
    if type(x) is np.ndarray:  # (NumPy's own native float64 and float32 descriptors, first)
        if x.dtype is _FLOAT64:
            return "double"
        if x.dtype is _FLOAT32:
            return "single"
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        if isinstance(x, complex) or (isinstance(x, (list, tuple)) and np.iscomplexobj(np.asarray(x))):
            raise CpfloatError("cpfloat:invalidmatrix", "First argument must be a 2D real numeric array.")
        return "double"  # Python numbers and lists: MATLAB doubles
    name = str(dtype).rpartition(".")[2]
    if name in ("float32", "float16", "bfloat16"):
        return "single"
    if name == "float64":
        return "double"
    raise CpfloatError("cpfloat:invalidmatrix", "First argument must be a 2D real numeric array.")


def _checked_spec(state: _State, x_class: str) -> RoundingSpec:
    """The MEX's checks for an input of class ``x_class``, then the rounding spec."""
    o = state.options
    if x_class == "single" and o.format in _DOUBLE_NAMES:
        raise CpfloatError("cpfloat:invalidformat", "Target format is too large.")
    maxfbits = (11 if o.round <= 1 else 23) if x_class == "single" else (25 if o.round <= 1 else 52)
    minexp, maxexp = (-126, 127) if x_class == "single" else (-1022, 1023)
    t, emin, emax = o.params
    if o.format in _CUSTOM:
        if emin < minexp or emax > maxexp:
            raise CpfloatError("cpfloat:invalidexponent", "Invalid exponent range selected.")
        if state.drcheck and t > maxfbits:
            raise CpfloatError("cpfloat:invalidexponent", "Selected precision may cause double rounding issues.")
    if t < 1:
        raise ValueError(f"The precision (params[0]) must be at least 1, got {t}.")
    fmt = state.catalogue or Format(t, emax, (o.format,), emin=emin)
    return RoundingSpec(
        fmt=fmt, subnormal=o.subnormal, round=o.round, flip=o.flip, p=o.p, explim=o.explim,
        saturation=bool(o.saturation), infinity=bool(o.infinity), range_rules="cpfloat",
        flip_scope="encoding" if o.flip == 2 else "fraction",
    )


def _round(x, spec: RoundingSpec):
    if type(x) is np.ndarray and (x.dtype is _FLOAT64 or x.dtype is _FLOAT32) and x.size:
        return dispatch.round_array(x, spec, MATLAB_STREAM)  # (what the general path below does)
    library = "numpy" if type(x) is np.ndarray else array_library(x)
    if library in ("torch", "cupy", "jax", "dask"):
        return dispatch.round_array(x, spec, MATLAB_STREAM)
    if library != "numpy":
        raise unsupported_type_error(x)

    scalar = isinstance(x, numbers.Real) and not isinstance(x, np.generic)
    arr = np.asarray(x, dtype=np.float64) if scalar or not isinstance(x, (np.ndarray, np.generic)) else np.asarray(x)
    if arr.dtype == np.float16:
        out = dispatch.round_array(arr.astype(np.float32), spec, MATLAB_STREAM).astype(np.float16)
    else:
        out = dispatch.round_array(arr, spec, MATLAB_STREAM) if arr.size else arr.copy()
    if scalar:
        return float(out)
    if isinstance(x, np.generic):
        return out[()]
    return out


def cpfloat(x: Any = None, fpopts: Any = None) -> Any:
    """Round ``x`` to a low-precision format with CPFloat's MEX interface.

    Parameters
    ----------
    x : array_like, torch.Tensor, cupy.ndarray or None
        Real float64 or float32 values (Python numbers and lists are float64);
        float16/bfloat16 tensors are computed in float32.  ``None``: only set
        (and return) the options, like MATLAB's ``[~, options] = cpfloat([], fpopts)``.
    fpopts : dict, CpfloatOptions, object with attributes, or None
        CPFloat's fields ``format``, ``params`` (``[t, emin, emax]``),
        ``explim``, ``infinity``, ``round``, ``saturation``, ``subnormal``,
        ``flip``, ``p`` and ``drcheck`` (0 turns off the double-rounding check).
        Fields left out keep their previous values (``subnormal`` and
        ``infinity`` return to the format's defaults); empty fields take the
        defaults.

    Returns
    -------
    same type as ``x``, or CpfloatOptions
        The rounded values (a new object; ``x`` is not modified), or with
        ``x=None`` the current options.

    Raises
    ------
    CpfloatError
        Where the MEX raises: a non-struct ``fpopts``, an unknown format,
        custom parameters missing or malformed, a custom exponent range
        beyond the storage format's, a custom precision that may round twice
        (unless ``drcheck = 0``), ``'d'`` with float32 input, complex input.
    ValueError
        For values the MEX silently misreads (see ``docs/differences.rst``).

    Examples
    --------
    >>> from pychop_compat import clear_cpfloat, cpfloat
    >>> clear_cpfloat()
    >>> cpfloat(1/3, {'format': 'h'})
    0.333251953125
    >>> cpfloat(1/3, {'format': 'c', 'params': [3, -2, 3], 'round': 7})
    0.3125
    >>> cpfloat(1000.0, {'format': 'E4M3', 'round': 1})  # CPFloat's E4M3: largest 480, no Inf
    nan
    >>> cpfloat().round  # the persistent options
    1
    """
    global _state
    state = _updated(_state or _default_state(), fpopts)
    if x is None:
        _state = state
        return cpfloat_options()
    x_class = _storage_class(x)
    _state = state  # the MEX stores the options before it checks them against x
    spec = _spec_for(state, x_class)
    return _round(x, spec)


def cpfloat_options() -> CpfloatOptions:
    """The persistent options (a copy), as the MEX's second output returns them."""
    o = (_state or _default_state()).options
    return replace(o, params=list(o.params))


def clear_cpfloat() -> None:
    """Forget the persistent options (MATLAB ``clear cpfloat``)."""
    global _state
    _state = None
