"""The fast NumPy engine (pychop_compat.kernels.numpy_fast) equals the reference bit for bit.

"Equal" here is stricter than MATLAB's isequal: the bit patterns match (so
the sign of zero too), except that any NaN equals any NaN.  Random modes and
bit flips run on two identical random sources and must make the same calls
with the same sizes, in the same order.
"""

from __future__ import annotations

from functools import partial

import itertools

import numpy as np
import pytest

from bits import assert_bits_equal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from pychop_compat import Chop, rng
from pychop_compat.kernels import numpy_fast
from pychop_compat.engines.dispatch import round_array
from pychop_compat.matlab.options import precision_limit, resolve
from pychop_compat.random.sources import MATLAB_STREAM, RandomSources, generator_sources

FORMATS = ["q43", "q52", "b", "h", "s", "d", (5, 3), (1, 3), (2, 3), (10, 30), (16, 100), (20, 300), (25, 40)]
DTYPES = [np.float64, np.float32]
OPTION_GRID = list(itertools.product(range(1, 7), (0, 1), (0, 1), (0, 1)))  # round, subnormal, explim, flip


def _spec(fmt, mode=1, subnormal=1, explim=1, flip=0, dtype=np.float64, p=0.5):
    """The resolved options, or None where chop.m refuses them (custom precision over its limit)."""
    options = {"round": mode, "subnormal": subnormal, "explim": explim, "flip": flip, "p": p}
    if isinstance(fmt, tuple):
        options.update(format="c", params=list(fmt))
    else:
        options["format"] = fmt
    try:
        return resolve(options, None, "single" if np.dtype(dtype) == np.float32 else "double").spec
    except ValueError:
        return None


class Recorded:
    """Random sources from a seeded Generator that log every call: (kind, sizes...)."""

    def __init__(self, seed: int):
        self.seed = seed
        self._gen = None
        self.calls = []
        self.sources = RandomSources(self._stochastic, self._uniform, self._randi)

    @property
    def gen(self) -> np.random.Generator:
        if self._gen is None:  # made on first use: most calls draw nothing
            self._gen = np.random.default_rng(self.seed)
        return self._gen

    def _stochastic(self, n):
        self.calls.append(("stochastic", n))
        return self.gen.random(n)

    def _uniform(self, n):
        self.calls.append(("flip_uniform", n))
        return self.gen.random(n)

    def _randi(self, imax, n):
        self.calls.append(("flip_randi", imax, n))
        return self.gen.integers(1, imax, size=n, endpoint=True)


def assert_identical(fast: np.ndarray, ref: np.ndarray, context) -> None:
    """Same dtype, shape and bits (sign of zero included); NaN equals NaN (bits.py)."""
    assert_bits_equal(fast, ref, str(context))


def compare(x: np.ndarray, spec, context, seed: int = 0) -> None:
    """Fast engine and reference on ``x``: same values, same random calls, same errors; x untouched."""
    before = x.copy()
    fast_src, ref_src = Recorded(seed), Recorded(seed)
    results = []
    for engine, src in ((numpy_fast.chop_array, fast_src), (partial(round_array, kernel="reference"), ref_src)):
        try:
            results.append(engine(x, spec, src.sources))
        except ValueError as err:  # flips need t >= 2: both must refuse, after the same draws
            results.append(str(err))
    assert_bits_equal(x, before, f"{context}: input modified", nan_payloads=True)
    assert fast_src.calls == ref_src.calls, (context, fast_src.calls[:6], ref_src.calls[:6])
    fast, ref = results
    if isinstance(fast, str) or isinstance(ref, str):
        assert fast == ref, (context, fast, ref)
    else:
        assert_identical(fast, ref, context)


# --- adversarial inputs ---------------------------------------------------------------------------


def _fp16_points_and_midpoints() -> np.ndarray:
    """Every half-precision number and every midpoint between neighbours (exact in float32)."""
    h = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float64)
    finite = np.unique(h[np.isfinite(h)])
    return np.concatenate([h, (finite[1:] + finite[:-1]) / 2])


FP16_POINTS = _fp16_points_and_midpoints()


def boundaries(fmt, dtype) -> np.ndarray:
    """The format's xmin, xmins, xmax, xboundary, powers of two near its range ends, halves and
    1.5x of them, the input class's extremes, with their neighbours and negatives."""
    spec = _spec(fmt)
    f = spec.fmt
    F = np.dtype(dtype)
    values = [f.xmin, f.xmins, f.xmax, f.xboundary, f.xmins / 2, f.xmin / 2, 1.5 * f.xmins, 0.75 * f.xmins,
              np.finfo(F).max, np.finfo(F).tiny, np.finfo(F).smallest_subnormal, 0.0, 1.0, 1.5, np.inf]
    for k in list(range(f.emins - 4, f.emin + 3)) + list(range(f.emax - 2, f.emax + 3)):
        if -1080 < k < 1024:
            values += [2.0 ** k, 1.5 * 2.0 ** k, 1.25 * 2.0 ** k]
    with np.errstate(over="ignore"):
        b = np.array(values, np.float64).astype(F)
        up, down = np.nextafter(b, F.type(np.inf)), np.nextafter(b, F.type(0))
        b = np.concatenate([b, up, down, np.nextafter(up, F.type(np.inf))])
    return np.concatenate([b, -b, np.array([np.nan, -np.nan], F)])


def random_bits(dtype, n: int, seed: int) -> np.ndarray:
    """Random bit patterns (NaN payloads, Inf, subnormals...), half of them with a uniform exponent field."""
    g = np.random.default_rng(seed)
    F = np.dtype(dtype)
    u = np.uint64 if F == np.float64 else np.uint32
    width, p = F.itemsize * 8, np.finfo(F).nmant + 1
    raw = g.integers(0, 1 << width, size=n, dtype=u)
    field = g.integers(0, 1 << (width - p + 1), size=n).astype(u) << u(p - 1)
    mixed = (raw & u((1 << (p - 1)) - 1)) | field | (raw & u(1 << (width - 1)))
    return np.concatenate([raw, mixed]).view(F)


def ties(fmt, dtype, n: int, seed: int) -> np.ndarray:
    """Values with t + 2 significant bits around the format's range: ties and near-ties."""
    g = np.random.default_rng(seed)
    f = _spec(fmt).fmt
    lo = max(f.emins - 4, -1070 if dtype == np.float64 else -145)
    hi = min(f.emax + 3, 1020 if dtype == np.float64 else 125)
    k = g.integers(lo, hi, size=n)
    m = g.integers(1 << (f.t + 1), 1 << (f.t + 2), size=n).astype(np.float64)
    with np.errstate(over="ignore", under="ignore"):
        return (np.ldexp(m, k - f.t - 1) * g.choice([-1.0, 1.0], n)).astype(dtype)


def adversarial(fmt, dtype, seed: int = 0, fp16: bool = True) -> np.ndarray:
    parts = [boundaries(fmt, dtype), random_bits(dtype, 1500, seed), ties(fmt, dtype, 1500, seed)]
    if fp16:
        with np.errstate(invalid="ignore"):
            parts.append(FP16_POINTS.astype(dtype))
    return np.concatenate(parts)


# --- the option grid on adversarial arrays ------------------------------------------------------


#: Single-precision input in the default run for these formats (each of chop.m's float32 paths: below,
#: at and beyond single's range and precision); every format's double input, and the rest, under ``slow``.
SINGLE_SAMPLE = ("h", "b", "s", (5, 3), (25, 40))
ADVERSARIAL_CASES = [pytest.param(fmt, dtype, id=f"{fmt}-{'double' if dtype is np.float64 else 'single'}",
                                  marks=() if dtype is np.float64 or fmt in SINGLE_SAMPLE else pytest.mark.slow)
                     for fmt in FORMATS for dtype in DTYPES]


@pytest.mark.parametrize("fmt, dtype", ADVERSARIAL_CASES)
def test_matches_reference_on_adversarial_arrays(fmt, dtype):
    """Every mode x subnormal x explim x flip on boundaries, random bits, ties, all fp16 points."""
    x = adversarial(fmt, dtype, seed=FORMATS.index(fmt))
    x_class = "single" if dtype == np.float32 else "double"
    for mode, subnormal, explim, flip in OPTION_GRID:
        spec = _spec(fmt, mode, subnormal, explim, flip, dtype)
        if spec is None:  # only custom precisions over chop's limit are refused
            assert isinstance(fmt, tuple) and fmt[0] > precision_limit(mode, x_class)
            continue
        compare(x, spec, (fmt, np.dtype(dtype).name, mode, subnormal, explim, flip), seed=mode)


@pytest.mark.parametrize("dtype", DTYPES, ids=["double", "single"])
@pytest.mark.parametrize("fmt", FORMATS, ids=str)
def test_streams_match_reference(fmt, dtype):
    """Stochastic modes drawing block by block from MATLAB's stream or a Generator: same numbers."""
    x = adversarial(fmt, dtype, seed=7, fp16=False)
    for mode, subnormal, explim in itertools.product((5, 6), (0, 1), (0, 1)):
        spec = _spec(fmt, mode, subnormal, explim, 0, dtype)
        if spec is None:
            continue
        context = (fmt, np.dtype(dtype).name, mode, subnormal, explim)
        g1, g2 = np.random.default_rng(3), np.random.default_rng(3)
        fast = numpy_fast.chop_array(x, spec, generator_sources(g1))
        assert_identical(fast, round_array(x, spec, generator_sources(g2), kernel="reference"), context)
        assert g1.bit_generator.state == g2.bit_generator.state, context
        rng(11)
        fast = numpy_fast.chop_array(x, spec, MATLAB_STREAM)
        after_fast = rng().State
        rng(11)
        ref = round_array(x, spec, MATLAB_STREAM, kernel="reference")
        assert_identical(fast, ref, context)
        assert np.array_equal(after_fast, rng().State), context


# --- Hypothesis ------------------------------------------------------------------------------------


@st.composite
def cases(draw):
    dtype = draw(st.sampled_from(DTYPES))
    fmt = draw(st.sampled_from(FORMATS))
    mode, subnormal, explim, flip = draw(st.sampled_from(OPTION_GRID))
    spec = _spec(fmt, mode, subnormal, explim, flip, dtype, p=draw(st.sampled_from([0.5, 0.1, 1.0])))
    width = 64 if dtype == np.float64 else 32
    elements = st.floats(width=width, allow_nan=True, allow_infinity=True, allow_subnormal=True)
    x = draw(hnp.arrays(dtype, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=9), elements=elements))
    layout = draw(st.sampled_from(["C", "F", "strided"]))
    if layout == "F":
        x = np.asfortranarray(x)
    elif layout == "strided" and x.ndim:
        x = np.repeat(x, 2, axis=-1)[..., ::2]
    return x, spec, (fmt, np.dtype(dtype).name, mode, subnormal, explim, flip, layout, x.shape)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.integers(0, 2**32 - 1))
def test_hypothesis_matches_reference(case, seed):
    x, spec, context = case
    if spec is None:
        return
    compare(x, spec, context, seed=seed)


# --- blocks, threads, batches --------------------------------------------------------------------


@pytest.fixture
def tiny_blocks(monkeypatch):
    """Blocks of a few hundred elements, three threads from the first element, small batches."""
    monkeypatch.setattr(numpy_fast, "BLOCK", 257)
    monkeypatch.setattr(numpy_fast, "PARALLEL_BLOCK", 263)
    monkeypatch.setattr(numpy_fast, "_MIN_PARALLEL", 0)
    monkeypatch.setattr(numpy_fast, "_FLUSH", 100)
    monkeypatch.setattr(numpy_fast, "_FLIP_CHUNK", 300)
    threads = numpy_fast.THREADS
    numpy_fast.set_threads(3)
    yield
    numpy_fast.set_threads(threads)


@pytest.mark.parametrize("dtype", DTYPES, ids=["double", "single"])
@pytest.mark.parametrize("fmt", ["q43", "b", "h", (2, 3), (16, 100)], ids=str)
def test_many_blocks_and_threads(tiny_blocks, fmt, dtype):
    x = adversarial(fmt, dtype, seed=5, fp16=False)
    x = np.concatenate([x, np.random.default_rng(0).standard_normal(3000).astype(dtype)])
    for mode, subnormal, explim, flip in OPTION_GRID:
        spec = _spec(fmt, mode, subnormal, explim, flip, dtype)
        if spec is None:
            continue
        context = (fmt, np.dtype(dtype).name, mode, subnormal, explim, flip)
        compare(x, spec, context, seed=mode)
        if mode >= 5 and not flip:
            g1, g2 = np.random.default_rng(1), np.random.default_rng(1)
            fast = numpy_fast.chop_array(x, spec, generator_sources(g1))
            assert_identical(fast, round_array(x, spec, generator_sources(g2), kernel="reference"), context)
            assert g1.bit_generator.state == g2.bit_generator.state, context


def test_thread_count_does_not_change_results(monkeypatch):
    monkeypatch.setattr(numpy_fast, "_MIN_PARALLEL", 0)
    x = np.random.default_rng(2).standard_normal(300_000) * np.exp2(np.random.default_rng(3).integers(-30, 30, 300_000))
    threads = numpy_fast.THREADS
    try:
        for options in (dict(format="h"), dict(format="q43", round=3), dict(format="h", round=5)):
            results = []
            for n in (1, 2, 3):
                numpy_fast.set_threads(n)
                results.append(Chop(rng=np.random.default_rng(0), **options)(x))
            for r in results[1:]:
                assert_identical(r, results[0], options)
    finally:
        numpy_fast.set_threads(threads)


def test_large_stochastic_array_matches_reference():
    """Several full blocks with MATLAB's stream (the default) and a user's randfunc (two passes)."""
    x = np.random.default_rng(4).standard_normal(70_000) * 1e-3
    x[::97] = 0.0
    spec = _spec("q52", 5)
    rng(3)
    fast = numpy_fast.chop_array(x, spec, MATLAB_STREAM)
    rng(3)
    assert_identical(fast, round_array(x, spec, MATLAB_STREAM, kernel="reference"), "q52 SR")
    compare(x, spec, "q52 SR, recorded randfunc")


# --- one element, layouts, edge shapes -----------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=["double", "single"])
def test_scalars(dtype):
    """Size-one arrays take the plain-Python path."""
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], dtype)
    for fmt in FORMATS:
        values = boundaries(fmt, dtype)
        values = np.concatenate([special, values[np.linspace(0, values.size - 1, 40).astype(int)]])
        for mode, subnormal, explim in itertools.product(range(1, 7), (0, 1), (0, 1)):
            spec = _spec(fmt, mode, subnormal, explim, 0, dtype)
            if spec is None:
                continue
            for i, v in enumerate(values):
                shape = (1, 1) if i % 7 == 0 else ()
                compare(np.full(shape, v, dtype), spec, (fmt, mode, subnormal, explim, v, shape), seed=i)


@pytest.mark.parametrize("options", [dict(format="h"), dict(format="b", round=2), dict(format="q43", round=5),
                                     dict(format="h", round=6, flip=1), dict(format="q52", round=1, flip=1, p=0.3)])
def test_layouts(options):
    """C and F order, strided, reversed and 3-D arrays; random numbers go in column-major order."""
    scale = np.exp2(np.random.default_rng(9).integers(-20, 20, (12, 10, 6)))
    base = np.random.default_rng(8).standard_normal((12, 10, 6)) * scale
    base[0, 0, 0], base[1, 2, 3], base[4, 5, 1] = 0.0, np.inf, np.nan
    arrays = [base, np.asfortranarray(base), base[:, ::2, 1:5], base[::-1, :, ::-3], base[3], base[3].T,
              np.asfortranarray(base[3])[::2], base.astype(np.float32), np.asfortranarray(base.astype(np.float32))]
    for k, x in enumerate(arrays):
        spec = _spec(options["format"], options.get("round", 1), flip=options.get("flip", 0),
                     p=options.get("p", 0.5), dtype=x.dtype)
        compare(x, spec, (options, k, x.shape, x.strides), seed=k)
        out = numpy_fast.chop_array(x, spec, Recorded(0).sources)
        assert out.shape == x.shape and out.dtype == x.dtype


@pytest.mark.parametrize("dtype", DTYPES, ids=["double", "single"])
@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 4, 2)])
def test_empty(dtype, shape):
    x = np.zeros(shape, dtype)
    for mode, flip in itertools.product(range(1, 7), (0, 1)):
        src = Recorded(0)
        out = numpy_fast.chop_array(x, _spec("h", mode, flip=flip, dtype=dtype), src.sources)
        assert out.shape == shape and out.dtype == dtype and out is not x


def test_reference_switch_and_byte_order():
    x = np.random.default_rng(0).standard_normal(1000)
    spec = _spec("h", 5)
    a = round_array(x, spec, Recorded(1).sources, kernel="reference")
    from pychop_compat.rules.chop import chop_vector

    assert_identical(a, chop_vector(x.ravel(order="F"), spec, Recorded(1).sources).reshape(x.shape, order="F"),
                     "kernel='reference' is the executable specification")
    assert_identical(round_array(x, spec, Recorded(1).sources), a, "fast")
    swapped = x.astype(">f8")
    assert_identical(numpy_fast.chop_array(swapped, spec, Recorded(1).sources), a, "big-endian input")


def test_chop_scalar_matches_array_path():
    """The array-free scalar entry point gives what a 0-d array gives (single: after rounding)."""
    for fmt, mode, dtype in itertools.product(["h", "b", (5, 3)], range(1, 7), DTYPES):
        spec = _spec(fmt, mode, dtype=dtype)
        for i, v in enumerate(boundaries(fmt, dtype)[::5]):
            a_src, b_src = Recorded(i), Recorded(i)
            c = numpy_fast.chop_scalar(float(v), spec, a_src.sources, single=dtype == np.float32)
            with np.errstate(over="ignore"):
                got = np.array(c, dtype)
            assert_identical(got, numpy_fast.chop_array(np.array(v, dtype), spec, b_src.sources), (fmt, mode, v))
            assert a_src.calls == b_src.calls


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_thread_pool_survives_fork(monkeypatch):
    """A forked child gets its own worker threads (the parent's do not exist there)."""
    import os
    import signal

    monkeypatch.setattr(numpy_fast, "_MIN_PARALLEL", 0)
    x = np.random.default_rng(0).standard_normal(200_000)
    spec = _spec("h")
    expected = numpy_fast.chop_array(x, spec, MATLAB_STREAM)  # starts the pool in the parent
    pid = os.fork()
    if pid == 0:  # child: must not hang on the parent's pool
        signal.alarm(30)
        ok = np.array_equal(numpy_fast.chop_array(x, spec, MATLAB_STREAM), expected)
        os._exit(0 if ok else 3)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
