"""Property-based tests: random options, arrays and call sequences (issue 18, bullet 6).

Invariants, for every call:

* the result equals the reference algorithm (``round_array(..., kernel="reference")``)
  run with settings derived *here*, from the rules of docs/options.rst, or a
  ``ValueError``/``TypeError`` is raised exactly when those rules say so;
* the input is never modified (bit for bit);
* a call that raises changes no stored state (persistent options, MATLAB's stream);
* the result does not depend on the thread that computes it.

Each test runs a small, derandomised budget in CI (a few hundred examples in
all, a few seconds).  The long profile runs the same properties with many more
random examples: ``python -m pytest -m fuzz`` (see README).
"""

from __future__ import annotations

import concurrent.futures
import fractions
import math
from decimal import Decimal
from types import MappingProxyType, SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from pychop_compat import Options, chop, chop_options, clear_chop, rand, rng
from pychop_compat.engines.dispatch import round_array
from pychop_compat.formats import custom_format, lookup_format
from pychop_compat.random.matlab_stream import default_randfunc
from pychop_compat.spec import RoundingSpec
from pychop_compat.random.sources import MATLAB_STREAM, RandomSources

# --- the two profiles --------------------------------------------------------------------------------

PROFILES = [
    pytest.param(dict(max_examples=80, derandomize=True, database=None), id="ci"),
    pytest.param(dict(max_examples=3000, derandomize=False), id="long", marks=pytest.mark.fuzz),
]
COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                   HealthCheck.function_scoped_fixture])


def run(profile: dict, scale: float, test) -> None:
    """Run the Hypothesis test ``test`` with ``profile``, its example count scaled by ``scale``."""
    chosen = dict(profile, max_examples=max(10, int(profile["max_examples"] * scale)))
    settings(**chosen, **COMMON)(test)()


_WORKER = concurrent.futures.ThreadPoolExecutor(1)

# --- the rules, written out independently of pychop_compat.matlab.options ---------------------------------

# docs/options.rst, "Formats": name -> (t, emax)
FORMATS = {"q43": (4, 7), "fp8-e4m3": (4, 7), "q52": (3, 15), "fp8-e5m2": (3, 15),
           "b": (8, 127), "bfloat16": (8, 127), "h": (11, 15), "half": (11, 15), "fp16": (11, 15),
           "s": (24, 127), "single": (24, 127), "fp32": (24, 127),
           "d": (53, 1023), "double": (53, 1023), "fp64": (53, 1023)}
CUSTOM = ("c", "custom")
NAMES = ("format", "subnormal", "round", "flip", "p", "explim", "randfunc", "params")
REAL_TYPES = (int, float, fractions.Fraction, np.integer, np.floating)


class OptionError(Exception):
    """What the rules predict: the call must raise ``kind``."""

    def __init__(self, kind):
        self.kind = kind


def _real(v) -> bool:
    return isinstance(v, REAL_TYPES) and not isinstance(v, (bool, np.bool_))


def _empty(v) -> bool:
    if v is None:
        return True
    if type(v) in (str, list, tuple, dict):
        return len(v) == 0
    return isinstance(v, np.ndarray) and v.size == 0


def _integer(v):
    if _real(v) and math.isfinite(float(v)) and float(v) == int(v):
        return int(v)
    raise OptionError(ValueError)


def _switch(v):
    if isinstance(v, (bool, np.bool_)):
        return int(v)
    if _real(v) and float(v) in (0.0, 1.0):
        return int(v)
    raise OptionError(ValueError)


def _pair(params):
    if isinstance(params, (list, tuple)):
        items = list(params)
    elif isinstance(params, np.ndarray) and params.dtype.kind in "iuf":
        items = params.ravel().tolist()
    else:
        raise OptionError(ValueError)
    if len(items) != 2:
        raise OptionError(ValueError)
    return tuple(_integer(v) for v in items)


def _fields(options):
    """The given fields of an options container, by the rules; None for MATLAB's []."""
    if options is None or (type(options) in (list, tuple, str) and len(options) == 0):
        return None
    if isinstance(options, str):  # a format name: shorthand for {'format': name} (docs/options.rst)
        return {"format": options}
    if isinstance(options, (dict, MappingProxyType)):
        fields = dict(options)
    elif isinstance(options, Options):
        fields = {k: getattr(options, k) for k in NAMES}
    elif isinstance(options, SimpleNamespace):
        fields = {k: v for k, v in vars(options).items() if not k.startswith("_")}
    else:
        raise OptionError(TypeError)
    if any(k not in NAMES for k in fields):
        raise OptionError(ValueError)
    return {k: v for k, v in fields.items() if not _empty(v)}


def expected_settings(options, stored, x_class="double", rounding=True):
    """The settings the rules give (a dict), or OptionError.  ``stored`` is such a dict or None."""
    fields = _fields(options)
    if fields is None:
        return stored if stored is not None else expected_settings({}, None, x_class, rounding)
    name = fields.get("format", "h")
    if not isinstance(name, str) or (name not in FORMATS and name not in CUSTOM):
        raise OptionError(ValueError)
    mode = _integer(fields.get("round", 1))
    if not 1 <= mode <= 6:
        raise OptionError(ValueError)
    subnormal = _switch(fields.get("subnormal", 0 if name in ("b", "bfloat16") else 1))
    flip = _switch(fields.get("flip", 0))
    explim = _switch(fields.get("explim", 1))
    p = fields.get("p", 0.5)
    if not _real(p) or not 0 <= float(p) <= 1:
        raise OptionError(ValueError)
    randfunc = fields.get("randfunc", default_randfunc)
    if not callable(randfunc):
        raise OptionError(ValueError)
    if "params" in fields:
        pair = _pair(fields["params"])
    if name in CUSTOM:
        if "params" in fields:
            t, emax = pair
            # docs/options.rst: t <= 25 (double) / 11 (single) with round = 1, else 52 / 23
            limit = {(1, "double"): 25, (1, "single"): 11}.get((mode, x_class), 52 if x_class == "double" else 23)
            if t < 1 or emax < 1 or t > limit:
                raise OptionError(ValueError)
        elif stored is not None:
            t, emax = stored["t"], stored["emax"]
        else:
            raise OptionError(ValueError)
    else:
        t, emax = FORMATS[name]
    if rounding and flip and t < 2:
        raise OptionError(ValueError)
    return dict(format=name, t=t, emax=emax, subnormal=subnormal, round=mode, flip=flip, p=float(p),
                explim=explim, randfunc=randfunc)


def spec_of(s) -> RoundingSpec:
    fmt = custom_format(s["t"], s["emax"]) if s["format"] in CUSTOM else lookup_format(s["format"])
    return RoundingSpec(fmt, s["subnormal"], s["round"], s["flip"], s["p"], s["explim"])


def _sources(s) -> RandomSources:
    """randfunc for stochastic rounding, MATLAB's stream for the rest (docs/options.rst)."""
    if s["randfunc"] is default_randfunc:
        return MATLAB_STREAM
    return RandomSources(lambda n: np.asarray(s["randfunc"](n), np.float64).ravel(),
                         MATLAB_STREAM.flip_uniform, MATLAB_STREAM.flip_randi)


def reference(x: np.ndarray, s) -> np.ndarray:
    """The reference algorithm on ``x`` by the facade's dtype rules (docs/differences.rst)."""
    dtype = x.dtype.newbyteorder("=") if x.dtype.kind == "f" else x.dtype
    if dtype == np.float16:
        return round_array(x.astype(np.float32), spec_of(s), _sources(s), kernel="reference").astype(np.float16)
    work = x.astype(dtype if dtype in (np.float32, np.float64) else np.float64)
    return round_array(work, spec_of(s), _sources(s), kernel="reference")


def stored_now():
    o = chop_options()
    return (o.format, tuple(o.params), o.subnormal, o.round, o.flip, o.p, o.explim)


def as_reported(s):
    return (s["format"], (s["t"], s["emax"]), s["subnormal"], s["round"], s["flip"], s["p"], s["explim"])


def same(got, want) -> bool:
    """Same dtype, shape and values; NaN equals NaN; the sign of zero counts."""
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    both_nan = np.isnan(got) & np.isnan(want)
    return bool(np.all(both_nan | ((got == want) & (np.signbit(got) == np.signbit(want)))))


# --- strategies -----------------------------------------------------------------------------------------

class _Opaque:
    pass


def _randfunc(n):
    return np.full(n, 0.375)


ANY_VALUE = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 60), st.integers(-2**70, 2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.complex_numbers(max_magnitude=10),
    st.text(max_size=3), st.binary(max_size=2), st.just(""), st.just([]), st.just({}),
    st.lists(st.integers(-2, 30), max_size=3), st.tuples(st.integers(0, 30), st.floats(0, 30)),
    st.sampled_from([np.int8(1), np.uint16(0), np.int64(5), np.float16(0.5), np.float32(1.0), np.float64(0.25),
                     np.bool_(True), np.complex64(1), np.array(1.0), np.array([1]), np.array([]),
                     np.array(["5", "3"]), fractions.Fraction(1, 2), fractions.Fraction(3), Decimal("1"),
                     {1, 2}, _Opaque(), len, _randfunc, b"h", "0", "1"]),
)

VALID = {
    "format": st.sampled_from(sorted(FORMATS) + list(CUSTOM)),
    "round": st.one_of(st.integers(1, 6), st.sampled_from([2.0, np.int32(5), np.float64(6.0)])),
    "subnormal": st.sampled_from([0, 1, True, False, np.bool_(True), 1.0, np.int8(0)]),
    "flip": st.sampled_from([0, 0, 0, 1, False, np.bool_(True)]),
    "explim": st.sampled_from([0, 1, 1, True, np.uint8(1)]),
    "p": st.one_of(st.floats(0, 1), st.sampled_from([0, 1, np.float32(0.25)])),
    "randfunc": st.sampled_from([default_randfunc, _randfunc, None]),
    "params": st.one_of(st.tuples(st.integers(1, 30), st.integers(1, 20)).map(list),
                        st.sampled_from([[5, 3], (11, 15), np.array([4, 7]), [2.0, 5.0]])),
}


@st.composite
def option_fields(draw):
    """Valid fields, then (half the time) one field given a value of any type, or an unknown field."""
    names = draw(st.lists(st.sampled_from(NAMES), max_size=5, unique=True))
    fields = {name: draw(VALID[name]) for name in names}
    if draw(st.booleans()):
        fields[draw(st.sampled_from(NAMES + ("precision", "Round", "_private")))] = draw(ANY_VALUE)
    return fields


@st.composite
def options_containers(draw):
    fields = draw(option_fields())
    kind = draw(st.sampled_from(["dict"] * 6 + ["proxy", "namespace", "Options", "none", "bad"]))
    if kind == "dict":
        return fields
    if kind == "proxy":
        return MappingProxyType(fields)
    if kind == "namespace":
        return SimpleNamespace(**fields)
    if kind == "Options":
        return Options(**{k: v for k, v in fields.items() if k in NAMES})
    if kind == "none":
        return draw(st.sampled_from([None, [], ()]))
    return draw(st.sampled_from([{"format"}, "h", 3, 0.5, [("format", "h")], _Opaque(), len, b"x"]))


FLOAT_ELEMENTS = st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True)
SPECIAL = st.sampled_from([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, 2.0**-1022, 6e-8, 1e-5, 65504.0,
                           65520.0, 1 / 3, 2.0**-14, 2.0**-25, 3.4e38, 1e300])


@st.composite
def input_arrays(draw):
    """Arrays of many dtypes, shapes and layouts, including views; some of unsupported dtypes."""
    dtype = draw(st.sampled_from(["<f8", "<f4", "<f2", ">f8", ">f4", "i1", "u2", "i8", "?",
                                  "c16", "U2", "g"]))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5))
    kind = np.dtype(dtype).kind
    if kind == "f" or kind == "c" or dtype == "g":
        elements = st.one_of(FLOAT_ELEMENTS, SPECIAL).map(float)
        base = draw(hnp.arrays(np.float64, shape, elements=elements))
        with np.errstate(over="ignore", invalid="ignore"):
            x = base.astype(dtype)
    elif kind == "U":
        x = draw(hnp.arrays(dtype, shape, elements=st.text("ab1", max_size=2)))
    else:
        x = draw(hnp.arrays(dtype, shape))
    layout = draw(st.sampled_from(["C", "F", "T", "step", "neg"]))
    if layout == "F":
        x = np.asfortranarray(x)
    elif layout == "T":
        x = x.T
    elif layout == "step" and x.ndim:
        x = x[::2]
    elif layout == "neg" and x.ndim:
        x = x[..., ::-1]
    return x


VALID_ROUNDING = st.fixed_dictionaries({
    "format": st.sampled_from(["q43", "q52", "b", "h", "s", "d", "c"]),
    "round": st.integers(1, 6), "subnormal": st.integers(0, 1), "explim": st.integers(0, 1),
    "flip": st.sampled_from([0, 0, 0, 1]), "p": st.sampled_from([0.5, 1.0, 0.1]),
    "params": st.tuples(st.integers(2, 11), st.integers(1, 20)).map(list),
})


def _bytes(x) -> bytes:
    return np.ascontiguousarray(x).tobytes() + repr((x.shape, x.dtype, x.strides)).encode()


# --- the properties -------------------------------------------------------------------------------------

X_OPTIONS = np.array([[1 / 3, -2.5e-6, 70000.0], [np.nan, -0.0, 1e-300]])


@pytest.mark.parametrize("profile", PROFILES)
def test_random_options_validate_or_match_the_reference(profile):
    @given(options=options_containers(), previous=st.sampled_from([None, {"format": "b", "round": 3},
                                                                   {"format": "c", "params": [5, 3]}]),
           x_kind=st.sampled_from(["array", "float", "none", "single"]), seed=st.integers(0, 2**32 - 1))
    def check(options, previous, x_kind, seed):
        clear_chop()
        if previous is not None:
            chop(None, previous)
        stored = expected_settings(previous, None) if previous is not None else None
        x = {"array": X_OPTIONS, "float": 1 / 3, "none": None, "single": np.float32(1 / 3)}[x_kind]
        x_class = "single" if x_kind == "single" else "double"
        # (chop_options() would store the defaults when nothing is stored, as MATLAB's [~, o] = chop)
        before = as_reported(stored if stored is not None else expected_settings(None, None))
        try:
            want = expected_settings(options, stored, x_class, rounding=x is not None)
        except OptionError as predicted:
            rng(seed)
            with pytest.raises(predicted.kind):
                chop(x, options)
            assert stored_now() == before
            after = rand()
            rng(seed)
            assert after == rand()
            return
        rng(seed)
        got = chop(x, options)
        if options is not None and not (type(options) in (list, tuple) and not options) or stored is None:
            assert stored_now() == as_reported(want)
        else:
            assert stored_now() == before
        if x is None:
            assert got is None
            return
        rng(seed)
        expected = reference(np.asarray(x), want)
        if x_kind == "float":
            assert type(got) is float and same(np.float64(got), expected)
        elif x_kind == "single":
            assert type(got) is np.float32 and same(got, expected)
        else:
            assert same(got, expected)

    run(profile, 2.0, check)


@pytest.mark.parametrize("profile", PROFILES)
def test_one_field_of_any_type(profile):
    # Every option name with values of every Python type: accepted exactly when the rules say so.
    @given(name=st.sampled_from(NAMES + ("precision",)), value=st.one_of(ANY_VALUE, *VALID.values()),
           custom=st.booleans())
    def check(name, value, custom):
        clear_chop()
        options = {name: value}
        if custom and name != "format":
            options.update(format="c", params=[6, 5]) if name != "params" else options.update(format="c")
        try:
            want = expected_settings(options, None)
        except OptionError as predicted:
            with pytest.raises(predicted.kind):
                chop(X_OPTIONS, options)
            assert stored_now() == as_reported(expected_settings(None, None))
            return
        rng(1)
        got = chop(X_OPTIONS, options)
        assert stored_now() == as_reported(want)
        rng(1)
        assert same(got, reference(X_OPTIONS, want))

    run(profile, 2.0, check)


@pytest.mark.parametrize("profile", PROFILES)
def test_random_arrays_match_the_reference_and_are_never_modified(profile):
    @given(x=input_arrays(), options=VALID_ROUNDING, seed=st.integers(0, 2**32 - 1))
    def check(x, options, seed):
        clear_chop()
        before = _bytes(x)
        kind = x.dtype.kind
        if kind == "c":
            with pytest.raises(ValueError, match="real input"):
                chop(x, options)
        elif kind == "U" or x.dtype == np.longdouble:
            rng(seed)
            with pytest.raises(TypeError):
                chop(x, options)
            assert stored_now() == as_reported(expected_settings(None, None))
            after = rand()
            rng(seed)
            assert after == rand()
        else:
            want = expected_settings(options, None)
            rng(seed)
            got = chop(x, options)
            rng(seed)
            expected = reference(x, want)
            assert type(got) is np.ndarray and same(got, expected)
        assert _bytes(x) == before

    run(profile, 1.5, check)


@st.composite
def call_sequences(draw):
    steps = []
    for _ in range(draw(st.integers(1, 8))):
        op = draw(st.sampled_from(["set", "chop", "chop_with", "clear", "query", "bad"]))
        if op in ("set", "chop_with"):
            steps.append((op, draw(VALID_ROUNDING.map(lambda o: {k: v for k, v in o.items() if k != "flip"}))))
        elif op == "bad":
            steps.append((op, draw(st.sampled_from([{"round": 1 + 0j}, {"flip": "0"}, {"precision": "b"},
                                                    {"p": np.nan}, {"format": "c", "params": [40, 3]}]))))
        else:
            steps.append((op, None))
    return steps


@pytest.mark.parametrize("profile", PROFILES)
def test_random_call_sequences_follow_the_persistence_rules(profile):
    x = np.array([1 / 3, 2.0**-20, -7e4, 0.1])

    @given(steps=call_sequences(), seed=st.integers(0, 2**32 - 1))
    def check(steps, seed):
        clear_chop()
        model = None  # the stored settings by the rules (None: nothing stored)
        for op, options in steps:
            if op == "clear":
                clear_chop()
                model = None
            elif op == "query":
                if model is None:
                    model = expected_settings(None, None)
                assert stored_now() == as_reported(model)
            elif op == "bad":
                before = stored_now() if model is not None else None
                with pytest.raises(ValueError):
                    chop(x, options)
                if before is not None:
                    assert stored_now() == before
            else:
                given_options = options if op != "chop" else None
                want = expected_settings(given_options, model)
                if op == "set":
                    chop(None, options)
                else:
                    rng(seed)
                    got = chop(x, given_options)
                    rng(seed)
                    assert same(got, reference(x, want))
                model = want

    run(profile, 0.75, check)


@pytest.mark.parametrize("profile", PROFILES)
def test_results_do_not_depend_on_the_thread(profile):
    @given(x=input_arrays().filter(lambda a: a.dtype.kind in "fiub" and a.dtype != np.longdouble),
           options=VALID_ROUNDING, seed=st.integers(0, 2**32 - 1))
    def check(x, options, seed):
        rng(seed)
        here = chop(x, options)
        rng(seed)
        there = _WORKER.submit(chop, x, options).result()
        assert same(here, there)
        clear_chop()
        chop(None, options)  # stored by the main thread, read by a worker that stored nothing
        rng(seed)
        assert same(_WORKER.submit(chop, x).result(), here)

    run(profile, 0.5, check)
