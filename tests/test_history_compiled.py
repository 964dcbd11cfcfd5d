"""chop_at before 2020-05-14 on the compiled engine (issue 29 item 2): route ``'old rules'``.

The compiled loops of :mod:`pychop_compat.kernels.numba_history` against the step-by-step
rules (``history.chop_vector_at``) bit for bit, and their exponent ``floor(log2(|x|))``
against NumPy's log2 next to every power of two.  The corpus on every engine:
tests/test_history.py.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from history_cases import step_by_step

from pychop_compat import chop_at, rng
from pychop_compat.formats import custom_format, lookup_format
from pychop_compat.kernels import compiled
from pychop_compat.matlab import history

pytestmark = pytest.mark.skipif(not compiled.available(), reason="the compiled engine needs numba")

#: A date inside each period of the old rules, and the last day of each.
DATES = ["2019-03-07", "2019-03-13", "2019-03-14", "2019-07-10", "2019-07-11", "2019-10-14", "2020-04-30",
         "2020-05-01", "2020-05-12", "2020-05-13"]
FORMATS = [{"format": f} for f in ("h", "b", "s", "d", "half", "bfloat16", "single", "double")] + [
    {"format": "c", "params": p} for p in ([1, 7], [2, 3], [5, 7], [11, 100], [20, 127], [25, 1023])]


def _powers_of_two_neighbours(dtype, below: int, above: int, exponents) -> np.ndarray:
    """Every value of ``dtype`` within ``below`` patterns below and ``above`` patterns from each
    power of two ``2^k`` (``k`` in ``exponents``), both signs."""
    unsigned = np.uint32 if dtype == np.float32 else np.uint64
    with np.errstate(over="ignore"):  # (2^(emax + 1): Inf's pattern, past the last finite value)
        powers = np.ldexp(np.ones(len(exponents), dtype), np.asarray(exponents)).view(unsigned).astype(np.int64)
    offsets = np.arange(-below, above)
    patterns = (powers[:, None] + offsets).ravel()
    patterns = patterns[patterns > 0]
    values = patterns.astype(unsigned).view(dtype)
    values = values[np.isfinite(values)]
    return np.concatenate([values, -values])


def _format_edges(fmt, dtype) -> np.ndarray:
    """Values next to the format's xmax, xboundary, xmin, xmins and halves of them."""
    edges = np.array([fmt.xmax, fmt.xboundary, fmt.xmin, fmt.xmins, fmt.xmins / 2, fmt.xmin / 2, 2.0 ** fmt.emin,
                      2.0 ** (fmt.emin - 1), 1.5 * fmt.xmins, 0.75 * fmt.xmins])
    with np.errstate(over="ignore", under="ignore"):
        edges = edges.astype(dtype)
        near = np.concatenate([np.nextafter(edges, dtype(np.inf)), np.nextafter(edges, dtype(-np.inf)),
                               np.nextafter(np.nextafter(edges, dtype(0)), dtype(0)), edges])
    near = near[np.isfinite(near)]
    return np.concatenate([near, -near])


def _inputs(fmt, dtype) -> list:
    r = np.random.default_rng(29)
    info = np.finfo(dtype)
    with np.errstate(over="ignore", under="ignore"):
        exponents = r.integers(info.minexp - info.nmant - 2, info.maxexp + 1, 300)
        wide = (r.standard_normal(300) * 2.0 ** exponents).astype(dtype)
        special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, info.tiny, -info.tiny, info.smallest_subnormal,
                            info.max, -info.max, 1.0, -1.0, 0.5, 3.0], dtype)
    subnormals = (r.integers(1, 1 << 12, 40) * info.smallest_subnormal).astype(dtype)
    below_powers = _powers_of_two_neighbours(dtype, 3, 2, [fmt.emin, fmt.emin - 1, fmt.emins, fmt.emax + 1, 0, -1, 1])
    mixed = np.concatenate([wide, special, subnormals, below_powers, _format_edges(fmt, dtype)])
    positive = np.abs(mixed[np.isfinite(mixed) & (mixed != 0)])
    rows = mixed[: 30 * (mixed.size // 30)].reshape(30, -1)
    return [mixed, positive, positive[:7], np.asfortranarray(rows), rows[::2, ::3], positive[::3],
            mixed[:1], np.asfortranarray(np.abs(rows))]


def _same_bits(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes(order="F") == b.tobytes(order="F")


#: Every second date in the default test run (the history corpus checks every period there on the
#: default engine), the others under ``slow``.
SAMPLED_DATES = [date if i % 2 == 0 else pytest.param(date, marks=pytest.mark.slow) for i, date in enumerate(DATES)]


@pytest.mark.parametrize("date", SAMPLED_DATES)
def test_old_rules_loops_equal_step_by_step(date, monkeypatch):
    used = []
    loops = compiled.history_kernels()
    real = loops.old_serial
    monkeypatch.setattr(loops, "old_serial", lambda *args: used.append(1) or real(*args))
    for base in FORMATS:
        custom = base["format"] == "c"
        fmt = custom_format(*base["params"]) if custom else lookup_format(base["format"])
        for dtype in (np.float64, np.float32):
            if custom and fmt.t > 11 and dtype == np.float32:
                continue
            inputs = _inputs(fmt, dtype)
            for mode in (1, 2, 3, 4):
                for subnormal in (0, 1):
                    for explim in (0, 1):
                        options = dict(base, round=mode, subnormal=subnormal, explim=explim)
                        fast = chop_at(date)
                        for x in inputs:
                            try:
                                a = fast(x, options)
                            except ValueError:  # (a custom precision beyond the date's limit)
                                with pytest.raises(ValueError):
                                    step_by_step(date, x, options, monkeypatch)
                                continue
                            b = step_by_step(date, x, options, monkeypatch)
                            assert _same_bits(a, b), (date, options, x.dtype, x.shape)
    assert used  # the compiled loops ran


def test_old_rules_route_and_what_stays_step_by_step(monkeypatch):
    f = chop_at("2020-05-01")
    x = np.array([1 / 3, -2.5, 3e-8])
    f(x, {"format": "h"})
    (settings, route, fused, _), = f._routes.values()
    assert route == "old rules" and callable(fused["d"])
    g = chop_at("2020-05-01")
    with compiled.cpu_engine("numpy"):
        assert _same_bits(g(x, {"format": "h"}), f(x, {"format": "h"}))
    fused = g._routes[next(iter(g._routes))][2]  # the NumPy engine: its own route, no compiled loops
    assert "d" not in fused and callable(fused["numpy d"])
    # the explim = 0 bug of 2019-07-11 .. 2020-04-30 on a matrix: step by step (column-major order)
    h = chop_at("2019-08-01")
    m = np.full((3, 2), 1 / 3)
    out = h(m, {"format": "h", "explim": 0})
    assert np.array_equal(out[:, 1], [1 / 3] * 3) and np.all(out[:, 0] != 1 / 3)
    # stochastic rounding on old dates: the compiled loops too; flips: step by step
    assert history.route_at(f.rules, history.resolve({"format": "h", "round": 6}, None).spec) == "old rules"
    flipping = history.resolve({"format": "h", "round": 5, "flip": 1}, None).spec
    assert history.route_at(f.rules, flipping) == "step by step"


@pytest.mark.heavy  # (compiling the parallel loops of the old rules: 40 s on a fresh clone)
@pytest.mark.parametrize("date", ["2019-03-07", "2020-05-01", "2020-05-13"])
def test_old_rules_parallel_loops(date, monkeypatch):
    r = np.random.default_rng(5)
    n = compiled.SERIAL_BELOW + 7
    x = r.standard_normal(n) * 2.0 ** r.integers(-30, 17, n)
    x[::1001] = 0.0
    x[5::7919] = np.inf
    fast = chop_at(date)
    for options in ({"format": "h"}, {"format": "h", "round": 4, "subnormal": 0}, {"format": "b", "round": 2}):
        assert _same_bits(fast(x, options), step_by_step(date, x, options, monkeypatch)), options
    positive = np.abs(x) + 1.0  # mode 4 by blocks: every element > 0, the parallel sign pass
    options = {"format": "h", "round": 4}
    assert _same_bits(fast(positive, options), step_by_step(date, positive, options, monkeypatch))
    single = np.asfortranarray(x[: 1024 * 1024].astype(np.float32).reshape(1024, 1024))
    for options in ({"format": "h", "subnormal": 0}, {"format": "b", "round": 3}):
        assert _same_bits(fast(single, options), step_by_step(date, single, options, monkeypatch)), options
        with compiled.cpu_engine("numpy"):  # (its memory order, and NumPy's multiplications for ldexp)
            assert _same_bits(fast(single, options), step_by_step(date, single, options, monkeypatch)), options


def _numpy_floor_log2(values: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.floor(np.log2(np.abs(values))).astype(np.float64)


def _loops_exponents(values: np.ndarray) -> np.ndarray:
    """The loops' exponent (chop.m's ``floor(log2(|x|))``) of every finite non-zero value, from
    their exponent function in a small compiled loop."""
    import numba

    exponent_at = compiled.history_kernels().exponent_at
    thresholds = compiled.log2_thresholds(values.dtype.char)
    lowest = int(np.finfo(values.dtype).minexp) - np.finfo(values.dtype).nmant

    @numba.njit
    def exponents(xs, out, table, k_lowest):
        for i in range(xs.size):
            out[i] = exponent_at(abs(np.float64(xs[i])), table, k_lowest)

    out = np.empty(values.size, np.float64)
    exponents(values, out, thresholds, lowest)
    return out


def test_exponent_equals_numpys_log2_float32_next_to_every_power_of_two():
    # every float32 within 2**12 patterns below (and 2**8 above) each power of two in range, both signs
    values = _powers_of_two_neighbours(np.float32, 1 << 12, 1 << 8, range(-149, 129))
    values = values[values != 0]
    assert np.array_equal(_loops_exponents(values), _numpy_floor_log2(values))


def test_exponent_equals_numpys_log2_float64_next_to_powers_of_two():
    r = np.random.default_rng(64)
    every = _powers_of_two_neighbours(np.float64, 1 << 7, 1 << 5, range(-1074, 1025))
    many = _powers_of_two_neighbours(np.float64, 1 << 12, 1 << 4, r.choice(np.arange(-1074, 1025), 120, replace=False))
    # and values whose log2 rounds to the power of two from further below (bands of 2**14 .. 2**20 patterns)
    tops = np.ldexp(1.0, np.arange(-1000, 1024, 7)).view(np.uint64).astype(np.int64)
    spread = (tops[:, None] - (1 << r.integers(10, 21, (tops.size, 64)))).astype(np.uint64).view(np.float64).ravel()
    for values in (every, many, spread):
        values = values[values != 0]
        assert np.array_equal(_loops_exponents(values), _numpy_floor_log2(values))


def test_log2_thresholds_exist_where_log2_rounds_up():
    for char in "fd":
        table = compiled.log2_thresholds(char)
        assert table is not None and not table.flags.writeable
        assert np.isfinite(table).sum() > table.size // 2  # most exponents have values that round up


@pytest.mark.parametrize("date", ["2019-03-07", "2019-07-11", "2020-05-01", "2020-05-13"])
def test_old_rules_python_numbers_lists_and_other_dtypes(date, monkeypatch):
    # the scalar path, lists, integers and float16 take the same rules as the arrays
    numbers = [1 / 3, -2.5, 3e-8, -3e-8, 0.0, -0.0, np.inf, -np.inf, np.nan, 127.99999999999999, -0.9999999999999999,
               65519.99, 65520.0, 1e-5, 2.0**-14 * 0.9999999999999999, float(_signalling_nans(np.float64)[1])]
    r = np.random.default_rng(16)
    others = [np.float16(r.standard_normal(50)), np.arange(-70000, 70000, 997), [0.1, -2e-8, 7e4], np.float64(1 / 3),
              np.float32(-2.0**-25), np.asfortranarray(r.standard_normal((4, 5))),
              np.concatenate([_signalling_nans(np.float64), r.standard_normal(600)])]  # (NaN quiets)
    for options in ({"format": "h"}, {"format": "b", "round": 2, "subnormal": 1}, {"format": "h", "round": 4},
                    {"format": "h", "round": 3, "explim": 0}, {"format": "c", "params": [3, 5], "round": 4}):
        fast = chop_at(date)
        for x in numbers + others:
            a, b = fast(x, options), step_by_step(date, x, options, monkeypatch)
            assert type(a) is type(b) and _same_bits(a, b), (date, options, x, a, b)


@pytest.mark.parametrize("date", ["2019-03-07", "2019-07-11", "2020-05-01", "2020-05-13"])
def test_old_rules_on_the_numpy_engine_in_memory_order(date, monkeypatch):
    # the NumPy engine computes route 'old rules' in the input's memory order (its own route,
    # step by step for mode 4's truncation by blocks)
    fast = chop_at(date)
    with compiled.cpu_engine("numpy"):
        for base in ({"format": "h"}, {"format": "b"}, {"format": "c", "params": [5, 7]}):
            fmt = custom_format(*base["params"]) if "params" in base else lookup_format(base["format"])
            for dtype in (np.float64, np.float32):
                for x in _inputs(fmt, dtype):
                    for mode, subnormal, explim in ((1, 1, 1), (2, 0, 1), (3, 1, 0), (4, 0, 1), (4, 1, 0)):
                        options = dict(base, round=mode, subnormal=subnormal, explim=explim)
                        a, b = fast(x, options), step_by_step(date, x, options, monkeypatch)
                        assert _same_bits(a, b), (date, options, x.dtype, x.shape)
    assert not any(char in found[2] for found in fast._routes.values() for char in "fd")  # (no compiled loops)


# --- Stochastic rounding (modes 5, 6) on the old dates: bits and MATLAB's stream state ---


def _stream_state() -> np.ndarray:
    return np.asarray(rng().State, np.uint32).copy()


def _at_position(position: int) -> None:
    """MATLAB's stream seeded with 29, then moved to word ``position`` of its key (624: the next
    draw twists first; 623: the next double takes its two words across a twist)."""
    rng(29)
    settings = rng()
    state = np.asarray(settings.State, np.uint32).copy()
    state[624] = position
    rng(dataclasses.replace(settings, State=state))


def _same_draws(date, x, options, monkeypatch, position: int = 5) -> None:
    """chop_at's compiled stochastic rounding against the step-by-step rules: the same bits and
    the same stream state afterwards (both from the same state)."""
    _at_position(position)
    fast = chop_at(date)
    try:
        a = fast(x, options)
    except ValueError:  # (a custom precision beyond the date's limit)
        _at_position(position)
        with pytest.raises(ValueError):
            step_by_step(date, x, options, monkeypatch)
        return
    after_fast = _stream_state()
    _at_position(position)
    b = step_by_step(date, x, options, monkeypatch)
    assert type(a) is type(b) and _same_bits(a, b), (date, options, getattr(x, "dtype", type(x)), np.shape(x))
    assert np.array_equal(after_fast, _stream_state()), (date, options, np.shape(x))


def _signalling_nans(dtype) -> np.ndarray:
    patterns = np.array([0x7FF4000000000001, 0xFFF0000000000123, 0x7FF8000000000456], np.uint64)
    with np.errstate(invalid="ignore"):
        return patterns.view(np.float64).astype(dtype)


@pytest.mark.parametrize("date", ["2019-03-07", "2019-07-11", "2020-05-01", "2020-05-13"])
def test_old_stochastic_loop_equals_step_by_step(date, monkeypatch):
    used = []
    loops = compiled.history_kernels()
    real = loops.old_stochastic
    monkeypatch.setattr(loops, "old_stochastic", lambda *args: used.append(1) or real(*args))
    for base in FORMATS[::2] + FORMATS[-3:]:
        custom = base["format"] == "c"
        fmt = custom_format(*base["params"]) if custom else lookup_format(base["format"])
        for dtype in (np.float64, np.float32):
            if custom and fmt.t > 11 and dtype == np.float32:
                continue
            inputs = _inputs(fmt, dtype) + [np.concatenate([_signalling_nans(dtype), _inputs(fmt, dtype)[0][:40]])]
            for mode in (5, 6):
                for subnormal, explim in ((0, 1), (1, 1), (1, 0)):
                    options = dict(base, round=mode, subnormal=subnormal, explim=explim)
                    for x in inputs:
                        _same_draws(date, x, options, monkeypatch)
    assert used  # the compiled loop ran


@pytest.mark.parametrize("position", [0, 2, 3, 620, 621, 622, 623, 624])
def test_old_stochastic_across_the_twist(position, monkeypatch):
    # the stream's 624-word boundary inside a call, both blocks drawing (the subnormal block's
    # numbers after every one of the normal block's), both classes, 2-D in both orders
    r = np.random.default_rng(position)
    x = r.standard_normal(700) * 2.0 ** r.integers(-26, 3, 700)  # bfloat16's and fp16's subnormal range too
    x[::97] = 0.0
    x[3::101] = np.nan
    for options in ({"format": "h", "round": 5}, {"format": "h", "round": 6, "subnormal": 0},
                    {"format": "c", "params": [5, 7], "round": 5}, {"format": "h", "round": 5, "explim": 0}):
        for date in ("2019-03-07", "2020-05-13"):
            for values in (x, x.astype(np.float32), x[:600].reshape(20, 30), np.asfortranarray(x[:600].reshape(20, 30)),
                           x[:9], x[2:3]):
                _same_draws(date, values, options, monkeypatch, position)


@pytest.mark.parametrize("date", ["2019-03-14", "2020-05-01"])
def test_old_stochastic_numbers_lists_sizes_and_the_numpy_engine(date, monkeypatch):
    numbers = [1 / 3, -2.5, 3e-8, -3e-8, 0.0, -0.0, np.inf, -np.inf, np.nan, 65519.99, 65520.0, 7e4, 1e-5]
    r = np.random.default_rng(56)
    others = [np.float16(r.standard_normal(50)), np.arange(-70000, 70000, 997), [0.1, -2e-8, 7e4], np.float64(1 / 3),
              np.float32(-2.0**-25), np.asfortranarray(r.standard_normal((4, 5))), np.zeros(0),
              _signalling_nans(np.float64), np.array([-np.nan, 0.0, np.inf, -0.0, 1 / 3]),
              r.standard_normal(3 * compiled.SERIAL_BELOW // 2)[::3] * 2.0**-14]  # (a strided view)
    for options in ({"format": "h", "round": 5}, {"format": "b", "round": 6, "subnormal": 1},
                    {"format": "h", "round": 5, "subnormal": 0}):
        for x in numbers + others:
            _same_draws(date, x, options, monkeypatch)
            _at_position(5)
            fast = chop_at(date)
            a = fast(x, options)
            after = _stream_state()
            _at_position(5)
            with compiled.cpu_engine("numpy"):  # (step by step in MATLAB's order: the same draws)
                b = chop_at(date)(x, options)
            assert type(a) is type(b) and _same_bits(a, b), (options, x)
            assert np.array_equal(after, _stream_state()), (options, x)


def test_old_stochastic_declines_calls_with_nan_results(monkeypatch):
    # chop.m's mysign(y) .* y makes a NaN of 0, +-Inf (which scale to NaN) or a NaN; its sign in
    # NumPy is that of either operand, by the element's position in NumPy's SIMD loops: such
    # calls run step by step, the loop declining them before it draws
    returned = []
    loops = compiled.history_kernels()
    real = loops.old_stochastic
    x = np.linspace(-3, 3, 40)
    with pytest.MonkeyPatch.context() as spy:
        spy.setattr(loops, "old_stochastic", lambda *args: returned.append(real(*args)) or returned[-1])
        f = chop_at("2020-05-13")
        f(x, {"format": "h", "round": 5})
        assert returned[-1][0] > 0
        for y, options in ((np.append(x, np.nan), {"format": "h", "round": 5}),
                           (np.append(x, -np.nan), {"format": "h", "round": 6}),
                           (np.append(x, 0.0), {"format": "h", "round": 6, "explim": 0}),
                           (np.append(x, np.inf), {"format": "h", "round": 5}),  # (by mode on 2020-05-13: NaN)
                           (np.nan, {"format": "h", "round": 5})):
            _at_position(7)
            a = f(y, options)
            after = _stream_state()
            assert returned[-1] == (-1, -1)
            _at_position(7)
            b = step_by_step("2020-05-13", y, options, monkeypatch)
            assert type(a) is type(b) and _same_bits(a, b) and np.array_equal(after, _stream_state()), options
        returned.clear()
        f(np.append(x, [0.0, np.inf, -np.inf]), {"format": "h", "round": 6})  # (0, +-Inf: 0, +-Inf)
        assert returned[-1][0] > 0
