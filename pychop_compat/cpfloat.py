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

:func:`cpfloat_at` is the MEX interface as it stood on a date: the rules that
changed (:data:`CPFLOAT_HISTORY`) are parameters of the same option resolution.
"""

from __future__ import annotations

import collections.abc
import datetime
import numbers
import threading
import warnings
from dataclasses import dataclass, field, replace
from typing import Any, Optional, Union

import numpy as np

from .engines import dispatch, numpy_engine
from .libraries import array_library, unsupported_type_error
from .formats import Format, catalogue_format
from .matlab.api import PersistentOptions
from .matlab.history import as_date, rules_in_force
from .matlab.options import atomic_values, isempty, items_snapshot, options_are_empty
from .random.sources import MATLAB_STREAM
from .spec import RoundingSpec

__all__ = ["cpfloat", "cpfloat_options", "clear_cpfloat", "CpfloatOptions", "CPFLOAT_FORMATS",
           "CpfloatError", "cpfloat_at", "CpfloatAt", "CpfloatRules", "cpfloat_rules_at", "CPFLOAT_HISTORY",
           "CPFLOAT_FIRST_RELEASE"]


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


#: CPFloat's first release (tag v0.1.0); :func:`cpfloat_at` refuses earlier dates.
CPFLOAT_FIRST_RELEASE = datetime.date(2021, 1, 27)

#: Every change of what the MEX interface returns for valid input, as (date, commit, what changed):
#: the last commit of the day that touched ``mex/cpfloat.c`` or ``src/`` (docs/history.rst).
CPFLOAT_HISTORY = (
    ("2021-01-27", "e081508", "First release (v0.1.0, 808ae2c): params = [t, emax] (emin = 1 - emax); "
     "subnormal left out keeps its value (bfloat16: 0); no saturation or infinity; [] as options an error; "
     "custom formats beyond the storage format: 'cpfloat:invalidparams'."),
    ("2021-07-10", "c931e52", "The sign of zero results as today (before: +0 or -0 by mode and internal path; "
     "not reproduced)."),
    ("2021-07-11", "ca9c20b", "Round to odd keeps +-0 (before: a tiny number, from a shift whose result C leaves "
     "undefined; not reproduced)."),
    ("2022-02-05", "3c38e61", "subnormal left out: the format's default (0 for bfloat16, else 1)."),
    ("2022-02-17", "81f0152", "Without subnormals, round to nearest (ties to even) takes xmin/2 to 0."),
    ("2022-02-28", "ec856f7", "flip = 2 flips any bit of the encoding (before: flip is yes or no, a fraction bit)."),
    ("2022-06-28", "2c737e4", "[] as options: the stored options."),
    ("2022-06-29", "19a624c", "8-bit formats 'q43'/'fp8-e4m3'/'E4M3' = [4, 7] and 'q52'/'fp8-e5m2'/'E5M2' = [3, 15]."),
    ("2022-08-11", "67215c4", "'TensorFloat-32' fits the format buffer (before: it overflowed it)."),
    ("2024-04-29", "42048c6", "E4M3 as in OCP: [4, -6, 8]; the C library reads emin, which the interface sets "
     "for E4M3 only (0 at first, then kept: xmin = 1 for the other formats); explim = 0 without subnormals "
     "flushes below the target's xmin."),
    ("2024-04-30", "7c075e3", "The C library reads emin = 0 as 1 - emax (an E4M3 call still leaves -6 behind)."),
    ("2024-05-08", "8fdf9be", "params = [t, emax, emin] (838ae70); every named format sets emin."),
    ("2024-05-20", "7a9fa31", "explim = 0 without subnormals flushes below the storage format's xmin again "
     "(from 2024-04-29: below the target's)."),
    ("2024-05-28", "653d1eb", "params = [t, emin, emax]."),
    ("2024-05-30", "99665da", "options.saturation (left out: 0)."),
    ("2024-06-01", "9ae6e80", "options.infinity (E4M3: 0 when left out; other formats keep it); saturation left "
     "out keeps its value."),
    ("2026-02-28", "1645eac", "infinity left out: the format's default (0e5bc5e)."),
    ("2026-06-23", "53758c5", "options.drcheck; custom formats beyond the storage format: "
     "'cpfloat:invalidexponent'.  Today's interface."),
)

#: Days whose last commit does not compile (without PCG): :func:`cpfloat_at` refuses them.
_UNBUILT = {"2021-07-13": "c146c2a", "2021-08-15": "694730e"}


@dataclass(frozen=True)
class CpfloatRules:
    """Which of the MEX interface's historical rules are in force (see :data:`CPFLOAT_HISTORY`)."""

    date: Optional[datetime.date]  # None: today's cpfloat (with the catalogue's names)
    commit: str
    params_layout: str = "t,emin,emax"  # what ``params`` lists: 't,emax' | 't,emax,emin' | 't,emin,emax'
    subnormal_left_out: str = "default"  # 'kept' | 'default'
    saturation_left_out: str = "kept"  # 'not an option' | 'reset' | 'kept'
    infinity_left_out: str = "default"  # 'not an option' | 'kept' | 'default'
    empty_options_error: bool = False  # [] as options: 'cpfloat:invalidstruct'
    half_xmin_to_zero: bool = True  # subnormal = 0, ties to even: xmin/2 -> 0 (else xmin)
    fp8: bool = True
    e4m3_emax: int = 8
    # 'format' | 'kept, 0 used' | 'kept, 0 = 1 - emax': the interface set emin for E4M3 only (0 at
    # first, then kept), and from 2024-04-30 the C library read an emin of 0 as 1 - emax.
    emin: str = "format"
    long_names: bool = True  # names of 10 characters or more fit the format buffer
    explim0_emin: str = "storage"  # explim = 0, subnormal = 0: flush below the storage's xmin or the target's
    drcheck: bool = True  # options.drcheck read; errors 'cpfloat:invalidexponent'
    encoding_flips: bool = True  # flip = 2 flips any bit of the encoding (before: flip is a yes/no)
    catalogue: bool = False  # names of the format catalogue accepted (this package's extension)


_TODAY = CpfloatRules(None, "", catalogue=True)


def cpfloat_rules_at(date: Union[str, datetime.date]) -> CpfloatRules:
    """The rules of CPFloat's MEX interface at the end of ``date`` (ISO ``'YYYY-MM-DD'`` or a date).

    Raises
    ------
    ValueError
        For a malformed date, one before CPFloat's first release (2021-01-27), or a day whose
        last commit does not compile.
    """
    day = as_date(date)
    if day < CPFLOAT_FIRST_RELEASE:
        raise ValueError(f"CPFloat was first released (v0.1.0) on {CPFLOAT_FIRST_RELEASE.isoformat()}; "
                         f"cpfloat_at has no rules for {day}.")
    if day.isoformat() in _UNBUILT:
        raise ValueError(f"CPFloat's MEX interface did not compile at the end of {day} (commit "
                         f"{_UNBUILT[day.isoformat()]}); take the day before or after.")
    commit = [c for d, c, _ in CPFLOAT_HISTORY if as_date(d) <= day][-1]
    return CpfloatRules(date=day, commit=commit, **rules_in_force(_CHANGES, day))


#: When each rule of :class:`CpfloatRules` changed: (its value at the first release, (date, new value), ...).
_CHANGES: dict[str, tuple] = {
    "params_layout": ("t,emax", ("2024-05-08", "t,emax,emin"), ("2024-05-28", "t,emin,emax")),
    "subnormal_left_out": ("kept", ("2022-02-05", "default")),
    "saturation_left_out": ("not an option", ("2024-05-30", "reset"), ("2024-06-01", "kept")),
    "infinity_left_out": ("not an option", ("2024-06-01", "kept"), ("2026-02-28", "default")),
    "empty_options_error": (True, ("2022-06-28", False)),
    "half_xmin_to_zero": (False, ("2022-02-17", True)),
    "fp8": (False, ("2022-06-29", True)),
    "e4m3_emax": (7, ("2024-04-29", 8)),
    "emin": ("format", ("2024-04-29", "kept, 0 used"), ("2024-04-30", "kept, 0 = 1 - emax"), ("2024-05-08", "format")),
    "long_names": (False, ("2022-08-11", True)),
    "explim0_emin": ("storage", ("2024-04-29", "format"), ("2024-05-20", "storage")),
    "drcheck": (False, ("2026-06-23", True)),
    "encoding_flips": (False, ("2022-02-28", True)),
}


@dataclass(frozen=True)
class _State:
    options: CpfloatOptions
    drcheck: Any = 1
    catalogue: Optional[Format] = None  # the catalogue's format, for names beyond the MEX's
    rules: CpfloatRules = _TODAY
    # Found once for the calls of a loop: the state after a dict of options, by the dict's
    # content (items_snapshot), and the rounding of each input class (the router bound to its
    # RoundingSpec: one object, which the kernels' caches then find by identity).
    after: dict = field(default_factory=dict, compare=False, repr=False)
    roundings: dict = field(default_factory=dict, compare=False, repr=False)


#: The MEX's persistent ``fpopts``, per thread as chop's (``docs/reliability.rst``).
_persistent: PersistentOptions[_State] = PersistentOptions()


def _default_state() -> _State:
    return _State(CpfloatOptions())


def _refuse_unknown(names: set) -> None:
    unknown = names - set(_FIELDS)
    if unknown:
        raise ValueError(f"Unknown cpfloat field(s) {sorted(unknown)}; allowed: {', '.join(_FIELDS)}.")


def _given(fpopts) -> Optional[dict]:
    """The fields of ``fpopts`` that are present (None for MATLAB's ``[]``: nothing is read).

    An empty dict or Mapping is MATLAB's ``struct()`` (``{}``: no field given), not ``[]``: the MEX
    reads a struct without fields like any other (``mxIsEmpty(struct())`` is false).
    """
    if type(fpopts) is not dict and isinstance(fpopts, collections.abc.Mapping):  # (the usual dict first)
        fpopts = dict(fpopts)  # any Mapping is read as a dict (a MappingProxyType, ...)
    if options_are_empty(fpopts):
        return None
    if isinstance(fpopts, dict):
        _refuse_unknown(set(fpopts))
        return dict(fpopts)
    if isinstance(fpopts, str):  # a format name: shorthand for struct('format', name)
        return {"format": fpopts}
    if isinstance(fpopts, (bytes, numbers.Number, list, tuple, np.ndarray)):
        raise CpfloatError("cpfloat:invalidstruct", "Second argument must be a struct.")
    # An object with attributes: a public attribute that is no field raises (a misspelling is not
    # skipped silently) unless it is None (chop's Options: randfunc, rules); params None is not
    # given (an Options' unset params: no cpfloat:ignoredparams warning).
    names = {name for name in vars(fpopts) if isinstance(name, str) and not name.startswith("_")} \
        if hasattr(fpopts, "__dict__") else set()
    _refuse_unknown({name for name in names if getattr(fpopts, name) is not None})
    given = {name: getattr(fpopts, name) for name in _FIELDS if hasattr(fpopts, name)}
    if given.get("params", ()) is None:
        del given["params"]
    return given


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


def _named(name: str, rules: CpfloatRules) -> Optional[list[int]]:
    """``[t, emin, emax]`` of one of the MEX's format names on the date of ``rules`` (None: unknown)."""
    params = CPFLOAT_FORMATS.get(name)
    if params is None or (not rules.fp8 and params[0] in (3, 4)):
        return None
    return [4, -6, rules.e4m3_emax] if params[0] == 4 else list(params)  # E4M3: emax 7 before OCP's


def _update(state: _State, given: dict) -> _State:
    """The MEX's rules for a non-empty ``fpopts`` (see the module notes), as of ``state.rules``."""
    rules = state.rules
    o = replace(state.options, params=list(state.options.params))
    catalogue = state.catalogue
    if "format" in given:
        value = given["format"]
        if not (isempty(value) or isinstance(value, str)):
            raise ValueError(f"fpopts.format must be a string, got {value!r}.")
        o.format = "h" if isempty(value) else value
    if not rules.long_names and len(o.format) >= 10:
        raise ValueError(f"Before 2022-08-11 the format name {o.format!r} overflows the MEX's 10-character "
                         "buffer (its result is undefined).")
    if "params" in given and o.format not in _CUSTOM:
        warnings.warn("cpfloat:ignoredparams: Floating-point parameters ignored.", stacklevel=3)
    defaults: dict = {}
    named = _named(o.format, rules)
    if named is not None:
        o.params = named
        if rules.emin != "format" and named[0] != 4:
            o.params[1] = state.options.params[1]  # left as it was (0 at first): only E4M3 set emin
        defaults = _DEFAULTS[o.format]
        catalogue = None
    elif o.format in _CUSTOM:
        # [t, emin, emax] from params as the interface of the date lists them (emin: 1 - emax before 2024)
        layout = rules.params_layout.split(",")
        values = np.asarray(given.get("params", ()), dtype=object).ravel()  # (None: one value)
        # The MEX reads the first elements and never counts them: more are ignored; fewer would be
        # read past the array's end (undefined), refused here.
        if values.size < len(layout):
            raise CpfloatError("cpfloat:invalidparams", "Invalid floating-point parameters specified.")
        listed = dict(zip(layout, [_number(v, "params") for v in values[:len(layout)]]))
        o.params = [listed["t"], listed.get("emin", 1 - listed["emax"]), listed["emax"]]
        if rules.emin != "format":
            o.params[1] = state.options.params[1]
        catalogue = None
    else:
        try:
            if not rules.catalogue:
                raise ValueError(o.format)
            catalogue = catalogue_format(o.format)
        except ValueError:
            raise CpfloatError("cpfloat:invalidformat", "Invalid floating-point format specified.") from None
        o.params = [catalogue.t, catalogue.emin, catalogue.emax]
        defaults = {"infinity": int(catalogue.has_inf), "subnormal": int(catalogue.subnormals)}
        if catalogue.overflow == "saturate" and "saturation" not in given:
            defaults["saturation"] = 1
    # Left out: subnormal and infinity take the format's defaults; the rest keep their values
    # (on older dates, subnormal, saturation and infinity had other rules: CPFLOAT_HISTORY).
    if rules.subnormal_left_out == "default" or "subnormal" in defaults:
        o.subnormal = defaults.get("subnormal", 1)
    if rules.infinity_left_out == "not an option":
        o.infinity = 1
    elif rules.infinity_left_out == "default" or "infinity" in defaults:
        o.infinity = defaults.get("infinity", 1)
    if rules.saturation_left_out != "kept" or "saturation" in defaults:
        o.saturation = defaults.get("saturation", 0)
    # Given: the value, or empty the default (infinity and saturation unread before they were options).
    unread = {"infinity": rules.infinity_left_out, "saturation": rules.saturation_left_out}
    for name in ("subnormal", "explim", "infinity", "round", "saturation", "flip", "p"):
        if name in given and unread.get(name) != "not an option":
            value = given[name]
            empty = getattr(CpfloatOptions, name)
            setattr(o, name, empty if isempty(value) else _number(value, name, integer=name != "p"))
    drcheck = state.drcheck
    if "drcheck" in given and rules.drcheck:
        drcheck = 1 if isempty(given["drcheck"]) else _number(given["drcheck"], "drcheck")
    # The C library turns each of these on only when it is exactly 1 (subnormal 2 flushes, saturation 2
    # overflows to Inf): a value other than 0 and 1 is refused, not misread as the MEX misreads it.
    for name in ("subnormal", "explim", "saturation", "infinity"):
        if getattr(o, name) not in (0, 1):
            raise ValueError(f"fpopts.{name} must be 0, 1, False or True, got {given.get(name, getattr(o, name))!r}.")
    if o.flip not in (0, 1, 2):
        raise ValueError(f"fpopts.flip must be 0 (no flips), 1 (a fraction bit) or 2 (any bit), got {o.flip}.")
    if o.flip and not 0 <= o.p <= 1:
        raise ValueError(f"fpopts.p must be a probability in [0, 1], got {o.p}.")
    return _State(o, drcheck, catalogue, rules)


def _updated(state: _State, fpopts: Any) -> _State:
    """``state`` after a call with ``fpopts``: :func:`_update`'s result, or ``state`` itself when
    equal; for a dict, found once per content (taken afresh on every call: a dict changed in place
    is looked up anew)."""
    content = None
    if type(fpopts) is dict:
        try:
            content = items_snapshot(fpopts)
            found = state.after.get(content)
        except TypeError:  # an unhashable value (a list of params)
            content = found = None
        if found is not None:
            return found
    given = _given(fpopts)
    if given is None:
        return state
    new = _update(state, given)
    if (new.options == state.options and new.drcheck == state.drcheck and new.catalogue is state.catalogue
            and type(new.options.format) is type(state.options.format)):
        new = state
    # ("params" warns on every call with a named format: such calls are not cached.)
    if content is not None and "params" not in given and atomic_values(fpopts):
        if len(state.after) >= 64:
            state.after.clear()
        state.after[content] = new
    return new


def _rounding_for(state: _State, x_class: str) -> dispatch.PreparedRounding:
    """The router bound to :func:`_checked_spec`, found once per state and class."""
    rounding = state.roundings.get(x_class)
    if rounding is None:
        rounding = state.roundings[x_class] = dispatch.PreparedRounding(_checked_spec(state, x_class), MATLAB_STREAM)
    return rounding


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
    # (a NumPy dtype by its name: byte-swapped float arrays are accepted, as chop accepts them)
    name = dtype.name if isinstance(dtype, np.dtype) else str(dtype).rpartition(".")[2]
    if name in ("float32", "float16", "bfloat16"):
        return "single"
    if name == "float64":
        return "double"
    raise CpfloatError("cpfloat:invalidmatrix", "First argument must be a 2D real numeric array.")


def _checked_spec(state: _State, x_class: str) -> RoundingSpec:
    """The MEX's checks for an input of class ``x_class``, then the rounding spec."""
    o = state.options
    wide = state.catalogue is not None and (state.catalogue.t > 24 or state.catalogue.emax > 127)
    if x_class == "single" and (o.format in _DOUBLE_NAMES or wide):  # (the MEX knows 'd' and its aliases)
        raise CpfloatError("cpfloat:invalidformat", "Target format is too large.")
    maxfbits = (11 if o.round <= 1 else 23) if x_class == "single" else (25 if o.round <= 1 else 52)
    minexp, maxexp = (-126, 127) if x_class == "single" else (-1022, 1023)
    t, emin, emax = o.params
    rules = state.rules
    if o.format in _CUSTOM:  # (before 2026-06-23: one error, 'invalidparams'; emin checked from 2024-05-08)
        if not rules.drcheck and (t > maxfbits or emax > maxexp or (rules.params_layout != "t,emax" and emin < minexp)):
            raise CpfloatError("cpfloat:invalidparams", "Invalid floating-point parameters selected.")
        if emin < minexp or emax > maxexp:
            raise CpfloatError("cpfloat:invalidexponent", "Invalid exponent range selected.")
        if state.drcheck and t > maxfbits:
            raise CpfloatError("cpfloat:invalidexponent", "Selected precision may cause double rounding issues.")
    if t < 1:
        raise ValueError(f"The precision (params[0]) must be at least 1, got {t}.")
    unset = rules.emin == "kept, 0 = 1 - emax" and emin == 0
    if not unset and emin > emax:  # (CPFloat's C code then gives values beyond its own xmax)
        raise ValueError(f"The exponent range is empty: emin = {emin} > emax = {emax}.")
    fmt = state.catalogue or Format(t, emax, (o.format,), emin=1 - emax if unset else emin)
    explim = o.explim
    if not explim and not o.subnormal and rules.explim0_emin == "format":
        # (2024-04-29 to 2024-05-19) values below the target's xmin flushed by mode, the storage's emax
        fmt, explim = Format(t, maxexp, (o.format,), emin=1 - maxexp if unset else emin), 1
    return RoundingSpec(
        fmt=fmt, subnormal=o.subnormal, round=o.round, flip=o.flip, p=o.p, explim=explim,
        saturation=bool(o.saturation), infinity=bool(o.infinity), range_rules="cpfloat",
        flip_scope="encoding" if o.flip == 2 and rules.encoding_flips else "fraction",
    )


def _round(x, rounding: dispatch.PreparedRounding, rules: Optional[CpfloatRules] = None):
    """``x`` rounded, given back as chop gives it back (``rules``: those of a date, else today's)."""
    if type(x) is not np.ndarray:
        if array_library(x) not in ("numpy", "torch", "cupy", "jax", "dask"):
            raise unsupported_type_error(x, "cpfloat", takes="")
        if isinstance(x, np.ndarray):  # masked arrays (only unmasked elements rounded), np.matrix: as chop
            return numpy_engine.on_array_kind(x, lambda plain: _round(plain, rounding, rules))
    out = rounding(x)
    return out if rules is None else _dated_details(x, out, rounding.spec, rules)


def cpfloat(x: Any = None, fpopts: Any = None) -> Any:
    """Round ``x`` to a low-precision format with CPFloat's MEX interface.

    Parameters
    ----------
    x : array_like, torch.Tensor, cupy.ndarray or None
        Real float64 or float32 values (Python numbers and lists are float64);
        float16/bfloat16 tensors are computed in float32.  As for chop, a
        masked array comes back masked (only its unmasked elements rounded),
        an ``np.matrix`` as a matrix, and a byte-swapped array gives a native
        result.  ``None``: only set (and return) the options, like MATLAB's
        ``[~, options] = cpfloat([], fpopts)``, whose checks for a double
        input it runs after storing them; ``cpfloat()`` (``fpopts`` None too)
        is ``[~, options] = cpfloat``, which checks nothing.
    fpopts : dict (or any Mapping), CpfloatOptions, object with attributes, or None
        CPFloat's fields ``format``, ``params`` (``[t, emin, emax]``),
        ``explim``, ``infinity``, ``round``, ``saturation``, ``subnormal``,
        ``flip``, ``p`` and ``drcheck`` (0 turns off the double-rounding check).
        Fields left out keep their previous values (``subnormal`` and
        ``infinity`` return to the format's defaults); empty fields take the
        defaults.  ``explim``, ``infinity``, ``saturation`` and ``subnormal``
        are 0 or 1 (``False``/``True``).  An empty dict or Mapping is MATLAB's
        ``struct()`` (every field left out); None, ``[]``, ``()`` and ``''``
        are MATLAB's ``[]`` (nothing changes).  An object's attributes set to
        None other than these fields are ignored, and ``params = None`` is
        left out (chop's ``Options``).

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
        For values the MEX silently misreads (see ``docs/differences.rst``),
        unknown field names among them.
    TypeError
        For input of other types (pandas and xarray objects, ndarray
        subclasses other than masked arrays, ``np.matrix`` and ``np.memmap``).

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
    stored, owned = _persistent.state()
    current = stored or _default_state()
    state = _updated(current, fpopts)
    # As chop: a thread that has stored nothing reads the main thread's options until it passes some.
    # (Storing what this thread already holds is skipped: the loop of a port calls with the same options.)
    store = state is not stored if owned else state is not current or not options_are_empty(fpopts)
    if x is None:
        if store:
            _persistent.write(state)
        if fpopts is not None:  # cpfloat([], fpopts): [] is a double, checked as any double input
            _rounding_for(state, "double")
        return _options_copy(state)
    x_class = _storage_class(x)
    if store:
        _persistent.write(state)  # the MEX stores the options before it checks them against x
    return _round(x, _rounding_for(state, x_class))


def _options_copy(state: _State) -> CpfloatOptions:
    o = state.options
    return replace(o, params=list(o.params))


def cpfloat_options() -> CpfloatOptions:
    """This thread's persistent options (a copy), as the MEX's second output returns them."""
    return _options_copy(_persistent.state()[0] or _default_state())


def clear_cpfloat() -> None:
    """Forget this thread's persistent options (MATLAB ``clear cpfloat``)."""
    _persistent.write(None)


class CpfloatAt:
    """CPFloat's MEX interface as of a date, with its own persistent options (see :func:`cpfloat_at`)."""

    def __init__(self, date: Union[str, datetime.date]):
        self.rules = cpfloat_rules_at(date)
        self._lock = threading.Lock()
        self._state = self._first_state()

    def _first_state(self) -> _State:
        options = CpfloatOptions()
        if self.rules.emin != "format":
            options.params = [11, 0, 15]  # the MEX left emin at 0 (mxCalloc) until E4M3 set it
        return _State(options, rules=self.rules)

    def __call__(self, x: Any = None, fpopts: Any = None) -> Any:
        """``cpfloat(x, fpopts)`` with the rules of :attr:`rules`; ``x=None`` only sets the options."""
        if self.rules.empty_options_error and fpopts is not None and not isinstance(fpopts, dict) \
                and isempty(fpopts):
            raise CpfloatError("cpfloat:invalidstruct", "Second argument must be a struct.")
        with self._lock:
            state = _updated(self._state, fpopts)
            if x is None:
                self._state = state
                if fpopts is not None:  # cpfloat([], fpopts): [] is a double, checked as any double input
                    _rounding_for(state, "double")
                return self.options()
            x_class = _storage_class(x)
            self._state = state  # the MEX stores the options before it checks them against x
            rounding = _rounding_for(state, x_class)
        return _round(x, rounding, self.rules)

    def options(self) -> CpfloatOptions:
        """The persistent options (a copy), ``params`` listed as the interface of the date lists them."""
        o = self._state.options
        listed = dict(zip(("t", "emin", "emax"), o.params))
        return replace(o, params=[listed[name] for name in self.rules.params_layout.split(",")])

    def clear(self) -> None:
        """``clear cpfloat``: forget the persistent options."""
        with self._lock:
            self._state = self._first_state()

    def __repr__(self) -> str:
        assert self.rules.date is not None
        return f"cpfloat_at({self.rules.date.isoformat()!r})  # CPFloat's MEX interface at commit {self.rules.commit}"


def _dated_details(x: Any, out: Any, spec: RoundingSpec, rules: CpfloatRules) -> Any:
    """Before 2022-02-17, without subnormals, round to nearest with ties to even took +-xmin/2 to
    +-xmin (a detail of the C library), applied to today's result (NumPy input only)."""
    if rules.half_xmin_to_zero or spec.round != 1 or spec.subnormal or not spec.explim:
        return out
    if not isinstance(out, (np.ndarray, np.generic, float)):
        raise TypeError("cpfloat_at before 2022-02-17 rounds NumPy arrays and Python numbers only.")
    result = np.array(out)
    source = np.asarray(x, dtype=result.dtype)
    half = np.abs(source) == np.ldexp(result.dtype.type(1), spec.fmt.emin - 1)
    result[half] = np.copysign(np.ldexp(result.dtype.type(1), spec.fmt.emin), source[half])
    if isinstance(out, float):
        return float(result)
    return result[()] if isinstance(out, np.generic) else result


def cpfloat_at(date: Union[str, datetime.date]) -> CpfloatAt:
    """CPFloat's MEX interface ``cpfloat(x, fpopts)`` as it was on ``main`` at the end of ``date``.

    Parameters
    ----------
    date : str or datetime.date
        An ISO date ``'YYYY-MM-DD'`` on or after 2021-01-27 (CPFloat's first release, v0.1.0).

    Returns
    -------
    CpfloatAt
        A callable with :func:`cpfloat`'s signature, ``f(x, fpopts)``, that returns what the MEX
        interface built from CPFloat's sources of that day returned (the commit in
        ``f.rules.commit``), with its own persistent options (``f.options()``, ``f.clear()``),
        independent of :func:`cpfloat` and of other ``cpfloat_at`` functions.

    Raises
    ------
    ValueError
        For a malformed date, a date before 2021-01-27, or one of the two days whose last
        commit does not compile (2021-07-13, 2021-08-15).

    Notes
    -----
    The changes are listed in :data:`CPFLOAT_HISTORY` (``docs/history.rst``): ``params`` is
    ``[t, emax]`` before 2024-05-08 (``[t, emax, emin]`` until 2024-05-27), ``infinity`` is
    kept across calls from 2024-06-01 to 2026-02-27, and so on.  Only CPFloat's own format
    names are known (not the catalogue's).  Checked against the interface built at every
    dated state (deterministic modes); stochastic rounding and bit flips follow today's rules.

    Examples
    --------
    >>> from pychop_compat import cpfloat_at
    >>> old = cpfloat_at('2023-01-01')
    >>> old(1/3, {'format': 'c', 'params': [5, 7]})   # [t, emax] before 2024-05-08
    0.328125
    >>> old.options().params
    [5, 7]
    """
    return CpfloatAt(date)
