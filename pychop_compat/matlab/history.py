"""chop as it was on a date: :func:`chop_at`.

MATLAB's chop changed its results several times since its first release
(2019-03-07); ``chop_at('2020-06-01')`` follows chop.m as it stood on master at
the end of that day, so that older studies can be reproduced.  Each rule that
changed is a small named function (the rounding itself is
:mod:`pychop_compat.rules.chop`), checked against every version of chop.m in
``tests/chop_history`` (``docs/history.rst``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import functools
import numbers
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Callable, Literal, Optional, Union

import numpy as np

from ..engines import numpy_engine
from ..formats import CHOP_FORMAT_NAMES, CUSTOM_NAMES, lookup_format
from ..kernels import compiled, numpy_fast, numpy_history
from ..random import matlab_stream
from .options import (DEFAULT_SPEC, OPTION_NAMES, ChopSpec, Options, custom_params_format, isempty, options_are_empty,
                      precision_limit, remembered, resolve)
from ..spec import RoundingSpec
from ..random.sources import MATLAB_STREAM, sources_for
from ..rules.chop import apply_range_limits, roundit_vector

__all__ = ["chop_at", "ChopAt", "HISTORY", "rules_at", "Rules", "FIRST_RELEASE", "ROUTES", "route_at", "as_date",
           "rules_in_force"]

#: chop.m's first public release; earlier dates are refused by :func:`chop_at`.
FIRST_RELEASE = _dt.date(2019, 3, 7)

#: Every change of chop.m/roundit.m on master that changes a result or an error,
#: as (date, commit, what changed).  Comment-only commits are left out.
HISTORY = (
    ("2019-03-07", "f056228", "First release (commit 4eba2f3 and f056228 the same day)."),
    ("2019-03-14", "dc590c4", "Custom formats: options.format may be omitted (default 'h'); "
     "custom precision limited to t <= 11 for single and t <= 25 for double input, every rounding mode."),
    ("2019-03-20", "f29e260", "Explicit 'Unrecognized format.' error (before: an undefined-variable error)."),
    ("2019-07-11", "8bc14e8", "options.explim added (before: the exponent range was always applied); "
     "complex input refused; bit flips fail once an element is chosen (roundit reads options.t, no longer set) "
     "until 2020-05-31; "
     "with explim = 0 only the first max(size(x)) elements of a matrix are rounded."),
    ("2019-10-14", "7ebabda", "Format parameters kept between calls (persistent t and emax): "
     "recomputed only when options are given."),
    ("2020-05-01", "7ca5df6", "Round towards zero (mode 4) elementwise (before: floor for the whole "
     "block if every element was >= 0, else ceil), but +-Inf become NaN; explim = 0 rounds all "
     "elements of a matrix."),
    ("2020-05-13", "d004a1a", "IEEE overflow for directed rounding (modes 2-5: +-xmax or +-Inf by "
     "direction; before: +-Inf beyond the rounding boundary in every mode); mode 4 keeps +-Inf."),
    ("2020-05-14", "817da71", "Exponent from [~, e] = log2(x) (frexp) instead of floor(log2(abs(x))), "
     "which was one too large just below powers of two, and NaN for 0 and Inf without explim."),
    ("2020-05-31", "fe28402", "Bit flips work again (roundit draws the bit from options.params)."),
    ("2020-06-16", "c213288", "Values below xmin (subnormal = 0) or xmins: round to nearest and the "
     "directed modes give +-xmin (+-xmins) or 0 by the rounding rule; before: subnormal = 0 flushed "
     "the whole subnormal range to 0 and every |x| < xmins became 0 (commit 2691888 merged the same day)."),
    ("2020-10-03", "7072147", "Custom precision limit only for round to nearest (11 single, 25 double); "
     "other modes up to 23 (single) and 52 (double)."),
    ("2022-04-15", "dfcc2a3", "8-bit formats 'q43' ('fp8-e4m3') and 'q52' ('fp8-e5m2')."),
    ("2022-06-14", "906c31e", "options.randfunc for the stochastic rounding draws (before: rand)."),
)


def as_date(value: Union[str, _dt.date]) -> _dt.date:
    """The day ``value`` names.

    Parameters
    ----------
    value : str or datetime.date
        An ISO date ``'YYYY-MM-DD'``, a date, or a datetime (its day).

    Returns
    -------
    datetime.date

    Raises
    ------
    ValueError
        For text that is not an ISO date.
    TypeError
        For a value of another type.
    """
    if isinstance(value, _dt.datetime):
        return value.date()
    if isinstance(value, _dt.date):
        return value
    if isinstance(value, str):
        try:
            return _dt.date.fromisoformat(value)
        except ValueError:
            raise ValueError(f"date must be an ISO date 'YYYY-MM-DD', got {value!r}") from None
    raise TypeError(f"date must be an ISO date string or a datetime.date, got {type(value).__name__}")


@dataclass(frozen=True)
class Rules:
    """Which of chop.m's historical rules are in force (see :data:`HISTORY`)."""

    date: _dt.date
    commit: str
    requires_format: bool  # before 2019-03-14: options.format must be given
    format_checked: bool  # 2019-03-20: an unknown format fails before chop.m returns [] for empty input
    precision_limit: str  # 'none' | 'all modes' | 'round to nearest'
    explim_option: bool  # 2019-07-11
    flips_broken: bool  # 2019-07-11 .. 2020-05-30
    flip_bits_column: bool  # before 2020-05-31: roundit draws the bits as a column, randi(t - 1, length(k), 1)
    explim0_first_elements_only: bool  # 2019-07-11 .. 2020-04-30
    truncation: str  # 'block' | 'mask' | 'elementwise'
    overflow: str  # 'infinity' | 'by mode'
    exponent: str  # 'floor log2' | 'frexp'
    tiny: str  # 'flush' | 'by mode'
    fp8: bool  # 2022-04-15
    randfunc_option: bool  # 2022-06-14


def rules_at(date: Union[str, _dt.date]) -> Rules:
    """The rules of chop.m on master at the end of ``date`` (ISO ``'YYYY-MM-DD'`` or a date).

    Raises
    ------
    ValueError
        For a malformed date or one before chop's first release, 2019-03-07.
    """
    day = as_date(date)
    if day < FIRST_RELEASE:
        raise ValueError(f"chop was first released on {FIRST_RELEASE.isoformat()}; no chop existed on {day}.")
    commit = [c for d, c, _ in HISTORY if as_date(d) <= day][-1]
    return Rules(date=day, commit=commit, **rules_in_force(_CHANGES, day))


#: When each rule of :class:`Rules` changed: (its value at the first release, (date, new value), ...).
_CHANGES: dict[str, tuple] = {
    "requires_format": (True, ("2019-03-14", False)),
    "format_checked": (False, ("2019-03-20", True)),
    "precision_limit": ("none", ("2019-03-14", "all modes"), ("2020-10-03", "round to nearest")),
    "explim_option": (False, ("2019-07-11", True)),
    "flips_broken": (False, ("2019-07-11", True), ("2020-05-31", False)),
    "flip_bits_column": (True, ("2020-05-31", False)),
    "explim0_first_elements_only": (False, ("2019-07-11", True), ("2020-05-01", False)),
    "truncation": ("block", ("2020-05-01", "mask"), ("2020-05-13", "elementwise")),
    "overflow": ("infinity", ("2020-05-13", "by mode")),
    "exponent": ("floor log2", ("2020-05-14", "frexp")),
    "tiny": ("flush", ("2020-06-16", "by mode")),
    "fp8": (False, ("2022-04-15", True)),
    "randfunc_option": (False, ("2022-06-14", True)),
}


def rules_in_force(changes: Mapping[str, tuple], day: _dt.date) -> dict:
    """The value of each rule of ``changes`` at the end of ``day``; ``changes`` maps a rule to
    ``(its first value, (date it changed, new value), ...)``, the dates in order."""
    found = {}
    for name, (value, *steps) in changes.items():
        found[name] = value
        for since, new in steps:
            if day >= as_date(since):
                found[name] = new
    return found


#: How :func:`chop_at` computes a call (:func:`route_at`): on today's engines, on today's engines
#: followed by the tiny-number rule of before 2020-06-16, on loops of the rules before 2020-05-14
#: (compiled, stochastic rounding included; or the NumPy engine's, modes 1-4), or step by step
#: (``chop_vector_at``).
ROUTES = ("today", "flush tiny", "old rules", "step by step")


def route_at(rules: Rules, spec: RoundingSpec) -> str:
    """How a call of chop.m of ``rules.date`` with ``spec`` is computed: one of :data:`ROUTES`.

    ``'today'``: that chop.m returns what today's :func:`~pychop_compat.chop` returns (every
    date since 2020-06-16; from 2020-05-14 also without the exponent range), so today's engines
    compute it.  ``'flush tiny'``: from 2020-05-14 to 2020-06-15 with the exponent range, the
    only rule of the call that differs from today's is the tiny-number rule (every ``|x|``
    below xmins, or xmin with ``subnormal = 0``, became +0, whatever the mode), which the
    compiled loops and the NumPy engine's special elements take as a parameter (stochastic
    rounding: applied after the engine).  ``'old rules'``: before 2020-05-14 (exponent
    ``floor(log2(|x|))``, overflow to Inf, truncation of a whole block), modes 1-6 without
    flips: the compiled engine's loops of those rules
    (:func:`~pychop_compat.kernels.compiled.round_old_rules`; for modes 5 and 6, drawing MATLAB's
    stream in chop.m's order,
    :func:`~pychop_compat.kernels.compiled.round_old_rules_stochastic`, which declines a call with
    a NaN result), or on the NumPy engine, modes 1-4, today's NumPy engine with those rules on its
    special elements (:func:`~pychop_compat.kernels.numpy_history.round_old_rules`), else step by
    step.
    ``'step by step'``: flips before 2020-05-14, on the dates they were broken and with the old
    tiny-number rule (where a flipped subnormal kept its sign at zero).

    Parameters
    ----------
    rules : Rules
        The rules of a date (:func:`rules_at`).
    spec : RoundingSpec
        The resolved options of the call.

    Returns
    -------
    str
        One of :data:`ROUTES`.
    """
    if rules.exponent != "frexp" and not spec.flips:  # (the other old rules came before it)
        return "old rules"
    if (rules.exponent != "frexp" or rules.overflow != "by mode" or rules.truncation != "elementwise"
            or (spec.flips and (rules.flips_broken or rules.tiny != "by mode"))):
        return "step by step"
    if rules.tiny == "by mode" or not spec.limits_exponent:
        return "today"
    return "flush tiny"


def flush_tiny(c: np.ndarray, x: np.ndarray, min_rep: float) -> None:
    """chop.m's tiny-number rule before 2020-06-16 (frexp exponents): every ``|x| < min_rep``
    becomes +0, in place on the results ``c`` of the inputs ``x``.  (chop.m set chop's subnormal
    block to 0 with ``subnormal = 0``, then every ``|x| < xmins``: with exact exponents that is
    every ``|x|`` below ``min_rep``, xmins or xmin; no result of a larger ``|x|`` is below it.)"""
    threshold = x.dtype.type(min_rep)
    if float(threshold) != min_rep:  # (below the class of x: compared in double, as chop.m did)
        threshold = np.float64(min_rep)
    order: Literal["C", "F"]
    if x.flags.c_contiguous and c.flags.c_contiguous:
        order = "C"
    elif x.flags.f_contiguous and c.flags.f_contiguous:
        order = "F"
    else:
        c[np.abs(x) < threshold] = 0
        return
    # Block by block: a temporary of a whole large array costs more than the comparisons.
    flat_c, flat_x = c.reshape(-1, order=order), x.reshape(-1, order=order)
    for start in range(0, flat_x.size, _FLUSH_BLOCK):
        magnitude = np.abs(flat_x[start:start + _FLUSH_BLOCK])
        if np.fmin.reduce(magnitude) < threshold:  # (fmin: a NaN does not hide the others)
            flat_c[start:start + _FLUSH_BLOCK][magnitude < threshold] = 0


_FLUSH_BLOCK = 1 << 14


# --- Options, as each version read them ---

_FP8_NAMES = ("q43", "fp8-e4m3", "q52", "fp8-e5m2")


def _fields(options) -> Optional[dict]:
    """The non-empty fields given, or None for MATLAB's ``[]`` (reuse the stored options); a string
    is a format name."""
    if options_are_empty(options):  # None, [], (), '', an empty array
        return None
    if isinstance(options, Mapping):
        items = dict(options)
    elif isinstance(options, str):  # a format name: shorthand for {'format': name}, as for chop
        items = {"format": options}
    elif isinstance(options, (bytes, int, float, complex, list, tuple, set, np.ndarray)):
        raise TypeError(f"options must be a mapping or an object with attributes, not {type(options).__name__}.")
    else:
        items = {name: getattr(options, name, None) for name in OPTION_NAMES}
    unknown = set(items) - set(OPTION_NAMES)
    if unknown:
        raise ValueError(f"Unknown chop option(s) {sorted(unknown)}; allowed: {', '.join(OPTION_NAMES)}.")
    return {k: v for k, v in items.items() if not isempty(v)}  # (chop.m: isempty(options.field), the default)


def _resolve_at(options, stored: Optional[ChopSpec], x_class: str, rules: Rules) -> ChopSpec:
    given = _fields(options)
    if given is None:
        return resolve(None, stored, x_class)
    # An empty mapping or an object with no option fields is MATLAB's struct():
    # not empty for chop.m, so every field takes its default.
    # (chop.m set an empty options.format to 'h'; only a missing field failed)
    if isinstance(options, Mapping):
        has_format = "format" in options
    else:
        has_format = isinstance(options, str) or hasattr(options, "format")
    if rules.requires_format and not has_format:
        raise ValueError("Before 2019-03-14 chop needs options.format (Reference to non-existent field 'format').")
    if not rules.explim_option:
        given.pop("explim", None)  # not read: the range always applied (ChopAt needs no other check)
    if not rules.randfunc_option:
        given.pop("randfunc", None)  # not read: stochastic rounding drew from rand
    name = given.get("format", "h")
    if not isinstance(name, str):
        raise ValueError(f"options.format must be a string, got {name!r}.")
    if name in _FP8_NAMES and not rules.fp8:
        raise ValueError(f"Unrecognized format {name!r}: 8-bit formats were added to chop on 2022-04-15.")
    if given.pop("rules", "chop") != "chop":  # (chop.m's rules: what [~, options] = chop gives back)
        raise ValueError("chop_at follows chop.m's rules of its date; options.rules is not one of chop.m's "
                         "options (use chop for options.rules).")
    if name not in CHOP_FORMAT_NAMES:
        lookup_format(name)  # raises for an unknown name
        raise ValueError(f"chop_at reproduces chop.m, which knows only its own format names "
                         f"({', '.join(map(repr, CHOP_FORMAT_NAMES))}); {name!r} rounds correctly "
                         "under chop (see docs/formats.rst).")
    if name not in CUSTOM_NAMES:
        return resolve(dict(given, format=name), stored, x_class)
    # Custom formats: validate the other fields with today's rules, then the params of the time
    # (precision limited from 2019-03-14: in every mode as round to nearest, from 2020-10-03 as today).
    standin = dict(given, format="h")
    standin.pop("params", None)
    spec = resolve(standin, None, x_class)
    limit = precision_limit(1 if rules.precision_limit == "all modes" else spec.spec.round, x_class)
    fmt = custom_params_format(given, stored, None if rules.precision_limit == "none" else limit, x_class,
                               f" (chop on {rules.date.isoformat()})")
    return ChopSpec(name, dataclasses.replace(spec.spec, fmt=fmt), spec.randfunc)


# --- Rounding, as each version did it ---


def _pow2(x: np.ndarray, e: np.ndarray) -> np.ndarray:
    """MATLAB's exact ``pow2(x, e) = x * 2^e``; a non-finite ``e`` gives ``x * 2^e`` in IEEE
    arithmetic (``0 * 2^Inf`` and ``Inf * 2^-Inf`` are NaN)."""
    finite = np.isfinite(e)
    everywhere = finite.all()  # (no 0, Inf or NaN among the inputs: no masks, no gathered copies)
    n = e.astype(np.int64) if everywhere else np.where(finite, e, 0).astype(np.int64)
    # x * 2^n with 2^n a normal number of x's class is ldexp's correctly rounded result, and
    # NumPy's multiplication runs in SIMD, its ldexp one element at a time (faster from a few
    # thousand elements on).
    bits, bias, signed = (52, 1023, np.int64) if x.dtype == np.float64 else (23, 127, np.int32)
    if x.size >= 4096 and np.all((n >= 1 - bias) & (n <= bias)):
        out = x * ((n + bias) << bits).astype(signed, copy=False).view(x.dtype)
    else:
        out = np.ldexp(x, n)
    if everywhere:
        return out
    bad = ~finite
    out[bad] = x[bad] * np.power(x.dtype.type(2), e[bad].astype(x.dtype))
    return out


def _exponent(x: np.ndarray, rules: Rules) -> np.ndarray:
    """The exponent ``e`` with ``x = 2^e * 1.f``, as a float array (may hold +-Inf, NaN)."""
    if rules.exponent == "frexp":
        return (np.frexp(np.abs(x))[1] - 1).astype(np.float64)
    # floor(log2(abs(x))), evaluated in the class of x, as MATLAB does
    return np.floor(np.log2(np.abs(x))).astype(np.float64, copy=False)


def _truncate(y: np.ndarray, rules: Rules) -> np.ndarray:
    """Round towards zero as roundit.m did at the time."""
    if rules.truncation == "elementwise":
        return np.trunc(y)
    if rules.truncation == "mask":
        # (y >= 0) .* floor(y) + (y < 0) .* ceil(y): 0 * Inf = NaN for +-Inf
        return (y >= 0) * np.floor(y) + (y < 0) * np.ceil(y)
    # ``if y >= 0`` on a whole block: true only when every element is >= 0
    return np.floor(y) if y.size and np.all(y >= 0) else np.ceil(y)


def _roundit(y: np.ndarray, spec: RoundingSpec, rules: Rules, sources, row: bool = False) -> np.ndarray:
    mode = spec.round
    if mode == 4:
        # truncate as at the time, then let the reference apply the flips (mode 1 on integers is exact)
        y, mode = _truncate(y, rules), 1
    if spec.flips and rules.flips_broken:
        # roundit.m of those dates draws temp = rand(size(y)) and reads the missing options.t only
        # when some temp <= p chose an element to flip: the rounded values, else an error after the draws.
        rounded = roundit_vector(y, mode, sources)
        if np.any(sources.flip_uniform(rounded.size) <= spec.p):
            raise ValueError("Bit flips fail in chop.m from 2019-07-11 to 2020-05-30 once an element is chosen "
                             "for flipping (roundit reads options.t, which chop no longer sets).")
        return rounded
    if spec.flips and row and rules.flip_bits_column:
        # roundit.m's u = abs(y(k)) of a row block is a row, its bits b = randi(t - 1, length(k), 1) a
        # column: bitxor(u, 2.^(b-1)) fails (sizes differ) once two elements are chosen, after both draws.
        rounded = roundit_vector(y, mode, sources)
        temp = sources.flip_uniform(rounded.size)
        chosen = np.count_nonzero(temp <= spec.p)
        if chosen >= 2:
            sources.flip_randi(spec.fmt.t - 1, chosen)
            raise ValueError("Bit flips on a row vector fail in chop.m before 2019-07-11 once two elements of a "
                             "block are chosen (roundit's bitxor of a row and a column of bits).")
        # at most one chosen: the flip as usual, on the numbers drawn (mode 1 on integers is exact)
        drawn = dataclasses.replace(sources, flip_uniform=lambda n: temp)
        return roundit_vector(rounded, 1, drawn, spec.flips, spec.p, spec.fmt.t)
    return roundit_vector(y, mode, sources, spec.flips, spec.p, spec.fmt.t)


def chop_vector_at(x: np.ndarray, spec: RoundingSpec, rules: Rules, sources,
                   n_first: Optional[int] = None, row: bool = False) -> np.ndarray:
    """chop.m of ``rules.date`` on a vector in column-major order.

    ``n_first``: for the 2019-07-11 .. 2020-04-30 bug with ``explim = 0``, only
    the first ``n_first`` elements are rounded (``max(size(x))``).  ``row``: the input was a
    ``1 x n`` matrix, n >= 2 (chop.m's blocks ``x(find(...))`` are rows, which bit flips of
    roundit before 2020-05-31 cannot take; a matrix's, a column's and a 1-D array's: columns).
    """
    with np.errstate(all="ignore"):
        fmt = spec.fmt
        t, emin, emins = fmt.t, fmt.emin, fmt.emins
        limits = spec.limits_exponent or not rules.explim_option  # (explim read from 2019-07-11)
        e = _exponent(x, rules)
        normal: Union[slice, np.ndarray]  # (a slice where it can: views, not gathered copies)
        sub = np.zeros(0, dtype=np.intp)
        if limits:
            in_sub = (e < emin) & (e >= emins)
            normal = slice(None)
            if in_sub.any():
                sub = np.flatnonzero(in_sub)
                # Elementwise rules (no draws, no truncation by blocks): every element rounded as a
                # normal one first, the subnormal block's again below; else the blocks apart.
                if spec.draws or (spec.round == 4 and rules.truncation == "block"):
                    normal = np.flatnonzero(~in_sub)
        else:
            count = x.size if n_first is None or not rules.explim0_first_elements_only else min(n_first, x.size)
            normal = slice(0, count)

        def round_block(index, precision):
            scaled = _pow2(x[index], precision - 1 - e[index])
            return _pow2(_roundit(scaled, spec, rules, sources, row), e[index] - (precision - 1))

        if isinstance(normal, slice) and normal == slice(None):
            c = round_block(normal, t)  # (a new array)
        else:
            c = x.copy()
            c[normal] = round_block(normal, t)
        if sub.size:
            c[sub] = round_block(sub, t - np.maximum(emin - e[sub], 0))
        if not limits:
            return c
        xmax, xboundary = np.float64(fmt.xmax), np.float64(fmt.xboundary)
        if rules.tiny == "by mode":  # today's rules (overflow by mode as well)
            min_rep = np.float64(spec.min_rep)
            apply_range_limits(c, x, spec.round, xmax, xboundary, min_rep, spec.keeps_subnormals)
            return c
        if not spec.keeps_subnormals:
            c[sub] = 0  # flush the whole subnormal range
        if rules.overflow == "by mode":
            # today's overflow rule; the underflow rule below is the old one
            apply_range_limits(c, x, spec.round, xmax, xboundary, np.float64(0), True)
        else:
            c[x >= xboundary] = np.inf
            c[x <= -xboundary] = -np.inf
        c[np.abs(x) < np.float64(fmt.xmins)] = 0
        return c


# --- The facade ---


#: NumPy's own descriptors of native float64 and float32 (what ``np.empty`` and ufuncs give).
_FLOAT64, _FLOAT32 = np.dtype(np.float64), np.dtype(np.float32)


def _on_engines_at(work: np.ndarray, settings: ChopSpec, route: str, fused: dict) -> np.ndarray:
    """chop.m on ``route`` ``'today'`` or ``'flush tiny'`` (:func:`route_at`) on today's engines;
    ``fused``: the compiled loops with the old tiny-number rule, by dtype character."""
    spec = settings.spec
    if route == "flush tiny" and not spec.draws:
        if work.size > 1 and compiled.wanted():
            loops = fused.get(work.dtype.char, False)
            if loops is False:  # (what compiled.handles refuses for a spec and a native dtype: None)
                constants = compiled.flush_tiny_constants(spec, work.dtype) if compiled.handles(work, spec) else None
                loops = fused[work.dtype.char] = (None if constants is None
                                                  else compiled.round_deterministic(constants, work.dtype))
            if loops is not None:  # the rule inside the compiled loops: no second pass
                return loops(work)
        if not spec.extended:  # the NumPy engine, every small element among its special ones
            return numpy_fast.chop_array(work, spec, MATLAB_STREAM, finish_special=functools.partial(
                flush_tiny, min_rep=spec.min_rep), small_special=True)
    prepared = settings.prepared  # (its sources: sources_for(settings.randfunc))
    drawing = spec.draws and prepared.sources.uses_matlab_stream  # the call's numbers: a contiguous run
    with matlab_stream.exclusive_stream() if drawing else contextlib.nullcontext():
        out = np.asarray(prepared(work))
    if route == "flush tiny":
        flush_tiny(out, work, spec.min_rep)
    return out


def _check_type(x) -> None:
    if not isinstance(x, (np.ndarray, np.generic, numbers.Real, list, tuple)):
        raise TypeError(f"chop_at rounds NumPy arrays, NumPy scalars, Python real numbers and lists, not "
                        f"{type(x).__name__} (historical chop.m had no GPU or torch path).")


def _x_class(x) -> str:
    _check_type(x)  # (first: NumPy would read a torch tensor that requires grad with an error of its own)
    if np.iscomplexobj(x):
        raise ValueError("Chop requires a real input array.")
    dtype = getattr(x, "dtype", None)
    if isinstance(dtype, np.dtype) and not dtype.isnative:  # byte-swapped: the class of its values
        dtype = dtype.newbyteorder("=")
    return "single" if dtype in (np.float32, np.float16) else "double"


class ChopAt:
    """chop as of a date, with its own persistent options (see :func:`chop_at`)."""

    def __init__(self, date: Union[str, _dt.date]):
        self.rules = rules_at(date)
        self._lock = threading.Lock()
        self._stored: Optional[ChopSpec] = None
        # Before 2019-03-20: the unknown format name that an empty call stored (chop.m returned []
        # before reading it; the next call that rounds fails), else None.
        self._unknown_format: Optional[str] = None
        # Small calls in loops: id(settings) -> (settings, route_at's route, the loops of the
        # route by dtype character (the compiled loops with the old tiny-number rule, or of the
        # old rules; the NumPy engine's old rules by 'numpy ' + character, filled on first use;
        # 'float': Python floats where the old rules are today's), and spec.min_rep), found once
        # (held with the settings, so their id stays their own).
        self._routes: dict = {}

    def __call__(self, x=None, options=None):
        """``chop(x, options)`` with the rules of :attr:`rules`; ``x=None`` only sets the options."""
        kind = type(x)
        # (the hot paths first: chop_at is called in loops)
        double = kind is float or x is None or (kind is np.ndarray and x.dtype is _FLOAT64)
        x_class = "double" if double else _x_class(x)
        with self._lock:
            try:
                settings = self._settings(options, x_class)
            except ValueError:
                if not self._empty_with_unknown_format(x, options):
                    raise
                return None if x is None else self._chop(x, DEFAULT_SPEC, "step by step", {})
            found = self._routes.get(id(settings))
            if found is None or found[0] is not settings:
                if len(self._routes) >= 64:
                    self._routes.clear()
                spec = settings.spec
                found = self._routes[id(settings)] = (settings, route_at(self.rules, spec), {}, spec.min_rep)
                if found[1] == "old rules":  # (Python floats where the old rules are today's: today's kernel)
                    found[2]["float"] = numpy_history.regular_float(spec, spec.limits_exponent, MATLAB_STREAM)
            if (kind is float and (found[1] == "today" or found[1] == "flush tiny")
                    and (settings.scalar_path or not settings.spec.flips)):  # (scalar_path: no flips either)
                if settings.scalar_path:  # the scalar kernel of today's chop (no random numbers)
                    out = numpy_fast.chop_scalar(x, settings.spec, MATLAB_STREAM)
                else:  # stochastic rounding, as chop does (the stream held for the call)
                    with (matlab_stream.exclusive_stream() if settings.prepared.sources.uses_matlab_stream
                          else contextlib.nullcontext()):
                        out = settings.prepared(x)
                if found[1] == "flush tiny" and abs(x) < found[3]:
                    out = 0.0  # the old tiny-number rule (after the draw: the stream moves as chop.m's)
            elif (kind is np.ndarray and found[1] == "today" and not settings.spec.draws
                  and (x.dtype is _FLOAT64 or x.dtype is _FLOAT32)):
                out = settings.prepared(x)  # as chop does
            elif kind is float and found[1] == "old rules":
                regular = found[2]["float"]  # today's scalar kernel where the old rules are today's
                out = None if regular is None else regular(x)
                if out is None:  # the compiled old rules' scalar loop (found by the first call's _chop)
                    loops = found[2].get("d")
                    out = loops(x) if loops and compiled.wanted() else self._chop(x, settings, found[1], found[2])
            elif (kind is np.ndarray and found[1] == "old rules" and (x.dtype is _FLOAT64 or x.dtype is _FLOAT32)
                  and (loops := self._old_rules_loops(x.dtype, x, settings.spec, found[2])) is not None):
                out = loops(x)
            elif x is None or (isinstance(x, (list, tuple)) and len(x) == 0):
                self._stored, self._unknown_format = settings, None
                return None if x is None else np.zeros(0)
            else:
                out = self._chop(x, settings, found[1], found[2])
            if out is None:  # (the compiled loops declined the call: round_old_rules_stochastic)
                out = self._chop(x, settings, "step by step", found[2])
            self._stored, self._unknown_format = settings, None  # stored only when the call succeeded
            return out

    def _settings(self, options, x_class: str) -> ChopSpec:
        """``_resolve_at``; for a dict, remembered by its content and the rules' date, as chop does."""
        if options is None and self._unknown_format is not None:
            raise ValueError(f"chop.m before 2019-03-20 stored the unknown format {self._unknown_format!r} "
                             "(on an empty input) and fails on it now ('emax' undefined).")
        if options is None:  # MATLAB's []: the stored settings
            return DEFAULT_SPEC if self._stored is None else self._stored
        if type(options) is dict:
            return remembered(options, x_class, self.rules.date, _resolve_at, options, self._stored, x_class,
                              self.rules)
        return _resolve_at(options, self._stored, x_class, self.rules)

    def _empty_with_unknown_format(self, x, options) -> bool:
        """Whether chop.m before 2019-03-20 returned [] for the empty ``x`` (``None``: ``chop([],
        options)``) where ``options`` failed: it returned before reading an unknown format, which it
        stored (here :attr:`_unknown_format`, as the last stored one when ``options`` is None)."""
        if self.rules.format_checked or (x is not None and np.size(x) != 0):
            return False
        if options is None:
            return self._unknown_format is not None
        if options_are_empty(options):
            return False
        name = options.get("format") if isinstance(options, Mapping) else getattr(options, "format", None)
        if not isinstance(name, str) or (name in CHOP_FORMAT_NAMES and (name not in _FP8_NAMES or self.rules.fp8)):
            return False
        self._unknown_format = name
        return True

    def _first_elements_only(self, work, spec: RoundingSpec) -> bool:
        """Whether the explim = 0 bug of 2019-07-11 .. 2020-04-30 leaves elements of the matrix
        ``work`` unrounded (chop.m rounded its first ``max(size(x))``, in column-major order)."""
        return (self.rules.explim0_first_elements_only and not spec.limits_exponent
                and np.ndim(work) > 1 and max(work.shape) < work.size)

    def _old_rules_loops(self, dtype: np.dtype, work, spec: RoundingSpec, fused: dict) -> Optional[Callable]:
        """The loops of the rules before 2020-05-14 for ``work`` (an array of ``dtype`` or a float;
        route ``'old rules'``), in ``fused`` by dtype character (the compiled engine's) or by
        ``'numpy '`` + character (the NumPy engine's, modes 1-4:
        :func:`~pychop_compat.kernels.numpy_history.round_old_rules`, mode 4 by blocks through
        :meth:`_numpy_block_truncation`); None for the step-by-step rules (the NumPy engine's
        stochastic rounding, and the explim = 0 bug of 2019-07-11 .. 2020-04-30 on a matrix:
        elements in column-major order)."""
        if not dtype.isnative or self._first_elements_only(work, spec):
            return None
        key = dtype.char if compiled.wanted() else "numpy " + dtype.char
        loops = fused.get(key, False)
        if loops is False:  # (found once per settings, engine and dtype; None: the loops do not apply)
            limits = spec.limits_exponent
            by_mode = self.rules.overflow == "by mode"
            block = self.rules.truncation == "block"
            if key != dtype.char:  # the NumPy engine: the step-by-step rules on its special elements
                loops = (self._numpy_old_rules(spec, dtype, limits) if not (block and spec.round == 4)
                         else self._numpy_block_truncation(spec, dtype, limits))
            elif spec.stochastic:  # (the draws: MATLAB's stream, as randfunc is not read before 2022-06-14)
                loops = compiled.round_old_rules_stochastic(spec, dtype, limits, by_mode)
            else:
                loops = compiled.round_old_rules(spec, dtype, limits, block, by_mode)
            fused[key] = loops
        return loops

    def _numpy_old_rules(self, spec: RoundingSpec, dtype: np.dtype, limits: bool) -> Optional[Callable]:
        """The NumPy engine's route 'old rules' for ``spec`` (elementwise: no truncation by blocks)."""
        step_by_step = functools.partial(chop_vector_at, spec=spec, rules=self.rules, sources=MATLAB_STREAM)
        return numpy_history.round_old_rules(spec, dtype, limits, MATLAB_STREAM, step_by_step)

    def _numpy_block_truncation(self, spec: RoundingSpec, dtype: np.dtype, limits: bool) -> Optional[Callable]:
        """Mode 4 by blocks (before 2020-05-01) on the NumPy engine: a block whose elements are all
        > 0 floors (mode 3), another one takes the ceiling (mode 2), and in these rules those modes
        differ from it only there (the range rules of those dates do not depend on the mode).
        The function returns None (the caller then rounds step by step) where chop's normal and
        subnormal blocks both hold elements and one floors, the other not."""
        floor, ceil = (self._numpy_old_rules(dataclasses.replace(spec, round=m), dtype, limits) for m in (3, 2))
        if floor is None or ceil is None:
            return None
        emin, emins = spec.fmt.emin, spec.fmt.emins
        rules = self.rules

        def block_truncation(x: np.ndarray) -> Optional[np.ndarray]:
            flat = np.ravel(x, order="K")  # (the blocks' signs do not depend on the order)
            positive = (flat > 0) & (flat < np.inf)  # (y >= 0 for every element: 0, Inf, NaN scale to NaN)
            if positive.all():
                return floor(x)
            if not limits:  # one block
                return ceil(x)
            # chop's subnormal block: exponents in [emins, emin), all below 2^emin (log2 never rounds down)
            small = np.flatnonzero(np.abs(flat) < np.float64(2.0 ** emin))
            with np.errstate(divide="ignore", invalid="ignore"):
                e = _exponent(flat[small], rules)
            in_sub = np.zeros(flat.size, bool)
            in_sub[small[(e >= emins) & (e < emin)]] = True
            floors_normal = not np.any(~positive & ~in_sub)
            if not in_sub.any() or floors_normal == bool(np.all(positive[in_sub])):
                return floor(x) if floors_normal else ceil(x)
            return None  # (the blocks differ: step by step)

        return block_truncation

    def _chop(self, x, settings: ChopSpec, route: str, fused: dict):
        spec = settings.spec
        if type(x) is np.ndarray and (x.dtype is _FLOAT64 or x.dtype is _FLOAT32) and route in ("today", "flush tiny"):
            return _on_engines_at(x, settings, route, fused)
        _check_type(x)
        if isinstance(x, np.ndarray) and type(x) is not np.ndarray:  # masked arrays, np.matrix: as chop
            return numpy_engine.on_array_kind(x, lambda plain: self._chop(plain, settings, route, fused))
        # As chop converts its input (Python ints beyond int64 and lists of them included); restore
        # gives the result back as x's kind (a float for a Python number, float16 for float16).
        work, restore = numpy_engine.as_float_array(x)
        loops = self._old_rules_loops(work.dtype, work, spec, fused) if route == "old rules" else None
        out = None if loops is None else loops(work)  # (None also where the loops decline a call)
        if out is None and route in ("step by step", "old rules"):
            # MATLAB's column-major order where it matters (random numbers, the first elements of
            # the explim = 0 bug); else the memory order of work (a view: no copy)
            order: Literal["C", "F"] = "F"
            if (route == "old rules" and not spec.draws and not self._first_elements_only(work, spec)
                    and not work.flags.f_contiguous):
                order = "C"
            flat = np.ravel(work, order=order)  # (read only by chop_vector_at)
            n_first = max(work.shape) if work.ndim else 1
            row = work.ndim == 2 and work.shape[0] == 1 and work.shape[1] >= 2
            out = chop_vector_at(flat, spec, self.rules, sources_for(settings.randfunc), n_first, row)
            out = out.reshape(work.shape, order=order)
        elif out is None:
            out = _on_engines_at(work, settings, route, fused)
        out = out.astype(work.dtype, copy=False)
        return out if restore is None else restore(out)

    def options(self) -> Options:
        """The stored options (``[~, options] = chop`` of that time), or the defaults."""
        stored = resolve(None, self._stored).to_options()
        return stored if self._unknown_format is None else dataclasses.replace(stored, format=self._unknown_format)

    def clear(self) -> None:
        """``clear chop``: forget the stored options."""
        with self._lock:
            self._stored, self._unknown_format = None, None

    def __repr__(self) -> str:
        return f"chop_at({self.rules.date.isoformat()!r})  # chop.m at commit {self.rules.commit}"


def chop_at(date: Union[str, _dt.date]) -> ChopAt:
    """chop as it was on master at the end of ``date``.

    Parameters
    ----------
    date : str or datetime.date
        An ISO date ``'YYYY-MM-DD'`` on or after 2019-03-07 (chop's first release).

    Returns
    -------
    ChopAt
        A callable ``chop(x, options)`` with chop's signature, behaving as
        chop.m did at the end of that day (the commit in ``.rules.commit``),
        with its own persistent options (independent of :func:`~pychop_compat.chop` and of
        other ``chop_at`` functions).  Today's :func:`~pychop_compat.chop` is unchanged.

    Raises
    ------
    ValueError
        For a date before 2019-03-07 or a malformed date.

    Notes
    -----
    Reproduced: every rule of :data:`HISTORY` (modes 1-6, bit flips,
    ``explim``, precision limits, format names) and chop.m's persistence rules.
    Not reproduced: chop.m stored options *before* validating them (``chop_at``
    stores nothing on a failed call), and MATLAB's error messages.  Random
    numbers come from MATLAB's stream in chop.m's order, from
    ``options.randfunc`` only from 2022-06-14.

    Examples
    --------
    >>> from pychop_compat import chop_at
    >>> old = chop_at('2020-06-01')
    >>> old(3e-8, {'format': 'h'})   # below xmins = 2**-24: 0 before 2020-06-16
    0.0
    >>> chop_at('2020-06-16')(3e-8, {'format': 'h'})  # rounds to xmins since
    5.960464477539063e-08
    """
    return ChopAt(date)
