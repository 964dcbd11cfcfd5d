"""chop's options: the user-facing :class:`Options` and the resolved :class:`ChopSpec`.

:func:`resolve` turns whatever the caller passed (a mapping, an :class:`Options`,
any object with attributes, or nothing) into a validated, immutable
:class:`ChopSpec`, following chop.m's rules for defaults and persistence.
Every value is checked on every call; ``None`` is MATLAB's ``[]`` and an
empty mapping MATLAB's ``struct()`` (see :func:`options_are_empty`).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import difflib
import functools
import math
import numbers
import types
from dataclasses import dataclass, fields
from typing import Any, Callable, Iterable, Optional, Sequence

import numpy as np

from ..formats import CHOP_FORMAT_NAMES, CUSTOM_NAMES, Format, custom_format, lookup_format
from ..engines.dispatch import PreparedRounding
from ..random.matlab_stream import default_randfunc
from ..random.sources import sources_for
from ..spec import RoundingSpec

__all__ = ["Options", "ChopSpec", "resolve", "remembered", "OPTION_NAMES", "CHOP_M_OPTION_NAMES", "CHOP_RULES",
           "default_rules", "options_are_empty", "round_mode", "probability", "given_fields", "params_pair",
           "custom_params_format", "as_switch", "isempty", "precision_limit", "DEFAULT_SPEC", "items_snapshot",
           "atomic_values", "PARAMS_EMAX_MAX"]


@dataclass
class Options:
    """Options of :func:`~pychop_compat.chop`, with MATLAB's names; ``None`` means MATLAB's ``[]`` (use the default).

    Attributes
    ----------
    format : str, optional
        ``'q43'``/``'fp8-e4m3'``, ``'q52'``/``'fp8-e5m2'``, ``'b'``/``'bfloat16'``,
        ``'h'``/``'half'``/``'fp16'`` (default), ``'s'``/``'single'``/``'fp32'``,
        ``'d'``/``'double'``/``'fp64'``, or ``'c'``/``'custom'`` with :attr:`params`;
        also any name of the format catalogue (``'bf16'``, ``'tf32'``, ``'binary16'``,
        ``'float8_e4m3fn'``, ``'float4_e2m1fn'``, ...; see :doc:`/formats`).
    subnormal : int, optional
        1 to keep subnormal numbers, 0 to flush them (default 0 for bfloat16, else 1).
        Like ``flip`` and ``explim``: 0 or 1 (``False``/``True``), nothing else.
    round : int, optional
        1 nearest-even (default), 2 towards +inf, 3 towards -inf, 4 towards zero,
        5 stochastic (probability proportional to distance), 6 stochastic (equal probability).
    flip : int, optional
        1 to flip, with probability :attr:`p`, one random significand bit of each result (default 0).
    p : float, optional
        Probability of a bit flip, a real number in [0, 1] (default 0.5).
    explim : int, optional
        0 to ignore the format's exponent range (default 1).
    randfunc : callable, optional
        ``randfunc(n)`` returns ``n`` uniform numbers in [0, 1) for stochastic
        rounding (default: MATLAB's stream, ``rand(n, 1)``); checked on every call.
    params : sequence of two ints, optional
        ``[t, emax]`` of a custom format; returned filled in for every format.
    rules : {'chop', 'correct'}, optional
        Not one of chop.m's options: chop.m's algorithm (the default for its own
        format names and custom formats) or one correct rounding to the format,
        as hardware casts give (the default for the catalogue's other names);
        see :doc:`/formats`.
    """

    format: Optional[str] = None
    subnormal: Optional[int] = None
    round: Optional[int] = None
    flip: Optional[int] = None
    p: Optional[float] = None
    explim: Optional[int] = None
    randfunc: Optional[Callable[[int], Any]] = None
    params: Optional[Sequence[int]] = None
    rules: Optional[str] = None

    def __eq__(self, other: object) -> bool:
        # (params may be an array: compared by value, as a list is; the dataclass's == raised)
        if type(other) is not type(self):
            return NotImplemented
        pairs = ((getattr(self, f.name), getattr(other, f.name)) for f in fields(self))
        return all(np.array_equal(a, b) if isinstance(a, np.ndarray) or isinstance(b, np.ndarray) else a == b
                   for a, b in pairs)

    __hash__ = None  # type: ignore[assignment]  # (mutable: unhashable, as the dataclass made it)


OPTION_NAMES = tuple(f.name for f in fields(Options))
#: The fields chop.m itself reads (``rules`` is this package's).
CHOP_M_OPTION_NAMES = tuple(name for name in OPTION_NAMES if name != "rules")
#: The rounding rules chop accepts (``options.rules``).
CHOP_RULES = ("chop", "correct")


@dataclass(frozen=True)
class ChopSpec:
    """chop's resolved options: what chop.m keeps in its persistent ``fpopts``.

    ``spec`` is what the engines round with; ``format`` is the name as the
    caller spelled it and ``randfunc`` where stochastic rounding draws, both
    MATLAB's business, not the engines'.
    """

    format: str
    spec: RoundingSpec
    randfunc: Callable[[int], Any]

    @functools.cached_property
    def prepared(self) -> PreparedRounding:
        """The router bound to these options and their source of numbers (``randfunc``, else
        MATLAB's stream): chop's calls on small arrays find their kernel there once."""
        return PreparedRounding(self.spec, sources_for(self.randfunc))

    @functools.cached_property
    def scalar_path(self) -> bool:
        """Whether a Python float takes chop's scalar path: a deterministic mode of chop.m's own
        semantics (no random numbers, no bit flips; asked on every scalar chop)."""
        s = self.spec
        return s.round <= 4 and not s.flip and not s.extended

    def to_options(self) -> Options:
        """The options as MATLAB's ``[~, options] = chop`` returns them."""
        s = self.spec
        return Options(format=self.format, subnormal=s.subnormal, round=s.round, flip=s.flip, p=s.p,
                       explim=s.explim, randfunc=self.randfunc, params=s.fmt.params, rules=s.range_rules)


#: chop.m's defaults: fp16, round to nearest, subnormals kept, MATLAB's stream.
DEFAULT_SPEC = ChopSpec("h", RoundingSpec(lookup_format("h")), default_randfunc)


def isempty(value: Any) -> bool:
    """MATLAB's ``isempty`` for an option value: ``None``, ``''``, ``[]``, an empty array."""
    if value is None:
        return True
    if isinstance(value, (str, list, tuple, dict)):
        return len(value) == 0
    if isinstance(value, np.ndarray):
        return value.size == 0
    return False


def options_are_empty(options: Any) -> bool:
    """Whether ``options`` is MATLAB's ``[]`` (``None``, ``[]``, ``()``, ``''``, an empty array).

    An empty mapping is MATLAB's ``struct()``, not ``[]``: every field at its default.
    """
    if type(options) is dict:  # the usual case, first: chop is called in loops
        return False
    return isempty(options) and not isinstance(options, dict) and not hasattr(options, "_fields")


#: Misspellings and older names of options, and the option meant.
_SUGGESTIONS = {"precision": "format", "fmt": "format", "rounding": "round", "mode": "round",
                "subnormals": "subnormal", "prob": "p", "probability": "p", "randfun": "randfunc"}

_NOT_OPTIONS = (str, bytes, bytearray, numbers.Number, np.generic, np.ndarray,
                collections.abc.Set, collections.abc.Sequence, collections.abc.Iterator, type,
                types.ModuleType)


def _unknown_fields_error(unknown) -> ValueError:
    names = sorted(str(name) for name in unknown)
    hint = ""
    for name in names:
        meant = _SUGGESTIONS.get(name.lower()) or next(iter(difflib.get_close_matches(name, OPTION_NAMES, 1)), None)
        if meant:
            hint += f" {name!r}: did you mean {meant!r}?"
    return ValueError(f"Unknown chop option(s) {names}; allowed: {', '.join(OPTION_NAMES)}.{hint}")


def _attribute_fields(options) -> set[str]:
    """The public attribute names an options object holds (instance ``__dict__`` and slots)."""
    names: set[str] = set()
    found = False
    instance_dict = getattr(options, "__dict__", None)
    if isinstance(instance_dict, dict):
        found = True
        names.update(k for k in instance_dict if isinstance(k, str) and not k.startswith("_"))
    for klass in type(options).__mro__:
        slots = klass.__dict__.get("__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            if slot not in ("__dict__", "__weakref__"):
                found = True
                if not slot.startswith("_") and hasattr(options, slot):
                    names.add(slot)
    if not found:
        raise TypeError(_container_message(options))
    return names


def _container_message(options) -> str:
    return ("options must be a dict (or any Mapping), an Options, or an object with attributes "
            f"(e.g. SimpleNamespace), not {type(options).__name__}.")


def given_fields(options: Any) -> Optional[dict]:
    """The non-empty fields of ``options``, or ``None`` when options is empty (MATLAB ``[]``).

    A string is a format name (``chop(x, 'h')``).  Raises ``TypeError`` for what
    cannot hold options and ``ValueError`` naming any field that is not an option.
    """
    if options_are_empty(options):
        return None
    items: Iterable[tuple[Any, Any]]
    names: Iterable[Any]
    if isinstance(options, collections.abc.Mapping):
        names, items = options, options.items()
    elif isinstance(options, tuple) and hasattr(options, "_fields"):  # a namedtuple
        names, items = options._fields, zip(options._fields, options)
    elif isinstance(options, _NOT_OPTIONS) or callable(options):
        if isinstance(options, str):  # off the dict path, which every chop call in a loop takes
            return {"format": options}
        raise TypeError(_container_message(options))
    else:
        names = _attribute_fields(options)
        struct_like = isinstance(options, (types.SimpleNamespace, Options)) or dataclasses.is_dataclass(options)
        if not struct_like and not any(hasattr(options, name) for name in OPTION_NAMES):
            # An object of some other kind (a Chop, a DataFrame) is not an empty struct.
            raise TypeError(_container_message(options) + " It has none of the option fields.")
        items = ((name, getattr(options, name, None)) for name in OPTION_NAMES)
    unknown = [name for name in names if not isinstance(name, str) or name not in OPTION_NAMES]
    if unknown:
        raise _unknown_fields_error(unknown)
    return {name: value for name, value in items if not isempty(value)}


def _is_real(value) -> bool:
    """A real number that is not a bool (Python, NumPy, ``fractions.Fraction``)."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _as_int(value, name: str) -> int:
    """An integer-valued real number (``2`` or ``2.0``, not ``True``, ``'2'`` or ``2+0j``)."""
    if _is_real(value):
        if isinstance(value, numbers.Integral):
            return int(value)
        as_float = float(value)
        if math.isfinite(as_float) and as_float.is_integer():
            return int(as_float)
    raise ValueError(f"options.{name} must be an integer, got {value!r}.")


_FLIP_HINT = (" (Bit flips of any bit of the encoding, and other error models, are in the "
              "CPFloat-style facade pychop_compat.cpfloat.)")


def as_switch(value: Any, name: str) -> int:
    """A 0/1 switch: 0, 1, False, True (also as NumPy scalars, or 0.0 and 1.0), as an int."""
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if _is_real(value) and (value == 0 or value == 1):
        return int(value)
    hint = _FLIP_HINT if name == "flip" else ""
    raise ValueError(f"options.{name} must be 0 or 1 (or False/True), got {value!r}.{hint}")


def probability(value: Any) -> float:
    """``options.p`` checked: a real number in [0, 1] (NaN is not)."""
    if not _is_real(value):
        raise ValueError(f"options.p must be a real number, got {value!r}.")
    p = float(value)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"options.p must be a real number in [0, 1], got {value!r}.")
    return p


_ROUND_MODES = ("1 (nearest, ties to even), 2 (towards +inf), 3 (towards -inf), 4 (towards zero), "
                "5 and 6 (stochastic)")


def round_mode(value: Any) -> int:
    """``options.round`` checked: an integer from 1 to 6 (``3`` or ``3.0``; not ``True``, ``'3'``, ``3+0j``)."""
    try:
        mode = _as_int(value, "round")
    except ValueError:
        raise ValueError(f"options.round must be an integer from 1 to 6, got {value!r}. "
                         f"Allowed: {_ROUND_MODES}.") from None
    if not 1 <= mode <= 6:
        raise ValueError(f"Unsupported value of options.round: {mode}. Allowed: {_ROUND_MODES}.")
    return mode


def precision_limit(mode: int, x_class: str) -> int:
    """Largest custom precision chop.m accepts for inputs of class ``x_class``.

    Round to nearest needs ``p_2 >= 2 p_1 + 2`` to avoid double rounding
    (chop.m's comment), hence 11 for single and 25 for double; other modes 23 and 52.
    """
    if mode == 1:
        return 11 if x_class == "single" else 25
    return 23 if x_class == "single" else 52


#: The largest ``emax`` of a custom format: exponents such as ``emin - t + 1`` must fit in an int64.
PARAMS_EMAX_MAX = 2**62


def custom_params_format(given: dict, stored: Optional[ChopSpec], limit: Optional[int], x_class: str,
                         when: str = "") -> Format:
    """The custom format (``format = 'c'``) of the fields ``given``: ``params`` checked (precision at
    most ``limit`` for ``x_class``, None: no limit; ``when`` ends that error's message), else the
    ``[t, emax]`` of the ``stored`` settings; ValueError otherwise."""
    if "params" in given:
        t, emax = params_pair(given["params"])
        if t < 1 or emax < 1:
            raise ValueError(f"options.params = [t, emax] needs t >= 1 and emax >= 1, got [{t}, {emax}].")
        if emax > PARAMS_EMAX_MAX:  # the kernels compute exponents such as emin - t + 1 in int64
            raise ValueError(f"options.params = [t, emax] needs emax <= 2**62, got [{t}, {emax}].")
        if limit is not None and t > limit:
            raise ValueError(f"Precision of the custom format must be at most {limit} if working in {x_class}{when}.")
        return custom_format(t, emax)
    if stored is not None:
        return custom_format(stored.spec.fmt.t, stored.spec.fmt.emax)
    raise ValueError("Must specify options.params with options.format = 'c'.")


def params_pair(params: Any) -> tuple[int, int]:
    """``options.params`` checked: two integers ``[t, emax]`` (a list, tuple or array)."""
    values: Optional[list[Any]]
    if isinstance(params, (list, tuple)):
        values = list(params)
    elif isinstance(params, np.ndarray):
        values = params.ravel().tolist() if params.dtype.kind in "iuf" else None
    else:
        values = None
    if values is None or len(values) != 2:
        raise ValueError(f"options.params must be [t, emax], got {params!r}.")
    return _as_int(values[0], "params"), _as_int(values[1], "params")


#: Resolved dict options (MATLAB ports pass the same struct on every call), under two kinds of
#: key that cannot collide: :func:`remembered`'s triple, taken cheaply on every call and stored
#: only for :func:`atomic_values`, and :func:`_memoized`'s 4-tuple for the rest.
_RESOLVED: dict = {}
_RESOLVED_MAX = 256


def _remember(key, spec: ChopSpec) -> None:
    if len(_RESOLVED) >= _RESOLVED_MAX:
        _RESOLVED.clear()
    _RESOLVED[key] = spec


def remembered(options: dict, x_class: str, scope: Any, compute: Callable[..., ChopSpec], *args: Any) -> ChopSpec:
    """``compute(*args)``, the settings of ``options``, found once per content of ``options``.

    Parameters
    ----------
    options : dict
        A caller's options, read as they are now (a dict changed in place is looked up afresh).
    x_class : {'double', 'single'}
        MATLAB class of the array being chopped.
    scope : hashable
        What else the settings depend on (``None`` for :func:`resolve`; a date for ``chop_at``).
    compute : callable
        Resolves the options; called on a miss.
    *args
        Its arguments.

    Returns
    -------
    ChopSpec
        What ``compute`` returned for this content before, if it was remembered: only for
        :func:`atomic_values` that do not name a custom format (which may take the stored params).
    """
    try:
        key = (items_snapshot(options), x_class, scope)
        found = _RESOLVED.get(key)
    except TypeError:  # an unhashable value (a list of params)
        return compute(*args)
    if found is None:
        found = compute(*args)
        if atomic_values(options) and not _inherits_params(options):
            _remember(key, found)
    return found


def _typed(value):
    """``value`` with its type (and its elements' types): ``1``, ``True``, ``1.0`` and ``1+0j``
    are equal and hash alike, but are not the same option value."""
    if isinstance(value, (list, tuple)):
        return type(value), tuple(_typed(v) for v in value)
    return type(value), value


def resolve(options: Any, stored: Optional[ChopSpec], x_class: str = "double") -> ChopSpec:
    """The settings chop.m would use for ``chop(x, options)``.

    Parameters
    ----------
    options : Mapping, Options, object with attributes, or None
        What the caller passed.  ``None`` and ``[]`` are MATLAB's ``[]`` (the
        stored settings); an empty mapping or object is MATLAB's ``struct()``
        (every field at its default).
    stored : ChopSpec or None
        The persistent settings of the previous call (``None`` after ``clear_chop``).
    x_class : {'double', 'single'}
        MATLAB class of the array being chopped (limits custom precisions).

    Returns
    -------
    ChopSpec
        Options given (even an empty mapping): every field from them alone,
        missing ones at their defaults (a custom format without ``params``
        keeps the stored ``[t, emax]``); none: the stored settings, or the defaults.

    Raises
    ------
    TypeError
        When ``options`` cannot hold options (a set, string, number, sequence).
    ValueError
        For an unknown field, an unknown format, a rounding mode outside 1..6,
        a switch other than 0/1, ``p`` outside [0, 1], malformed values, a
        custom format without params and nothing stored, or a custom precision
        over the limit for ``x_class``.  Nothing is stored when this is raised.
    """
    if type(options) is dict:  # the usual case, first: chop is called in loops with one dict
        return remembered(options, x_class, None, _memoized, options, stored, x_class)
    if options_are_empty(options):
        return DEFAULT_SPEC if stored is None else stored
    return _resolve(options, stored, x_class)


def _memoized(options: dict, stored: Optional[ChopSpec], x_class: str) -> ChopSpec:
    """:func:`_resolve`, memoized by everything it reads (lists of params too), values with their
    types: a hit means that options of the same types and values were validated before."""
    inherits_params = _inherits_params(options) and isempty(options.get("params"))
    inherited = (stored.spec.fmt.t, stored.spec.fmt.emax) if inherits_params and stored is not None else None
    key = (tuple((k, _typed(v)) for k, v in options.items()), x_class, inherits_params, inherited)
    try:
        spec = _RESOLVED.get(key)
    except TypeError:  # an unhashable value
        return _resolve(options, stored, x_class)
    if spec is None:
        spec = _resolve(options, stored, x_class)
        _remember(key, spec)
    return spec


def items_snapshot(options: dict) -> tuple:
    """``options``' items and their values' types, as a key of a cache of what they resolve to.

    Parameters
    ----------
    options : dict
        A caller's options, read as they are now (a dict changed in place gives another key).

    Returns
    -------
    tuple
        ``(items, types)``.  The types enter because ``1``, ``True``, ``1.0`` and
        ``np.float64(1)`` are equal and hash alike but are not the same option value.  Hashing
        it raises ``TypeError`` for an unhashable value (a list); equal keys mean equal options
        only for :func:`atomic_values`.
    """
    return tuple(options.items()), tuple(map(type, options.values()))


#: Values whose equality and hash are their value's: no container (a tuple of params compares
#: ``(1, 8) == (True, 8)``), nothing changed in place, no subclass with an equality of its own.
_EXACT_TYPES = frozenset((str, int, float, bool, type(None)))
_NUMPY_SCALARS = (np.bool_, np.integer, np.floating)
#: Callables whose equality is their identity (a method's: its object's and its function's).
_CALLABLES = (types.FunctionType, types.BuiltinFunctionType, types.MethodType)


def atomic_values(options: collections.abc.Mapping) -> bool:
    """Whether every value of ``options`` equals another only when it is the same option value.

    Parameters
    ----------
    options : Mapping
        A caller's options.

    Returns
    -------
    bool
        True for strings, numbers (Python's and NumPy's, with their types as
        :func:`items_snapshot` takes them), None and callables compared by identity; False
        when a value is a container, an array or an object with an equality of its own.
    """
    for value in options.values():
        kind = type(value)
        if kind in _EXACT_TYPES or issubclass(kind, _NUMPY_SCALARS):
            continue
        if not (callable(value) and (kind.__eq__ is object.__eq__ or kind in _CALLABLES)):
            return False
    return True


def _inherits_params(options: dict) -> bool:
    """Whether the options name a custom format, which may take the stored ``[t, emax]``."""
    name = options.get("format")
    return isinstance(name, str) and name in CUSTOM_NAMES


def _resolve(options, stored: Optional[ChopSpec], x_class: str) -> ChopSpec:
    given = given_fields(options)
    if given is None:
        return DEFAULT_SPEC if stored is None else stored

    name = given.get("format", "h")
    if not isinstance(name, str):
        raise ValueError(f"options.format must be a string (a format name such as 'h', 'b' or 'c'), "
                         f"got {name!r}.")
    mode = round_mode(given.get("round", 1))
    if name in CUSTOM_NAMES:
        fmt = custom_params_format(given, stored, precision_limit(mode, x_class), x_class)
    else:
        fmt = lookup_format(name)
        if "params" in given:
            params_pair(given["params"])  # ignored, as by chop.m, but not if malformed

    randfunc = given.get("randfunc", default_randfunc)
    if not callable(randfunc):
        raise ValueError(f"options.randfunc must be callable as randfunc(n), got {randfunc!r}.")
    rules = given.get("rules", default_rules(name))
    if rules not in CHOP_RULES:
        raise ValueError(f"options.rules must be one of {', '.join(map(repr, CHOP_RULES))}, got {rules!r}.")
    default_subnormal = 0 if name in _SUBNORMAL_OFF_NAMES or not fmt.subnormals else 1
    spec = RoundingSpec(
        fmt=fmt,
        subnormal=as_switch(given.get("subnormal", default_subnormal), "subnormal"),
        round=mode,
        flip=as_switch(given.get("flip", 0), "flip"),
        p=probability(given.get("p", 0.5)),
        explim=as_switch(given.get("explim", 1), "explim"),
        # Formats without Inf: what overflow gives is the format's own rule (NaN or saturation).
        saturation=fmt.overflow == "saturate",
        infinity=fmt.has_inf,
        range_rules=rules,
    )
    return ChopSpec(format=name, spec=spec, randfunc=randfunc)


def default_rules(name: str) -> str:
    """The rounding rule a format name selects: ``'chop'`` for chop.m's own spellings and
    custom formats, ``'correct'`` for every other name of the catalogue."""
    return "chop" if name in CHOP_FORMAT_NAMES else "correct"


# chop.m defaults subnormal to 0 for bfloat16 ('b', 'bfloat16'); other names keep the
# format's own subnormals ('bf16' is bfloat16 as hardware defines it).
_SUBNORMAL_OFF_NAMES = ("b", "bfloat16")
