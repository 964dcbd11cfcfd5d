"""Dense sweeps of the edges that the fast NumPy engine decides in bulk for the OCP/ML formats.

The fast engine rounds whole blocks at once and picks out only a few elements
for a slower path, so each edge is tested here inside a large array (several
blocks, and more than the size above which the engine splits the work over
threads), at scattered positions among ordinary values:

* between 0 and the smallest subnormal ``xmins``: a dense grid, ``xmins / 2``
  exactly, and chop's double-rounding window just above it;
* every midpoint between neighbouring values, and its neighbours;
* ``xmax`` plus half an ulp of the top binade (the overflow tie), with
  saturation on and off; Inf, NaN, both zeros.

Oracles: ml_dtypes' cast (one correct rounding, ties to even; see
``test_ocp_formats.ml_cast``), with the overflow and saturation rules and
chop.m's underflow rule stated in each test; for chop's directed modes, which
ml_dtypes does not have, chop.m's reference algorithm and the rule stated in
the test.
"""

from __future__ import annotations

import numpy as np
import pytest

from bits import assert_bits_equal

from pychop_compat import chop
from pychop_compat.formats import catalogue_format
from pychop_compat.rounding import round_to_format

ml_dtypes = pytest.importorskip("ml_dtypes")

from test_ocp_formats import code_points, ml_cast, same  # noqa: E402  (after the skip)

NAMES = ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e3m4",
         "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn"]
#: Elements of each test array: beyond the fast engine's threading threshold (2^18), not a
#: multiple of its block.
N = (1 << 18) + 4099


def edges(name) -> np.ndarray:
    """The edge values of ``name`` (float64, both signs)."""
    fmt = catalogue_format(name)
    points = np.unique(np.abs(code_points(name)))
    mids = (points[:-1] + points[1:]) / 2
    xmins, half = fmt.xmins, fmt.xmins / 2
    ulp_top = np.ldexp(1.0, fmt.emax - fmt.t + 1)
    below = xmins * np.arange(0, 257) / 256  # 0 .. xmins, dense
    window = half * (1 + np.ldexp(1.0, -fmt.t)) * np.array([1.0, 1 - 2.0 ** -20, 1 + 2.0 ** -20])
    top = np.array([fmt.xmax, fmt.xmax + ulp_top / 2, fmt.xmax + ulp_top, 2 * fmt.xmax, 1e30])
    base = np.concatenate([points, mids, below, [half], window, top])
    return np.concatenate([base, -base])


def embedded(name, dtype) -> tuple[np.ndarray, np.ndarray]:
    """``(x, positions)``: normal random values scaled to the format's range, with the edge
    values (and their neighbours in ``dtype``) at random positions."""
    gen = np.random.default_rng(2026)
    fmt = catalogue_format(name)
    with np.errstate(over="ignore"):
        e = edges(name).astype(dtype)
        e = np.concatenate([e, np.nextafter(e, dtype(np.inf)), np.nextafter(e, dtype(-np.inf)),
                            np.array([np.inf, -np.inf, np.nan, 0.0, -0.0], dtype)])
    x = (gen.standard_normal(N) * gen.choice([fmt.xmins, 1.0, fmt.xmax / 4], N)).astype(dtype)
    positions = gen.choice(N, e.size, replace=False)
    x[positions] = e
    return x, positions


def cast(x: np.ndarray, name) -> np.ndarray:
    """ml_dtypes' cast; NaN inputs give NaN (ml_dtypes maps NaN to -0 in formats without NaN,
    which have no NaN result to give; our results are float32/float64 and stay NaN)."""
    return np.where(np.isnan(x), np.nan, ml_cast(x, name))


def saturated(want: np.ndarray, x: np.ndarray, xmax: float) -> np.ndarray:
    """ml_dtypes' results with overflow (NaN or Inf from a non-NaN input) replaced by +-xmax."""
    over = ~np.isnan(x) & ~np.isfinite(want)
    return np.where(over, np.copysign(xmax, x), want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", NAMES)
def test_correct_rounding_edges_in_bulk(name, dtype):
    """round_to_format (CPFloat's rules, the format's defaults) is ml_dtypes' cast on every element."""
    x, positions = embedded(name, dtype)
    want = cast(x, name)
    got = round_to_format(x, name).astype(np.float64)
    ok = same(got, want)
    assert ok[positions].all() and ok.all(), list(zip(x[~ok][:5], got[~ok][:5], want[~ok][:5]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2", "float6_e2m3fn", "float4_e2m1fn"])
@pytest.mark.parametrize("saturation", [False, True])
def test_overflow_edges_with_saturation_switch(name, dtype, saturation):
    """At xmax + half an ulp the tie goes to the even neighbour: xmax when xmax's significand
    ends in 0 (the 'fn'/finite formats), else the overflow; overflow gives +-xmax with
    saturation and otherwise Inf (IEEE formats) or NaN (formats without Inf).  ml_dtypes'
    cast gives Inf/NaN there for formats with Inf or NaN, +-xmax for those without (float6/4)."""
    fmt = catalogue_format(name)
    x, _ = embedded(name, dtype)
    want = cast(x, name)
    if saturation:
        want = saturated(want, x, fmt.xmax)
    elif fmt.encoding == "finite":
        # Neither Inf nor NaN in the format: ml_dtypes saturates; with saturation off what
        # overflows is NaN.  xmax's significand is all ones (odd), so from xmax + half an ulp
        # on (the tie included) the rounding overflows.
        over = np.abs(x.astype(np.float64)) >= fmt.xmax + np.ldexp(1.0, fmt.emax - fmt.t)
        want = np.where(over, np.nan, want)
    got = round_to_format(x, name, saturation=saturation, infinity=fmt.has_inf).astype(np.float64)
    ok = same(got, want)
    assert ok.all(), list(zip(x[~ok][:5], got[~ok][:5], want[~ok][:5]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", NAMES)
def test_chop_underflow_rule_edges_in_bulk(name, dtype):
    """chop(x, {'format': name}) rounds below xmins to t bits first and then compares with
    xmins / 2 (chop.m's rule): inputs in (xmins/2, xmins/2 (1 + 2^-t)] give +0, where one
    correct rounding gives +-xmins; flushed results are +0.  Elsewhere: ml_dtypes' cast."""
    fmt = catalogue_format(name)
    x, positions = embedded(name, dtype)
    want = cast(x, name)
    a = np.abs(x.astype(np.float64))
    half = fmt.xmins / 2
    want = np.where((a > half) & (a <= half * (1 + 2.0 ** -fmt.t)), 0.0, want)
    want = np.where(want == 0, 0.0, want)  # chop's range rules flush to +0
    got = chop(x, {"rules": "chop", "format": name}).astype(np.float64)
    flushed = (a < fmt.xmins) & (got == 0)
    assert not np.signbit(got[flushed]).any()
    ok = (got == want) | (np.isnan(got) & np.isnan(want))
    assert ok[positions].all() and ok.all(), list(zip(x[~ok][:5], got[~ok][:5], want[~ok][:5]))


def below_xmin(name, dtype) -> tuple[np.ndarray, np.ndarray]:
    """``(x, positions)``: :func:`embedded`'s array with a fine grid from 0 to 2 xmin (step
    xmin / 4096, at least 512 steps per xmins: every value of the format there, midpoints,
    quarter points), both signs and both zeros, and the neighbours in ``dtype`` of each, at
    random positions."""
    fmt = catalogue_format(name)
    grid = fmt.xmin * np.arange(0, 2 * 4096 + 1) / 4096
    grid = np.concatenate([grid, -grid]).astype(dtype)
    grid = np.concatenate([grid, np.nextafter(grid, dtype(np.inf)), np.nextafter(grid, dtype(-np.inf))])
    x, _ = embedded(name, dtype)
    positions = np.random.default_rng(7).choice(N, grid.size, replace=False)
    x[positions] = grid
    return x, positions


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float6_e2m3fn",
                                  "float6_e3m2fn", "float4_e2m1fn"])
@pytest.mark.parametrize("mode", [2, 3, 4])
@pytest.mark.parametrize("subnormal", [0, 1])
def test_chop_directed_modes_below_xmin_in_bulk(name, dtype, mode, subnormal):
    """Directed modes (round 2, 3, 4), with and without subnormals: the fast engine equals
    chop.m's reference algorithm bit for bit on every element, and below xmin it follows
    chop.m's rules: a result below the smallest kept number r (xmins, or xmin without
    subnormals) goes to +-r in the mode's direction, otherwise to +0 (zeros give +0 too);
    from r to xmin the grid is xmins; so the result is ceil/floor/trunc(x / r) * r, never -0."""
    from pychop_compat.engines.dispatch import round_array
    from pychop_compat.matlab.options import resolve
    from pychop_compat.random.sources import MATLAB_STREAM

    fmt = catalogue_format(name)
    x, positions = below_xmin(name, dtype)
    spec = resolve({"rules": "chop", "format": name, "round": mode, "subnormal": subnormal}, None,
                   "single" if dtype == np.float32 else "double").spec
    got = round_array(x, spec, MATLAB_STREAM)
    ref = round_array(x, spec, MATLAB_STREAM, kernel="reference")
    assert_bits_equal(got, ref, nan_payloads=True)
    r = fmt.xmins if subnormal else fmt.xmin
    a = x.astype(np.float64)
    small = np.abs(a) < fmt.xmin
    step = {2: np.ceil, 3: np.floor, 4: np.trunc}[mode](a[small] / r) * r
    want = np.where(step == 0, 0.0, step)  # +0
    g = got[small].astype(np.float64)
    assert np.array_equal(g, want) and not np.signbit(g[g == 0]).any()
    assert small[positions].sum() > 4096 * 2 * 3


def test_torch_cpu_tensors_take_the_same_paths():
    """torch CPU tensors hand extended specs to the NumPy engine: the same bits."""
    torch = pytest.importorskip("torch")
    for name in ("float8_e4m3fn", "float4_e2m1fn"):
        x, _ = embedded(name, np.float32)
        want = round_to_format(x, name)
        got = round_to_format(torch.from_numpy(x.copy()), name).numpy()
        assert same(got.astype(np.float64), want.astype(np.float64)).all()
        want = chop(x, {"rules": "chop", "format": name})
        got = chop(torch.from_numpy(x.copy()), {"rules": "chop", "format": name}).numpy()
        assert ((got == want) | (np.isnan(got) & np.isnan(want))).all()


def test_compiled_setting_gives_the_numpy_engines_bits_on_extended_specs():
    """Under cpu_engine('numba') extended specs give the NumPy engine's bits (chop's rules run
    compiled, CPFloat's fall back to the NumPy engine; test_compiled_extended.py has the rest)."""
    pytest.importorskip("numba")
    from pychop_compat.kernels import compiled

    x, _ = embedded("float4_e2m1fn", np.float64)
    with compiled.cpu_engine("numpy"):
        want_rtf, want_chop = round_to_format(x, "float4_e2m1fn"), chop(x, {"rules": "chop", "format": "float4_e2m1fn"})
    with compiled.cpu_engine("numba"):
        got_rtf, got_chop = round_to_format(x, "float4_e2m1fn"), chop(x, {"rules": "chop", "format": "float4_e2m1fn"})
    assert same(got_rtf, want_rtf).all() and same(got_chop, want_chop).all()
