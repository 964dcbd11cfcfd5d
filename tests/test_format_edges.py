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
chop.m's underflow rule stated in each test.
"""

from __future__ import annotations

import numpy as np
import pytest

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
    got = chop(x, {"format": name}).astype(np.float64)
    flushed = (a < fmt.xmins) & (got == 0)
    assert not np.signbit(got[flushed]).any()
    ok = (got == want) | (np.isnan(got) & np.isnan(want))
    assert ok[positions].all() and ok.all(), list(zip(x[~ok][:5], got[~ok][:5], want[~ok][:5]))


def test_torch_cpu_tensors_take_the_same_paths():
    """torch CPU tensors hand extended specs to the NumPy engine: the same bits."""
    torch = pytest.importorskip("torch")
    for name in ("float8_e4m3fn", "float4_e2m1fn"):
        x, _ = embedded(name, np.float32)
        want = round_to_format(x, name)
        got = round_to_format(torch.from_numpy(x.copy()), name).numpy()
        assert same(got.astype(np.float64), want.astype(np.float64)).all()
        want = chop(x, {"format": name})
        got = chop(torch.from_numpy(x.copy()), {"format": name}).numpy()
        assert ((got == want) | (np.isnan(got) & np.isnan(want))).all()


def test_compiled_setting_hands_extended_specs_to_the_numpy_engine():
    """Under cpu_engine('numba') extended specs fall back to the NumPy engine: the same bits."""
    pytest.importorskip("numba")
    from pychop_compat.engines import compiled

    x, _ = embedded("float4_e2m1fn", np.float64)
    with compiled.cpu_engine("numpy"):
        want_rtf, want_chop = round_to_format(x, "float4_e2m1fn"), chop(x, {"format": "float4_e2m1fn"})
    with compiled.cpu_engine("numba"):
        got_rtf, got_chop = round_to_format(x, "float4_e2m1fn"), chop(x, {"format": "float4_e2m1fn"})
    assert same(got_rtf, want_rtf).all() and same(got_chop, want_chop).all()
