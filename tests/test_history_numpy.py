"""chop_at before 2020-05-14 on the NumPy engine (issue 29 item 2): route ``'old rules'``.

:func:`pychop_compat.kernels.numpy_history.round_old_rules` (today's NumPy engine on the
regular elements, the step-by-step rules on its special ones and on significands in the band
below each power of two where NumPy's ``log2`` may round up) and
:func:`~pychop_compat.kernels.numpy_history.regular_float` (Python floats) against the
step-by-step rules, ``history.chop_vector_at`` (itself checked against chop.m under Octave by
the corpus, tests/test_history.py), bit for bit.  Runs with or without Numba.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from history_cases import step_by_step

from pychop_compat import chop_at
from pychop_compat.formats import custom_format, lookup_format
from pychop_compat.kernels import compiled, numpy_fast, numpy_history
from pychop_compat.matlab import history
from pychop_compat.random.sources import MATLAB_STREAM


def _distinct_rule_dates() -> list:
    """The first date of each distinct set of rules before 2020-05-14 (the rounding rules; the
    option-reading ones that do not change a result of these tests included)."""
    seen, dates = set(), []
    for date, _, _ in history.HISTORY:
        if date >= "2020-05-14":
            break
        rules = dataclasses.replace(history.rules_at(date), date=None, commit=None)
        if rules not in seen:
            seen.add(rules)
            dates.append(date)
    return dates


DATES = _distinct_rule_dates()
FORMATS = [{"format": "h"}, {"format": "b"}, {"format": "s"}, {"format": "c", "params": [5, 7]},
           {"format": "c", "params": [10, 20]}]


def _fmt(base):
    return custom_format(*base["params"]) if base["format"] == "c" else lookup_format(base["format"])


def _band_neighbours(dtype, exponents) -> np.ndarray:
    """For each exponent ``k`` in ``exponents``: the threshold of ``log2_thresholds`` (from which
    NumPy's log2 of a number of ``[2^k, 2^(k+1))`` rounds up to ``k + 1``) and its neighbours
    on both sides, the first and last number of the fraction band of ``old_exponent_band``,
    the number below ``2^(k+1)`` and ``2^(k+1)``; both signs."""
    char = np.dtype(dtype).char
    unsigned = np.uint32 if char == "f" else np.uint64
    info = np.finfo(dtype)
    thresholds = compiled.log2_thresholds(char)
    lowest = int(info.minexp) - int(info.nmant)
    band = numpy_history.old_exponent_band(char, 24, 2)
    values = []
    for k in exponents:
        if not lowest <= k <= int(info.maxexp) - 1:
            continue
        threshold = thresholds[k - lowest]
        with np.errstate(over="ignore"):
            top = np.ldexp(dtype(1), k + 1)
        below_top = np.nextafter(top, dtype(0))
        values += [below_top, np.nextafter(below_top, dtype(0)), top]
        if np.isfinite(threshold):
            at = dtype(threshold)
            values += [at, np.nextafter(at, dtype(0)), np.nextafter(at, dtype(np.inf))]
        if k >= int(info.minexp):  # normal: the band's edges in this binade
            base = int(np.ldexp(dtype(1), k).view(unsigned))
            values += [np.array(base + band, unsigned).view(dtype), np.array(base + band - 1, unsigned).view(dtype)]
    values = np.array(values, dtype)
    values = values[np.isfinite(values) & (values != 0)]
    return np.concatenate([values, -values])


def _inputs(fmt, dtype) -> np.ndarray:
    """Every kind of element: the log2 band next to the powers of two of the format's range and
    beyond it, the format's subnormals and edges, the input class's extremes, +-0, +-Inf, NaN
    and random normals over the whole exponent range."""
    info = np.finfo(dtype)
    r = np.random.default_rng(2020)
    exponents = sorted(set(range(fmt.emins - 3, fmt.emax + 3)) | {int(info.minexp) - 1, int(info.minexp),
                                                                  int(info.maxexp) - 1, -1, 0})
    with np.errstate(over="ignore", under="ignore"):
        edges = np.array([fmt.xmax, fmt.xboundary, fmt.xmin, fmt.xmins, fmt.xmins / 2, fmt.xmin / 2,
                          fmt.xmins * 1.5, fmt.xmins * 0.75, fmt.xmin * 0.75]).astype(dtype)
        edges = edges[np.isfinite(edges)]
        edges = np.concatenate([edges, np.nextafter(edges, dtype(np.inf)), np.nextafter(edges, dtype(0))])
        subnormals = (r.integers(1, 1 << max(fmt.t - 1, 1), 30) * fmt.xmins).astype(dtype)
        wide = (r.standard_normal(300) * 2.0 ** r.integers(int(info.minexp) - int(info.nmant) - 2,
                                                            int(info.maxexp) + 1, 300)).astype(dtype)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, info.tiny, info.smallest_subnormal, info.max,
                        1.0, 0.5, 3.0, 1 / 3], dtype)
    x = np.concatenate([_band_neighbours(dtype, exponents), edges, -edges, subnormals, -subnormals, special,
                        -special, wide, r.standard_normal(200).astype(dtype)])
    return x[: 40 * (x.size // 40)]  # (a multiple of 40 elements: matrices below)


def _same_bits(a, b, x=None) -> bool:
    """Equal bits; with the inputs ``x``, NaN for NaN whatever its sign and payload (the sign the
    step-by-step rules give a negative NaN depends on NumPy's loops, by the element's position:
    ``numpy_history.keep_nans``; test_nans_are_kept checks the NumPy route's)."""
    a, b = np.array(a), np.array(b)
    if x is not None and a.shape == b.shape == np.shape(x) and a.dtype == b.dtype and a.dtype.kind == "f":
        nan = np.isnan(np.asarray(x))
        assert np.isnan(a[nan]).all() and np.isnan(b[nan]).all()
        a[nan] = b[nan] = np.nan
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes(order="F") == b.tobytes(order="F")


@pytest.fixture
def numpy_route():
    """The NumPy engine; the special_fraction of each call of its route 'old rules' (a patch of
    its own: step_by_step undoes the test's)."""
    calls = []
    real = numpy_fast.chop_array

    def spy(x, spec, sources, finish_special=None, small_special=False, special_fraction=None):
        if small_special and finish_special is not None:
            calls.append(special_fraction)
        return real(x, spec, sources, finish_special, small_special, special_fraction)

    with pytest.MonkeyPatch.context() as patch, compiled.cpu_engine("numpy"):
        patch.setattr(numpy_fast, "chop_array", spy)
        yield calls


def test_representative_dates():
    assert DATES == ["2019-03-07", "2019-03-14", "2019-03-20", "2019-07-11", "2020-05-01", "2020-05-13"]


@pytest.mark.parametrize("date", DATES)
def test_numpy_route_equals_step_by_step(date, numpy_route, monkeypatch):
    for base in FORMATS:
        fmt = _fmt(base)
        for dtype in (np.float64, np.float32):
            x = _inputs(fmt, dtype)
            matrix = x.reshape(40, -1)
            arrays = [x, np.asfortranarray(matrix), matrix, matrix[::3, ::2], x[:1], x[:0]]
            for mode in (1, 2, 3, 4):
                for subnormal in (0, 1):
                    for explim in (0, 1):
                        options = dict(base, round=mode, subnormal=subnormal, explim=explim)
                        fast = chop_at(date)
                        for a in arrays:
                            got, want = fast(a, options), step_by_step(date, a, options, monkeypatch)
                            assert _same_bits(got, want, a), (date, options, a.dtype, a.shape)
    # the band was looked at in the directed modes (on round to nearest to 'h' it is not needed)
    assert any(band is not None for band in numpy_route) and None in numpy_route, numpy_route


@pytest.mark.parametrize("date", ["2019-03-07", "2019-07-11", "2020-05-01", "2020-05-13"])
def test_python_floats_equal_step_by_step(date, monkeypatch):
    r = np.random.default_rng(7)
    for base in FORMATS[:4]:
        fmt = _fmt(base)
        x = _inputs(fmt, np.float64)
        numbers = [float(v) for v in np.concatenate([x[:: max(1, x.size // 30)], x[-20:]])]
        numbers += [float(v) for v in r.standard_normal(5)]
        for engine in ["numpy"] + (["numba"] if compiled.available() else []):
            with compiled.cpu_engine(engine):
                for mode in (1, 2, 3, 4):
                    for subnormal, explim in ((1, 1), (0, 1), (1, 0)):
                        options = dict(base, round=mode, subnormal=subnormal, explim=explim)
                        fast = chop_at(date)
                        fast(None, options)
                        for v in numbers:
                            got, want = fast(v), step_by_step(date, v, options, monkeypatch)
                            assert type(got) is float and _same_bits(got, want, v), (date, options, v, got, want)


def test_regular_float_is_todays_kernel_only_where_the_rules_agree():
    spec = history.resolve({"format": "h", "round": 2}, None).spec
    regular = numpy_history.regular_float(spec, True, MATLAB_STREAM)
    assert regular(1 / 3) == numpy_fast.chop_scalar(1 / 3, spec, MATLAB_STREAM)
    # above the regular range, infinities, NaN and the log2 band: not here; chop's subnormal
    # block: today's kernel with subnormals kept, else +0; +0 below xmins (zeros included)
    for v in (65504.0 * 2, np.inf, -np.inf, np.nan):
        assert regular(v) is None, v
    assert regular(2.0**-15 * 1.3) == numpy_fast.chop_scalar(2.0**-15 * 1.3, spec, MATLAB_STREAM) != 0
    for v in (2.0**-25, -2.0**-25, 0.0, -0.0, 2.0**-1074):
        assert math.copysign(1, regular(v)) == 1 and regular(v) == 0.0, v
    flushing = history.resolve({"format": "h", "round": 2, "subnormal": 0}, None).spec
    assert numpy_history.regular_float(flushing, True, MATLAB_STREAM)(-2.0**-15 * 1.3) == 0.0
    no_range = history.resolve({"format": "h", "round": 2, "explim": 0}, None).spec
    assert numpy_history.regular_float(no_range, False, MATLAB_STREAM)(0.0) is None  # (without explim: NaN)
    thresholds = compiled.log2_thresholds("d")  # (numbers from which NumPy's log2 rounds up)
    up = float(thresholds[-14 + 1074])  # (exponent -14: fp16's regular range)
    assert np.floor(np.log2(up)) == -13.0 and regular(up) is None and regular(-up) is None
    assert regular(float(np.nextafter(up, 0))) is not None
    assert numpy_history.regular_float(history.resolve({"format": "h", "round": 5}, None).spec, True,
                                       MATLAB_STREAM) is None


def test_old_exponent_band():
    for char, dtype, unsigned in (("d", np.float64, np.uint64), ("f", np.float32, np.uint32)):
        info = np.finfo(dtype)
        everything = 1 << int(info.nmant)
        band = numpy_history.old_exponent_band(char, 11, 2)
        assert 0 < band < everything
        assert numpy_history.old_exponent_band(char, 11, 1) == everything  # fp16 in round to nearest: not needed
        assert numpy_history.old_exponent_band(char, int(info.nmant) + 1, 1) == band  # full precision: needed
        # below the band, NumPy's log2 of every normal number is frexp's exponent
        k = np.arange(int(info.minexp), int(info.maxexp))
        base = np.ldexp(np.ones(k.size, dtype), k).view(unsigned)
        for offset in (band - 1, band - 2, band - 1000, 0, 1):
            v = (base + unsigned(offset)).view(dtype)
            assert np.array_equal(np.floor(np.log2(v)), k.astype(dtype)), offset
        # and some numbers in the band have log2's exponent k + 1
        v = (base + unsigned(everything - 1)).view(dtype)
        assert np.any(np.floor(np.log2(v)) == k + 1)


@pytest.mark.parametrize("date", ["2019-03-07", "2020-05-13"])
def test_the_band_matters_in_the_directed_modes(date, numpy_route, monkeypatch):
    # without the band, the NumPy route would round numbers below powers of two with frexp's
    # exponent, which the old rules do not (so the comparisons above can fail)
    x = _band_neighbours(np.float64, range(-14, 16))
    options = {"format": "h", "round": 3}
    want = step_by_step(date, x, options, monkeypatch)
    assert _same_bits(chop_at(date)(x, options), want)
    monkeypatch.setattr(numpy_history, "old_exponent_band", lambda char, t, mode: 1 << 52)
    assert not _same_bits(chop_at(date)(x, options), want)


@pytest.mark.parametrize("date", ["2019-03-07", "2020-05-01"])
def test_large_arrays_on_threads(date, numpy_route, monkeypatch):
    # more than one block and the NumPy engine's threads (2**18 + 5 elements), band values spread
    r = np.random.default_rng(4)
    n = 2**18 + 5
    x = r.standard_normal(n) * 2.0 ** r.integers(-30, 17, n)
    band = _band_neighbours(np.float64, range(-26, 16))
    x[r.choice(n, band.size, replace=False)] = band
    x[::1001] = 0.0
    for options in ({"format": "h"}, {"format": "h", "round": 2, "subnormal": 0}, {"format": "b", "round": 3}):
        assert _same_bits(chop_at(date)(x, options), step_by_step(date, x, options, monkeypatch), x), options
    assert len(numpy_route) >= 3


def test_what_stays_step_by_step(numpy_route):
    # stochastic rounding and the explim = 0 bug on matrices: step by step on the NumPy engine
    x = np.array([[1 / 3, -2.5], [3e-8, 7.0], [-1.0, 2.0]])
    for date, options in (("2020-05-01", {"format": "h", "round": 5}), ("2019-08-01", {"format": "h", "explim": 0})):
        f = chop_at(date)
        f(x, options)
        assert numpy_route == []
        assert all(v is None for k, v in next(iter(f._routes.values()))[2].items() if k != "float")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_mode_4_by_blocks(dtype, numpy_route, monkeypatch):
    # before 2020-05-01 mode 4 floors a block whose elements are all > 0, else takes the ceiling;
    # chop's subnormal block apart from the normal one
    r = np.random.default_rng(12)
    normal = r.standard_normal(3000).astype(dtype)
    tiny = r.uniform(2.0**-24, 2.0**-14, 10).astype(dtype)  # ('h': chop's subnormal block)
    cases = {  # name: input, whether the NumPy route rounds it (else: step by step)
        "mixed": (normal, True), "positive": (np.abs(normal) + dtype(1e-3), True), "negative": (-np.abs(normal), True),
        "mixed, mixed subnormal block": (np.concatenate([normal, tiny, -tiny]), True),  # (both: ceil)
        "mixed, positive subnormal block": (np.concatenate([normal, tiny]), False),  # (ceil, floor)
        "positive, negative subnormal block": (np.concatenate([np.abs(normal), -tiny]), False),  # (floor, ceil)
        "positive with 0": (np.concatenate([np.abs(normal), [0]]).astype(dtype), True),
        "positive with Inf": (np.concatenate([np.abs(normal), [np.inf]]).astype(dtype), True),
        "positive with NaN": (np.concatenate([np.abs(normal), [np.nan]]).astype(dtype), True),
        "matrix": (np.asfortranarray(np.concatenate([normal, -tiny]).reshape(10, -1)), True),
    }
    for date in ("2019-03-07", "2019-07-11"):
        for name, (x, fast) in cases.items():
            for options in ({"format": "h", "round": 4}, {"format": "h", "round": 4, "subnormal": 0},
                            {"format": "b", "round": 4, "explim": 0}):
                numpy_route.clear()
                got = chop_at(date)(x, options)
                assert _same_bits(got, step_by_step(date, x, options, monkeypatch), x), (date, name, options)
                one_block = options.get("explim") == 0
                first_elements = one_block and date == "2019-07-11" and x.ndim > 1  # (the explim = 0 bug)
                assert bool(numpy_route) == ((fast or one_block) and not first_elements), (date, name, options)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_nans_are_kept(dtype, numpy_route):
    # a NaN's result is that NaN, quieted, at any position (as the compiled loops give it)
    unsigned = np.uint32 if dtype == np.float32 else np.uint64
    quiet_bit = unsigned(1 << (np.finfo(dtype).nmant - 1))
    nans = np.array([np.nan, -np.nan], dtype)
    nans = np.concatenate([nans, (nans.view(unsigned) ^ quiet_bit | unsigned(5)).view(dtype)])  # (signalling)
    r = np.random.default_rng(1)
    x = np.tile(np.concatenate([nans, np.array([0.0, -0.0, np.inf, 1e-30], dtype)]), 9)
    assert x.dtype == dtype and (np.isnan(x) & (x.view(unsigned) & quiet_bit == 0)).sum() == 18  # (signalling)
    x = np.concatenate([x, r.standard_normal(50).astype(dtype)])[r.permutation(x.size + 50)]
    for options in ({"format": "h"}, {"format": "b", "round": 2, "explim": 0}):
        out = chop_at("2020-05-01")(x, options)
        nan = np.isnan(x)
        assert np.array_equal(out[nan].view(unsigned), x[nan].view(unsigned) | quiet_bit)
    assert numpy_route


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_chop_array_special_fraction(dtype):
    # numpy_fast.chop_array(special_fraction=f): finish_special sees the elements whose fraction
    # field is at least f as well as those outside the regular range, and only those
    unsigned = np.uint32 if dtype == np.float32 else np.uint64
    r = np.random.default_rng(3)
    x = (r.standard_normal(50000) * 4).astype(dtype)
    x[::7] = np.nextafter(np.ldexp(dtype(1), r.integers(-10, 10, x[::7].size)).astype(dtype), dtype(0))
    x[::1013] = 0.0
    band = numpy_history.old_exponent_band(np.dtype(dtype).char, 11, 2)
    spec = history.resolve({"format": "h", "round": 2}, None).spec
    seen = []
    out = numpy_fast.chop_array(x, spec, MATLAB_STREAM, finish_special=lambda c, xs: seen.append(xs.copy()),
                                small_special=True, special_fraction=band)
    fraction = x.view(unsigned) & unsigned((1 << np.finfo(dtype).nmant) - 1)
    outside = ~((np.abs(x) >= 2.0**-14) & (np.abs(x) < 2.0**15))
    want = np.sort(x[(fraction >= band) | outside].view(unsigned))
    assert np.array_equal(np.sort(np.concatenate(seen).view(unsigned)), want)
    assert 0 < want.size < x.size // 5
    assert np.array_equal(out, numpy_fast.chop_array(x, spec, MATLAB_STREAM))  # (finish_special changed nothing)
    with pytest.raises(ValueError, match="special_fraction"):
        numpy_fast.chop_array(x, history.resolve({"format": "h", "round": 5}, None).spec, MATLAB_STREAM,
                              special_fraction=band)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_single_elements(dtype, numpy_route, monkeypatch):
    # NumPy scalars, 0-d and one-element arrays: today's rounding where the rules agree (no
    # finish_special), the old rules on the others
    x = _inputs(lookup_format("h"), dtype)
    values = np.concatenate([x[:: max(1, x.size // 40)], x[-20:]])
    for date in ("2019-03-07", "2020-05-01"):
        for options in ({"format": "h"}, {"format": "h", "round": 3, "subnormal": 0}, {"format": "b", "round": 4}):
            fast = chop_at(date)
            for v in values:
                for a in (v, np.array(v), np.array([v]), np.array([[v]])):
                    got, want = fast(a, options), step_by_step(date, a, options, monkeypatch)
                    assert type(got) is type(want) and _same_bits(got, want, a), (date, options, a)
    regular = [band for band in numpy_route]
    numpy_route.clear()
    chop_at("2020-05-01")(np.array([dtype(1 / 3)]), {"format": "h", "round": 2})
    assert numpy_route == []  # (regular: today's rounding, no special elements)
    chop_at("2020-05-01")(np.array([dtype(0)]), {"format": "h", "round": 2})
    assert len(numpy_route) == 1 and regular
