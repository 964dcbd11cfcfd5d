"""The compiled CPU engine (Numba) on specs beyond chop.m that keep chop.m's range rules.

OCP/ML formats (``float8_e4m3fn``, the ``fnuz`` formats, float6, float4), custom formats with
``emin != 1 - emax`` and the saturation and infinity switches run chop.m's algorithm with the
format's own t, emin and emax, then the format's encoding
(:func:`pychop_compat.rules.cpfloat.apply_encoding`).  The compiled engine runs them too;
here it must give the NumPy engine's result bit for bit (NaN payloads aside, the sign of zero
included) and consume the random numbers as the NumPy engine does (MATLAB's stream left in the
same state, a NumPy Generator's numbers in chop.m's order, the counter numbers of
``Chop(rng=<int>)``).  The NumPy engine is itself tested against chop.m's reference algorithm
and ml_dtypes' casts (test_format_edges.py, test_ocp_formats.py); an oracle check on the
compiled engine itself against ml_dtypes' casts is at the end.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from engine_matrix import assert_bits_equal, boundaries, make_input
from pychop_compat import Chop, chop, rand, rng
from pychop_compat.kernels import compiled
from pychop_compat.engines import dispatch
from pychop_compat.formats import CATALOGUE, Format, catalogue_format
from pychop_compat.matlab.options import resolve
from pychop_compat.random.sources import MATLAB_STREAM, counter_sources, generator_sources, sources_for
from pychop_compat.rounding import make_spec

pytestmark = pytest.mark.skipif(not compiled.available(), reason="numba not installed")

#: Every named format but binary128 (beyond the carriers' range).
NAMES = [f.name for f in CATALOGUE if f.emax <= 1023]
#: (saturation, infinity): the four switch settings.
SWITCHES = list(itertools.product([False, True], [False, True]))


def _both(x: np.ndarray, spec, make_sources) -> tuple[np.ndarray, np.ndarray]:
    """``(compiled, NumPy engine)`` results of ``spec`` on ``x``, each with fresh sources (and
    MATLAB's stream, which a user's randfunc leaves to the flips, from the same state)."""
    results = []
    for engine in ("numba", "numpy"):
        rng(1)
        with compiled.cpu_engine(engine):
            results.append(dispatch.round_array(x, spec, make_sources()))
    return results[0], results[1]


def _stream_both(x: np.ndarray, spec, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_both` on MATLAB's stream from ``rng(seed)``; the stream must be left in the same
    state (the next number drawn after each engine is compared)."""
    results, after = [], []
    for engine in ("numba", "numpy"):
        rng(seed)
        with compiled.cpu_engine(engine):
            results.append(dispatch.round_array(x, spec, MATLAB_STREAM))
        after.append(float(rand()))
    assert after[0] == after[1], f"MATLAB's stream left in different states by {spec}"
    return results[0], results[1]


def _check(x, spec, context, seed=11):
    """Compiled == NumPy engine for ``spec`` on ``x``, with every kind of random source that
    the spec's mode uses."""
    if spec.round <= 4 and not spec.flips:
        assert_bits_equal(*_both(x, spec, lambda: MATLAB_STREAM), context)
        return
    assert_bits_equal(*_both(x, spec, lambda: generator_sources(np.random.default_rng(seed))),
                      f"{context} Generator")
    assert_bits_equal(*_both(x, spec, lambda: counter_sources(seed)), f"{context} counter")
    assert_bits_equal(*_stream_both(x, spec, seed), f"{context} MATLAB stream")
    if spec.round >= 5:  # a user's randfunc, called as chop.m calls it (after a counting pass)
        assert_bits_equal(*_both(x, spec, lambda: sources_for(np.random.default_rng(seed + 1).random)),
                          f"{context} randfunc")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", NAMES)
def test_compiled_equals_numpy_engine_on_every_switch(name, dtype):
    """Modes 1-6, subnormals on/off, explim on/off, every saturation/infinity setting, on the
    format's edge values (zeros, +-xmin, +-xmins, halfway points, xmax, xboundary and their
    neighbours, the carrier's extremes, Inf, NaN) and random values of every magnitude."""
    fmt = catalogue_format(name)
    x = make_input(fmt, dtype, seed=3, n=400)
    for mode, subnormal, explim, (saturation, infinity) in itertools.product(
            range(1, 7), (0, 1), (0, 1), SWITCHES):
        spec = make_spec(fmt, mode, rules="chop", subnormal=bool(subnormal), explim=bool(explim),
                         saturation=saturation, infinity=infinity)
        _check(x, spec, f"{name} {np.dtype(dtype)} round={mode} subnormal={subnormal} explim={explim} "
                        f"saturation={saturation} infinity={infinity}")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2fnuz", "float4_e2m1fn", "h", "float8_e8m0fnu"])
def test_compiled_equals_numpy_engine_with_limited_random_bits(name, dtype):
    """Stochastic rounding with 1 to 24 random bits (rules.cpfloat.limited_bit_sources on the
    draws, as the NumPy engine takes them: the counter's numbers then drawn in chop.m's order),
    with and without flips, subnormals on and off; E8M0's rules on every element."""
    fmt = catalogue_format(name)
    x = make_input(fmt, dtype, seed=6, n=400)
    for mode, bits, subnormal, flip in itertools.product((5, 6), (1, 4, 11, 24), (0, 1), (0, 1)):
        if flip and fmt.t < 2:
            continue  # (no fraction bit to flip: an error on both engines)
        spec = make_spec(fmt, mode, rules="chop", subnormal=bool(subnormal), random_bits=bits, flip=flip, p=0.3)
        assert compiled.handles(x, spec)
        _check(x, spec, f"{name} {np.dtype(dtype)} round={mode} random_bits={bits} subnormal={subnormal} flip={flip}")
    with compiled.cpu_engine("numba"):  # the comparison has teeth: one random bit rounds otherwise
        full = dispatch.round_array(x, make_spec(fmt, 5, rules="chop"), counter_sources(3))
        one_bit = dispatch.round_array(x, make_spec(fmt, 5, rules="chop", random_bits=1), counter_sources(3))
    assert not np.array_equal(full, one_bit, equal_nan=True)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2fnuz", "float6_e3m2fn", "float4_e2m1fn"])
def test_compiled_equals_numpy_engine_with_bit_flips(name, dtype):
    """flip = 1 (a fraction bit): in an 'fn' format a flip into the all-ones pattern is NaN."""
    fmt = catalogue_format(name)
    x = make_input(fmt, dtype, seed=4, n=400)
    for mode, (saturation, infinity) in itertools.product((1, 2, 5, 6), SWITCHES):
        spec = make_spec(fmt, mode, rules="chop", saturation=saturation, infinity=infinity, flip=1, p=0.6)
        _check(x, spec, f"{name} {np.dtype(dtype)} round={mode} flips saturation={saturation} infinity={infinity}")


@pytest.mark.parametrize("fmt", [
    Format(5, 9, ("custom",), emin=-4), Format(3, 4, ("custom",), emin=-12, encoding="fn"),
    Format(7, 20, ("custom",), emin=-3, encoding="fnuz"), Format(2, 1, ("custom",), emin=0, subnormals=False),
    Format(11, 127, ("custom",), emin=-140, encoding="finite")], ids=str)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_compiled_equals_numpy_engine_on_custom_formats(fmt, dtype):
    """Formats with emin != 1 - emax (chop's subnormal block and underflow rule at the format's
    own emin), every encoding."""
    x = make_input(fmt, dtype, seed=5, n=400)
    for mode, (saturation, infinity) in itertools.product(range(1, 7), SWITCHES):
        spec = make_spec(fmt, mode, rules="chop", saturation=saturation, infinity=infinity)
        _check(x, spec, f"{fmt} {np.dtype(dtype)} round={mode} saturation={saturation} infinity={infinity}")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_compiled_equals_numpy_engine_on_large_arrays(dtype):
    """Beyond compiled.SERIAL_BELOW: the parallel kernels (deterministic, counter-based, chop.m's
    drawn order), with the edge values spread over many chunks."""
    n = compiled.SERIAL_BELOW + 4099
    gen = np.random.default_rng(8)
    for name, mode, bits in (("float8_e4m3fn", 1, 0), ("float4_e2m1fn", 5, 0), ("float8_e8m0fnu", 1, 0),
                             ("float8_e8m0fnu", 6, 0), ("float8_e5m2", 5, 9)):
        fmt = catalogue_format(name)
        with np.errstate(over="ignore"):  # (E8M0's xmax / 2 times a normal value: Inf in float32)
            x = (gen.standard_normal(n) * gen.choice([fmt.xmins, 1.0, fmt.xmax / 2], n)).astype(dtype)
        edges = boundaries(fmt, dtype)
        x[gen.choice(n, edges.size, replace=False)] = edges
        spec = make_spec(fmt, mode, rules="chop", random_bits=bits)
        _check(x, spec, f"{name} {np.dtype(dtype)} round={mode} random_bits={bits} n={n}")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", ["float4_e2m1fn", "float8_e4m3fn", "float6_e3m2fn", "q43", "h", "b"])
def test_compiled_equals_numpy_engine_on_stochastic_bit_rules_below_xmin(name, dtype):
    """Stochastic rounding of values below xmin by bit rules (chop.m's subnormal block on the
    grid of xmins, smaller values on their own binade's grid, then its underflow rule to +0):
    groups of 256 elements holding only normal carrier values (no zero, Inf, NaN or top binade)
    take that loop, the others the per-element path; both kinds of group here, in every kernel."""
    fmt = catalogue_format(name)
    gen = np.random.default_rng(12)
    n = 8 * 256 + 77
    scale = gen.choice([fmt.xmins / 4, fmt.xmins, fmt.xmin / 2, fmt.xmin, 1.0], n)
    with np.errstate(under="ignore"):
        x = (gen.standard_normal(n) * scale).astype(dtype)
    x[x == 0] = dtype(fmt.xmin)
    edges = boundaries(fmt, dtype)
    x[-edges.size:] = edges  # the last groups: every kind of element
    x[300] = dtype(-0.0)  # one zero in a group otherwise clean
    for mode, subnormal in itertools.product((5, 6), (0, 1)):
        spec = make_spec(fmt, mode, rules="chop", subnormal=bool(subnormal))
        _check(x, spec, f"{name} {np.dtype(dtype)} round={mode} subnormal={subnormal}")


def _stream_cases(fmt, dtype, gen) -> dict:
    """Arrays for the MATLAB-stream kernel (``numba_kernels.round_stream``): its counting pass
    plans every 256 elements (regular only, regular and small only, or the general path), draws
    the numbers of 16 such sub-blocks at a time from two cursors (chop.m's normal block, and its
    subnormal block ``xmins <= |x| < xmin``, whose numbers follow all of the normal block's), or
    rounds a subnormal block of a few elements after the rest (``DEFER_BELOW``).  Sizes span
    several groups of 16 sub-blocks and end in a partial one."""
    n = 3 * 16 * 256 + 77
    sign = gen.choice([-1.0, 1.0], n)
    sub_block = sign * gen.uniform(fmt.xmins, fmt.xmin, n)  # chop.m's subnormal block only
    normal = sign * gen.uniform(fmt.xmin, fmt.xmax / 2, n)  # none in it
    mixed = gen.standard_normal(n) * gen.choice([fmt.xmin, 1.0, fmt.xmax / 4], n)
    specials = mixed.copy()  # zeros (of both signs), Inf, NaN and the top binade here and there
    where = gen.choice(n, 40, replace=False)
    specials[where] = gen.choice([0.0, -0.0, np.inf, -np.inf, np.nan, fmt.xmax, -fmt.xmax * 0.9], 40)
    grid = np.arange(1, n + 1) % 5 * fmt.xmins  # on the grid 2^emins: nothing drawn below xmin
    on_grid_below = np.where(np.abs(grid) < fmt.xmin, grid, fmt.xmins) * sign  # subnormal block draws nothing
    # No zero: sub-blocks of regular and small elements only.
    exact_below = np.where(on_grid_below == 0, fmt.xmins * sign, on_grid_below)
    on_grid_below[::97] = 0.0  # zeros (in the subnormal block of formats with emin = 0)
    normal_exact = np.where(np.arange(n) % 3 == 0, sub_block, fmt.xmin * sign)  # only that block draws
    normal_exact[5::101] = -0.0
    few = normal.copy()  # a few in the subnormal block (drawing or not), a zero of each sign
    few[gen.choice(n, 12, replace=False)] = np.concatenate([sub_block[:8], exact_below[:2], [0.0, -0.0]])
    cases = {"a few in the subnormal block": few, "subnormal block only": sub_block, "no subnormal block": normal, "mixed": mixed,
             "specials": specials, "subnormal block draws nothing": np.where(np.arange(n) % 2 == 0, on_grid_below, normal),
             "normal block draws nothing": normal_exact,
             "nothing drawn": np.where(np.arange(n) % 3 == 0, on_grid_below, fmt.xmin * 2 * sign),
             "some of each block draw": np.choose(np.arange(n) * 7 % 4, [exact_below, sub_block, normal,
                                                                         fmt.xmin * 2 * sign])}
    with np.errstate(over="ignore", under="ignore"):
        return {key: value.astype(dtype) for key, value in cases.items()}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", ["float4_e2m1fn", "float6_e2m3fn", "float8_e4m3fn", "float8_e5m2fnuz", "h"])
def test_matlab_stream_kernel_equals_numpy_engine(name, dtype):
    """Stochastic rounding on MATLAB's stream: the compiled kernel's two cursors give the NumPy
    engine's bits and leave the stream where it leaves it, whichever blocks draw (either, both,
    neither) and whatever sub-blocks the array holds.  (With explim = 1 chop.m's underflow rule
    makes every zero +0 in modes 5 and 6; with explim = 0 the sign of a zero shows whether its
    block drew.)"""
    fmt = catalogue_format(name)
    gen = np.random.default_rng(21)
    for case, x in _stream_cases(fmt, dtype, gen).items():
        for mode, subnormal, explim in itertools.product((5, 6), (0, 1), (0, 1)):
            spec = make_spec(fmt, mode, rules="chop", subnormal=bool(subnormal), explim=bool(explim))
            assert_bits_equal(*_stream_both(x, spec, 7), f"{name} {np.dtype(dtype)} {case} round={mode} "
                                                          f"subnormal={subnormal} explim={explim}")


def test_public_api_gives_the_same_bits_on_both_engines():
    """chop and Chop (MATLAB's stream, rng=<int>) with format names beyond chop.m."""
    for name in ("float8_e4m3fn", "float8_e4m3fnuz", "float6_e2m3fn", "float4_e2m1fn"):
        x = make_input(catalogue_format(name), np.float64, seed=9, n=300)
        for options in ({"format": name}, {"format": name, "round": 3, "subnormal": 0},
                        {"format": name, "round": 6}, {"format": name, "round": 5, "flip": 1, "p": 0.3}):
            got, want = [], []
            for engine, out in (("numba", got), ("numpy", want)):
                with compiled.cpu_engine(engine):
                    rng(4)
                    out.append(chop(x, options))
                    out.append(Chop(options, rng=12)(x))
            for g, w in zip(got, want):
                assert_bits_equal(g, w, f"{options}")


# --- dispatch ------------------------------------------------------------------------------------


def test_dispatch_of_extended_specs():
    """Specs with chop.m's range rules go to the compiled engine (E8M0 and limited random bits
    too); CPFloat's rules (their own compiled kernel), modes outside 1..6, flips of any encoding
    bit and formats beyond the carrier's range do not."""
    x = np.linspace(-500, 500, 64)
    x32 = x.astype(np.float32)
    for name in ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2fnuz", "float6_e2m3fn",
                 "float6_e3m2fn", "float4_e2m1fn"):
        spec = resolve({"format": name, "rules": "chop"}, None, "double").spec
        assert spec.extended and compiled.handles(x, spec), name
        assert compiled.handles(x32, resolve({"format": name, "rules": "chop", "round": 5}, None, "single").spec), name
        # chop's default for these names, one correct rounding: the compiled CPFloat kernel.
        assert dispatch.route(x, resolve({"format": name}, None, "double").spec, MATLAB_STREAM).kernel.name == "numba-cpfloat"
    assert compiled.handles(x, make_spec("h", 1, rules="chop", saturation=True))
    assert compiled.handles(x, make_spec("float8_e4m3fn", 6, rules="chop", flip=1))
    assert compiled.handles(x, make_spec("float8_e4m3fn", 5, rules="chop", random_bits=4))
    assert compiled.handles(x32, make_spec("float8_e8m0fnu", 1, rules="chop"))
    refused = [make_spec("float8_e4m3fn"),  # CPFloat's rules (round_to_format's default)
               make_spec("float8_e4m3fn", 7), make_spec("float8_e4m3fn", -1),
               make_spec("float8_e4m3fn", 1, flip=2)]
    for spec in refused:
        assert spec.extended and not compiled.handles(x, spec), spec
    beyond_single = make_spec(Format(8, 200, ("custom",), emin=-100), 2, rules="chop")
    assert compiled.handles(x, beyond_single) and not compiled.handles(x32, beyond_single)


def test_chop_runs_float8_on_the_compiled_engine(monkeypatch):
    """chop(x, {'format': 'float8_e4m3fn', 'rules': 'chop'}) calls the compiled engine under 'auto' and 'numba'."""
    calls = []
    kernels = compiled.kernels()
    original = kernels.det_small  # the compiled loop of small calls (reached without chop_array)

    def spy(*args):
        calls.append(args[0].size)
        return original(*args)

    monkeypatch.setattr(kernels, "det_small", spy)
    x = np.linspace(-500, 500, 64)
    for engine in ("auto", "numba"):
        with compiled.cpu_engine(engine):
            chop(x, {"format": "float8_e4m3fn", "rules": "chop"})
            dispatch.round_array(x, make_spec("float8_e4m3fn"), MATLAB_STREAM)  # CPFloat's rules
    assert calls == [64, 64]


# --- oracle: ml_dtypes' casts on the compiled engine ---------------------------------------------

OCP = ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e3m4",
       "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn"]


@pytest.mark.parametrize("saturation", [None, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", OCP)
def test_compiled_chop_equals_ml_dtypes_cast_except_chops_underflow_rule(name, dtype, saturation):
    """Round to nearest with chop's rules on the compiled engine is ml_dtypes' cast (one correct
    rounding, ties to even; overflow to Inf or NaN as the format encodes it, saturation to
    +-xmax in float6/float4, and the tie at xboundary to the even xmax in the 'fn' formats),
    except where chop.m's underflow rule differs: an input in (xmins/2, xmins/2 (1 + 2^-t)]
    rounds first to xmins/2 at t bits and then to +0.  With ``saturation`` every overflow
    (and +-Inf) gives +-xmax."""
    pytest.importorskip("ml_dtypes")
    from test_format_edges import saturated
    from test_ocp_formats import ml_cast, sweep

    fmt = catalogue_format(name)
    x = sweep(name, dtype)
    want = np.where(np.isnan(x), np.nan, ml_cast(x, name))
    if saturation:
        want = saturated(want, x, fmt.xmax)
    a = np.abs(x.astype(np.float64))
    half = fmt.xmins / 2
    want = np.where((a > half) & (a <= half * (1 + 2.0 ** -fmt.t)), 0.0, want)
    spec = make_spec(fmt, 1, rules="chop", saturation=saturation)
    assert compiled.handles(x, spec)
    with compiled.cpu_engine("numba"):
        got = dispatch.round_array(x, spec, MATLAB_STREAM).astype(np.float64)
    ok = (got == want) | (np.isnan(got) & np.isnan(want))
    assert ok.all(), list(zip(x[~ok][:5], got[~ok][:5], want[~ok][:5]))
    # The sign of zero: chop's range rules flush to +0; the fnuz formats have no -0 at all.
    flushed = (a < fmt.xmins) & (got == 0)
    assert not np.signbit(got[flushed]).any()
    if fmt.encoding == "fnuz":
        assert not np.signbit(got[got == 0]).any()


def _stream_at_word(seed: int, words: int) -> None:
    """Put MATLAB's stream at mt19937ar's state of ``seed`` after ``words`` 32-bit outputs (an
    odd count leaves a double across two calls' words; NumPy's RandomState is the generator)."""
    from pychop_compat.random.matlab_stream import stream_state

    reference = np.random.RandomState(seed)
    reference.randint(0, 2**32, size=words, dtype=np.uint32)  # one word each
    state = reference.get_state(legacy=False)["state"]
    rng(seed)
    with stream_state() as (key, pos):
        key[:] = state["key"]
        pos[0] = state["pos"]


@pytest.mark.parametrize("words", [1, 311, 622, 623])
@pytest.mark.parametrize("name", ["float4_e2m1fn", "float8_e4m3fn"])
def test_matlab_stream_kernel_from_any_word(name, words):
    """The second cursor of the MATLAB-stream kernel is set ahead from the stream's position,
    odd ones and the last words before a twist included: same bits and same state afterwards as
    the NumPy engine (the stream's own numbers, drawn in chop.m's order)."""
    fmt = catalogue_format(name)
    gen = np.random.default_rng(words)
    x = gen.standard_normal(5 * 16 * 256 + 3) * gen.choice([fmt.xmin, 1.0], 5 * 16 * 256 + 3)
    for mode in (5, 6):
        spec = make_spec(fmt, mode, rules="chop")
        results, after = [], []
        for engine in ("numba", "numpy"):
            _stream_at_word(3, words)
            with compiled.cpu_engine(engine):
                results.append(dispatch.round_array(x, spec, MATLAB_STREAM))
            after.append(rand(1, 3))
        assert np.array_equal(after[0], after[1]), f"{name} round={mode}: the stream left in different states"
        assert_bits_equal(*results, f"{name} round={mode} from word {words}")
