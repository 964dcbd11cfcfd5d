"""The compiled kernel for CPFloat's rules (pychop_compat.kernels.numba_cpfloat).

Oracles: the reference :func:`pychop_compat.rules.cpfloat.round_cpfloat`
(which reproduces the CPFloat corpus, tests/test_cpfloat_corpus.py, where the
facade runs on both CPU engines: ``engine`` = numpy and numba), bit for bit
(NaN patterns included), over every deterministic mode and switch, for the
kernel and for the NumPy engine (numpy_cpfloat, still used under
``cpu_engine('numpy')``); and ml_dtypes' casts (round to nearest even) on the
OCP formats.
"""

from __future__ import annotations

import numpy as np
import pytest

from pychop_compat.kernels import numpy_cpfloat
from pychop_compat.engines import dispatch
from pychop_compat.kernels.compiled import cpu_engine
from pychop_compat.formats import lookup_format
from pychop_compat.random.sources import MATLAB_STREAM
from pychop_compat.rounding import make_spec, round_to_format
from pychop_compat.rules.cpfloat import round_cpfloat

from cpfloat_cases import (DRAWN_FORMATS_AND_CARRIERS, FORMATS, FORMATS_AND_CARRIERS, SWITCHES,
                           differences_from_reference, edge_values, same_bits, spec_of)

numba_cpfloat = pytest.importorskip("pychop_compat.kernels.numba_cpfloat")  # needs numba


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", list(FORMATS))
def test_kernel_is_the_reference_bit_for_bit(name, dtype):
    """Both CPU engines (the compiled kernel and the NumPy engine) equal the reference."""
    fmt = FORMATS[name]
    engines = {"numba_cpfloat": numba_cpfloat.round_array, "numpy_cpfloat": numpy_cpfloat.round_array}
    failures = differences_from_reference(edge_values(fmt, dtype), fmt, engines)
    assert not failures, f"{len(failures)} settings differ, e.g. {failures[:3]}"


def test_the_comparison_can_fail():
    """The kernel's result differs from the reference of another mode (the test above has teeth)."""
    fmt = FORMATS["float8_e4m3fn"]
    x = edge_values(fmt, np.float64)
    got = numba_cpfloat.round_array(x, spec_of(fmt, 1, 1, 1, 0, 1))
    for other in (-1, 0, 7):
        want = round_cpfloat(x, fmt, other, True, True, False, True, MATLAB_STREAM)
        assert not same_bits(got, want).all()


@pytest.mark.parametrize("name, mode, switches, dtype", [
    ("float8_e4m3fn", 7, (1, 1, 0, 0), np.float64),
    ("float4_e2m1fn", 2, (0, 1, 0, 1), np.float64),
    ("bf16", -1, (1, 1, 1, 1), np.float32),
    ("[3, -4, 5]", 3, (0, 1, 0, 0), np.float32),
])
def test_parallel_path_is_the_reference(name, mode, switches, dtype):
    """Above the serial threshold the chunks are shared over threads; the same bits, whatever
    the number of threads."""
    import numba

    fmt = FORMATS[name]
    n = numba_cpfloat.SERIAL_BELOW + 12345
    rng = np.random.default_rng(7)
    with np.errstate(all="ignore"):
        x = (rng.standard_normal(n) * np.exp2(rng.integers(fmt.emin - fmt.t - 3, fmt.emax + 3, n))).astype(dtype)
    x[::1000] = np.inf
    x[1::1000] = np.nan
    x[2::1000] = -0.0
    want = round_cpfloat(x, fmt, mode, *map(bool, switches), MATLAB_STREAM)
    spec = spec_of(fmt, mode, *switches)
    got = numba_cpfloat.round_array(x, spec)
    assert same_bits(got, want).all()
    assert same_bits(numpy_cpfloat.round_array(x, spec), want).all()  # the NumPy engine's threads
    threads = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        assert same_bits(numba_cpfloat.round_array(x, spec), want).all()
    finally:
        numba.set_num_threads(threads)


OCP = ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float6_e2m3fn",
       "float6_e3m2fn", "float4_e2m1fn")


@pytest.mark.parametrize("name", OCP)
def test_round_to_nearest_even_is_ml_dtypes_cast(name):
    """With the format's own overflow rule (NaN for 'fn'/'fnuz', Inf for IEEE, saturation
    without NaN) CPFloat's round to nearest even is ml_dtypes' cast, for float32 inputs (ml_dtypes
    casts float64 through float32) other than NaN (ml_dtypes maps it to -0 without NaN)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    fmt = lookup_format(name)
    x = edge_values(fmt, np.float32)
    x = x[~np.isnan(x)]
    spec = make_spec(fmt, 1)
    assert spec.saturation == (fmt.overflow == "saturate") and spec.infinity == fmt.has_inf
    want = x.astype(getattr(ml_dtypes, name)).astype(np.float32)
    got = numba_cpfloat.round_array(x, spec)
    ok = same_bits(got, want) | (np.isnan(got) & np.isnan(want))
    if fmt.encoding == "fnuz":  # ml_dtypes keeps no -0 either; compare zeros by value
        ok |= (got == 0) & (want == 0)
    assert ok.all(), (x[~ok][:5], got[~ok][:5], want[~ok][:5])


def test_shapes_orders_and_no_rounding():
    fmt = FORMATS["float8_e4m3fn"]
    spec = spec_of(fmt, 7, 1, 1, 0, 1)
    base = np.random.default_rng(3).standard_normal((40, 30)) * 100
    want = round_cpfloat(base.ravel(), fmt, 7, True, True, False, True, MATLAB_STREAM).reshape(base.shape)
    for x in (base, np.asfortranarray(base), base[::2, ::3], base.T):
        got = numba_cpfloat.round_array(x, spec)
        assert got.shape == x.shape and got.dtype == x.dtype
        expected = round_cpfloat(np.ascontiguousarray(x).ravel(), fmt, 7, True, True, False, True,
                                 MATLAB_STREAM).reshape(x.shape)
        assert same_bits(got, expected).all()
    assert same_bits(numba_cpfloat.round_array(base, spec), want).all()
    for empty in (np.zeros(0), np.zeros((0, 3), np.float32)):
        assert numba_cpfloat.round_array(empty, spec).shape == empty.shape
    x = np.array([1.1, np.nan, -np.inf, 1e300])
    out = numba_cpfloat.round_array(x, spec_of(fmt, 8, 1, 1, 1, 0))  # no rounding
    assert same_bits(out, x).all() and out is not x
    x = np.ones(3)
    assert numba_cpfloat.handles(x, spec) and numba_cpfloat.handles(x.astype(np.float32), spec)
    assert not numba_cpfloat.handles(x.astype(">f8"), spec)  # byte-swapped: the NumPy engine
    assert not numba_cpfloat.handles(x.astype(np.float16), spec)
    assert numba_cpfloat.handles(x, make_spec(fmt, 5))  # stochastic: round_stochastic, with numbers
    with pytest.raises(ValueError, match="round_stochastic"):
        numba_cpfloat.round_array(x, make_spec(fmt, 5))
    with pytest.raises(ValueError, match="modes 5 and 6"):
        numba_cpfloat.round_stochastic(x, spec, np.zeros(3))
    assert numba_cpfloat.handles(x, make_spec(fmt, 1, flip=1))  # CPFloat's rules: round_drawn
    assert not numba_cpfloat.handles(x, make_spec(fmt, 1, flip=1, rules="chop"))


def test_dispatch_follows_the_cpu_engine_setting(monkeypatch):
    """cpu_engine('numba') sends CPFloat's deterministic modes to the compiled kernel,
    cpu_engine('numpy') to the NumPy bit-pattern engine; both give the reference's bits."""
    calls = []

    def spy(module, name):
        original = getattr(module, name)

        def wrapped(*args):
            calls.append(module.__name__.rsplit(".", 1)[-1])
            return original(*args)

        monkeypatch.setattr(module, name, wrapped)

    spy(numba_cpfloat, "round_array")
    spy(numba_cpfloat, "round_small")  # (the compiled loop of arrays below SERIAL_BELOW)
    spy(numpy_cpfloat, "round_array")
    x = np.linspace(-500, 500, 1001)
    want = round_cpfloat(x, lookup_format("float8_e4m3fn"), 0, True, True, False, False, MATLAB_STREAM)
    results = {}
    for engine in ("numba", "numpy"):
        calls.clear()
        with cpu_engine(engine):
            results[engine] = round_to_format(x, "float8_e4m3fn", 0)
        assert calls == [{"numba": "numba_cpfloat", "numpy": "numpy_cpfloat"}[engine]]
        assert same_bits(results[engine], want).all()
    calls.clear()
    with cpu_engine("numba"):  # stochastic modes: round_drawn (their numbers drawn first), not round_array
        round_to_format(x, "float8_e4m3fn", 5)
        dispatch.round_array(x, make_spec("fp16", 7), MATLAB_STREAM, kernel="reference")
    assert calls == []


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", list(FORMATS))
def test_stochastic_kernel_is_the_reference_bit_for_bit(name, dtype):
    """Modes 5 and 6 with a number per element (multiples of 1/16, so that many equal the
    dropped fraction: the tie ``u == fraction`` rounds up), every switch: the reference's bits."""
    fmt = FORMATS[name]
    x = edge_values(fmt, dtype)
    u = np.random.default_rng(2).integers(0, 16, x.size) / 16
    failures = []
    for mode in (5, 6):
        for switches in SWITCHES:
            want = round_cpfloat(x, fmt, mode, *map(bool, switches), MATLAB_STREAM, u)
            got = numba_cpfloat.round_stochastic(x, spec_of(fmt, mode, *switches), u)
            assert got.dtype == x.dtype and got.shape == x.shape
            if not same_bits(got, want).all():
                failures.append((mode, switches))
    assert not failures, f"{len(failures)} settings differ, e.g. {failures[:3]}"
    if fmt.t > np.finfo(dtype).nmant:
        return  # as wide as the storage: every element is exact, whatever the numbers
    # the comparison can fail: other numbers give other bits
    spec = spec_of(fmt, 5, 1, 1, 0, 1)
    assert not same_bits(numba_cpfloat.round_stochastic(x, spec, 1 - u),
                         numba_cpfloat.round_stochastic(x, spec, u)).all()


# --- CPFloat's rules with random numbers: stochastic rounding, limited random bits, bit flips -------

def _sources(kind: str, seed: int):
    """Fresh sources of one kind: MATLAB's stream (from ``rng(seed)``), a NumPy Generator, the
    counter of ``rng=<int>``, or a user's randfunc (MATLAB's stream for the flips)."""
    from pychop_compat import rng
    from pychop_compat.random.sources import counter_sources, generator_sources, sources_for

    rng(seed)
    if kind == "stream":
        return MATLAB_STREAM
    if kind == "generator":
        return generator_sources(np.random.default_rng(seed))
    if kind == "counter":
        return counter_sources(seed)
    return sources_for(np.random.default_rng(seed + 1).random)


def _drawn_differences(x: np.ndarray, specs, kinds=("stream", "generator", "counter", "randfunc")) -> list:
    """The settings where the compiled kernel (the router's choice under cpu_engine('numba'))
    differs from the specification (kernel='reference') with the same fresh sources, in bits or
    in the state it leaves MATLAB's stream in."""
    from pychop_compat import rand

    failures = []
    for spec in specs:
        for kind in kinds:
            results, after = [], []
            for kernel in (None, "reference"):
                with cpu_engine("numba"):
                    results.append(dispatch.round_array(x, spec, _sources(kind, 7), kernel=kernel))
                after.append(float(rand()))
            if not (same_bits(*results).all() and after[0] == after[1]):
                failures.append((spec, kind))
    return failures


@pytest.mark.parametrize("name, dtype", DRAWN_FORMATS_AND_CARRIERS)
def test_drawn_modes_are_the_reference_bit_for_bit(name, dtype):
    """Modes 5 and 6 with the numbers drawn as CPFloat's rules draw them (one per inexact finite
    element, column-major), every switch, full and limited random bits, then bit flips of the
    fraction and of the whole encoding: the specification's bits, with every kind of source."""
    fmt = FORMATS[name]
    x = edge_values(fmt, dtype)  # (E8M0 of float32: rounded in float64 by both)
    specs = [make_spec(fmt, mode, subnormal=bool(sub), explim=bool(explim), saturation=bool(sat),
                       infinity=bool(inf), random_bits=bits)
             for mode in (5, 6) for (sub, explim, sat, inf) in SWITCHES for bits in (0, 3)]
    flips = (1, 2) if fmt.t > 1 else (2,)  # (t = 1: no fraction bit to flip)
    specs += [make_spec(fmt, mode, flip=flip, p=0.4, random_bits=bits, saturation=sat)
              for mode in (1, 5, 7, 8) for flip in flips for bits in (0, 5) for sat in (False, True)]
    assert dispatch.route(x, specs[0], MATLAB_STREAM).kernel.name in ("numba-cpfloat", "host")
    failures = _drawn_differences(x, specs, ("stream", "counter") if x.size > 20000 else
                                  ("stream", "generator", "counter", "randfunc"))
    assert not failures, f"{len(failures)} settings differ, e.g. {failures[:3]}"


def test_drawn_modes_take_numba_cpfloat_and_can_fail(monkeypatch):
    """The router sends CPFloat's random modes and flips to :func:`numba_cpfloat.round_drawn`
    (planned small calls too); other numbers give other bits (the comparison has teeth)."""
    calls = []
    original = numba_cpfloat.round_drawn
    monkeypatch.setattr(numba_cpfloat, "round_drawn", lambda *a: calls.append(1) or original(*a))
    x = edge_values(FORMATS["fp16"], np.float64)[:3000]
    spec = make_spec("fp16", 5)
    with cpu_engine("numba"):
        assert dispatch.route(x, spec, MATLAB_STREAM).kernel.name == "numba-cpfloat"
        first = dispatch.round_array(x, spec, _sources("generator", 1))
        second = dispatch.round_array(x, spec, _sources("generator", 2))
        small = dispatch.round_array(x[:50], spec, MATLAB_STREAM)
        small_again = dispatch.round_array(x[:50], spec, MATLAB_STREAM)
    assert len(calls) == 4 and not same_bits(first, second).all()
    assert not same_bits(small, small_again).all()  # (the stream moved on)
    with cpu_engine("numpy"):
        assert dispatch.route(x, spec, MATLAB_STREAM).kernel.name == "reference"


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_drawn_modes_parallel_path_and_layouts(dtype):
    """Above the serial threshold (chunks over threads, each from its first number) and on
    C-, F-ordered and strided arrays: the specification's bits."""
    gen = np.random.default_rng(4)
    n = numba_cpfloat.SERIAL_BELOW + 3 * numba_cpfloat.CHUNK + 17
    fmt = FORMATS["float8_e4m3fn"]
    x = (gen.standard_normal(n) * gen.choice([fmt.xmins, 1.0, fmt.xmax], n)).astype(dtype)
    x[gen.choice(n, 2000, replace=False)] = gen.choice([0.0, 1.0, 2.0, np.inf, np.nan, fmt.xmax], 2000)
    specs = [make_spec(fmt, 5), make_spec(fmt, 6, random_bits=7, saturation=True), make_spec(fmt, 5, flip=2, p=0.1)]
    assert not _drawn_differences(x, specs, ("stream", "counter", "generator"))
    base = x[:40 * 30].reshape(40, 30)
    assert not _drawn_differences(np.asfortranarray(base), specs, ("stream",))
    assert not _drawn_differences(base[::2, ::3], specs, ("generator",))
