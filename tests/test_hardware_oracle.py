"""chop against rounding done by NumPy casts (hardware/libm) and exhaustive code points.

* Round to nearest with format 'h' equals ``x.astype(np.float16).astype(x.dtype)``
  and format 's' equals ``x.astype(np.float32)`` (float64 inputs), for every
  input, finite or not, except exactly the double-rounding band of chop.m
  (see :data:`H_BAND` / :data:`S_BAND`), where both results are asserted too.
* Overflow: NumPy's casts overflow to inf from xboundary = 2**emax * (2 - 2**-t)
  up (65520 for fp16, 2**128 * (1 - 2**-25) for fp32), the round-to-nearest
  overflow threshold of IEEE 754; chop.m mode 1 sends ``|x| >= xboundary`` to
  +-inf as well, and rounds ``xmax <= |x| < xboundary`` to +-xmax.  Both sides
  of the threshold are checked explicitly.
* Every fp16, bfloat16, fp8-e4m3 (q43) and fp8-e5m2 (q52) code point is a fixed
  point of chop for rounding modes 1-4.
* Casts to bfloat16 and fp8 from float32: torch's (bfloat16, float8_e5m2 and, below
  q43's overflow threshold, float8_e4m3fn) and ml_dtypes', when importable.
"""

from __future__ import annotations

import numpy as np
import pytest

from pychop_compat import chop
from conftest import assert_same
from pychop_compat.validation.oracle import FORMATS

SEED = 8675309
DTYPES = [np.float64, np.float32]
DTYPE_IDS = ["float64", "float32"]

# chop.m's double rounding, mode 1, subnormal = 1: a value with exponent below emins
# is first rounded to t bits at its own exponent.  For xmins/2 < |x| <= xmins/2 * (1 + 2**-t)
# this gives exactly xmins/2 and the underflow rule (|c| > xmins/2 -> xmins) then gives 0,
# while a correctly rounded cast gives xmins.  E.g. 2**-25 * (1 + 2**-20): chop 'h' gives 0,
# np.float16 gives 2**-24.  Bands as (exclusive lower end, inclusive upper end, xmins):
H_BAND = (2.0**-25, 2.0**-25 * (1 + 2.0**-11), 2.0**-24)
S_BAND = (2.0**-150, 2.0**-150 * (1 + 2.0**-24), 2.0**-149)


def _in_band(x, band):
    ax = np.abs(x.astype(np.float64))
    return (ax > band[0]) & (ax <= band[1])


def _log_uniform(rng, n, lo, hi):
    """n random values with exponents uniform in [lo, hi], random signs and significands."""
    with np.errstate(over="ignore"):
        return rng.choice([-1.0, 1.0], n) * np.ldexp(1.0 + rng.random(n), rng.integers(lo, hi + 1, n))


def _fp16_code_points(finite_only=False):
    h = np.arange(2**16, dtype=np.uint16).view(np.float16)
    return h[np.isfinite(h)] if finite_only else h


def _fp16_inputs():
    """10**6 random values (exponents -27..16: below xmins/2, subnormal, normal, overflow),
    every finite fp16 value, every midpoint between consecutive fp16 values (and the
    midpoint 65520 between 65504 and 2**16), their neighbours one double ulp away, values
    inside the double-rounding band, and +-inf, NaN."""
    rng = np.random.default_rng(SEED)
    h = _fp16_code_points(finite_only=True).astype(np.float64)
    pos = np.unique(np.abs(h))
    mids = (pos[:-1] + pos[1:]) / 2
    mids = np.concatenate([mids, [65520.0]])
    band = 2.0**-25 * (1 + rng.random(2000) * 2.0**-10)           # half inside, half above
    x = np.concatenate([
        _log_uniform(rng, 10**6, -27, 16), h, mids, -mids,
        np.nextafter(mids, 0), np.nextafter(mids, np.inf), np.nextafter(-mids, -np.inf),
        band, -band, [2.0**-25 * (1 + 2.0**-20), H_BAND[1], np.nextafter(H_BAND[1], 1)],
        [np.inf, -np.inf, np.nan]])
    return x


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_fp16_round_to_nearest_equals_numpy_cast(dtype):
    x = _fp16_inputs().astype(dtype)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16).astype(dtype)
    got = chop(x.copy(), {"format": "h", "round": 1})
    band = _in_band(x, H_BAND)
    assert band.sum() >= 1000
    assert_same(got[~band], want[~band], x[~band], f"fp16 {np.dtype(dtype)}")
    # the excluded inputs are exactly those where chop.m double-rounds: 0 versus xmins
    assert np.all(got[band] == 0) and np.all(np.abs(want[band]) == H_BAND[2])


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_fp16_overflow_threshold_both_sides(dtype):
    big = np.array([65504.0, 65519.0, 65520.0, 65521.0, 65536.0, 1e5, np.inf], dtype=dtype)
    below = np.nextafter(dtype(65520.0), dtype(0))                 # largest input < xboundary
    x = np.concatenate([big, [below]]).astype(dtype)
    x = np.concatenate([x, -x])
    with np.errstate(over="ignore"):
        want = x.astype(np.float16).astype(dtype)
    expected = np.array([65504, 65504, np.inf, np.inf, np.inf, np.inf, np.inf, 65504], dtype)
    assert_same(want, np.concatenate([expected, -expected]), x, "numpy float16 overflow")
    assert_same(chop(x.copy(), {"format": "h", "round": 1}), want, x, "chop 'h' overflow")


def test_single_round_to_nearest_equals_numpy_cast():
    """Float64 inputs over float32's range, its subnormals, beyond overflow, random
    float32 midpoints and their neighbours."""
    rng = np.random.default_rng(SEED + 1)
    x = _log_uniform(rng, 10**6, -153, 129)
    f = _log_uniform(rng, 200000, -149, 127).astype(np.float32)
    f = f[np.isfinite(f)]
    mids = (f.astype(np.float64) + np.nextafter(f, np.float32(np.inf)).astype(np.float64)) / 2
    xb = 2.0**127 * (2 - 2.0**-24)                                  # xboundary, a double
    band = 2.0**-150 * (1 + rng.random(2000) * 2.0**-23)
    special = [xb, np.nextafter(xb, 0), np.nextafter(xb, np.inf), float(np.finfo(np.float32).max),
               2.0**-150, np.nextafter(2.0**-150, 1), S_BAND[1], np.nextafter(S_BAND[1], 1),
               2.0**-149, 2.0**-126, np.inf, np.nan, 0.0, 1e300]
    x = np.concatenate([x, mids, np.nextafter(mids, 0), np.nextafter(mids, np.inf), band, special])
    x = np.concatenate([x, -x])
    with np.errstate(over="ignore"):
        want = x.astype(np.float32).astype(np.float64)
    got = chop(x.copy(), {"format": "s", "round": 1})
    band = _in_band(x, S_BAND)
    assert band.sum() >= 1000
    assert_same(got[~band], want[~band], x[~band], "fp32")
    assert np.all(got[band] == 0) and np.all(np.abs(want[band]) == S_BAND[2])
    # overflow: inf from xboundary up, FLT_MAX just below (also for chop)
    assert list(chop(np.array([np.nextafter(xb, 0), xb]), {"format": "s"})) == [
        float(np.finfo(np.float32).max), np.inf]


# --------------------------------------------------------------------------- fixed points

def _assert_fixed(values, options, context):
    got = chop(values.copy(), options)
    assert_same(got, values, values, context)


@pytest.mark.parametrize("mode", [1, 2, 3, 4])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_every_fp16_code_point_is_fixed(dtype, mode):
    h = _fp16_code_points()                                        # incl. +-inf, NaNs
    x = h.astype(dtype)
    _assert_fixed(x, {"format": "h", "round": mode, "subnormal": 1}, f"fp16 round={mode}")
    keep = (np.abs(h) >= np.float16(2.0**-14)) | (h == 0) | np.isnan(h)   # not subnormal
    _assert_fixed(x[keep], {"format": "h", "round": mode, "subnormal": 0},
                  f"fp16 normal subnormal=0 round={mode}")


def _bfloat16_code_points():
    return (np.arange(2**16, dtype=np.uint32) << 16).view(np.float32)


@pytest.mark.parametrize("mode", [1, 2, 3, 4])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_every_bfloat16_code_point_is_fixed(dtype, mode):
    b = _bfloat16_code_points()
    with np.errstate(invalid="ignore"):                           # signalling NaN patterns
        x = b.astype(dtype)
    _assert_fixed(x, {"format": "b", "round": mode, "subnormal": 1}, f"bfloat16 round={mode}")
    not_sub = ~((b != 0) & (np.abs(b) < np.finfo(np.float32).tiny))  # bfloat16 xmin = 2**-126
    assert (~not_sub).sum() == 2 * 127
    _assert_fixed(x[not_sub], {"format": "b", "round": mode, "subnormal": 0},
                  f"bfloat16 non-subnormal subnormal=0 round={mode}")


def _fp8_from_definition(t, emax):
    """All values of an IEEE-like binary format with subnormals (t bits, emax), incl. +-inf."""
    emin = 1 - emax
    sub = [k * 2.0**(emin + 1 - t) for k in range(2**(t - 1))]                 # 0 and subnormals
    normal = [m * 2.0**(e + 1 - t) for e in range(emin, emax + 1) for m in range(2**(t - 1), 2**t)]
    pos = np.array(sub + normal + [np.inf])
    return np.concatenate([pos, -pos])


def _fp8_from_bits(exp_bits, man_bits):
    """Decode all 256 bit patterns of an IEEE-style 8-bit format (bias 2**(exp_bits-1) - 1)."""
    bits = np.arange(256)
    sign = np.where(bits >> 7, -1.0, 1.0)
    E = (bits >> man_bits) & (2**exp_bits - 1)
    M = bits & (2**man_bits - 1)
    bias = 2**(exp_bits - 1) - 1
    val = np.where(E == 0, M * 2.0**(1 - bias - man_bits),
                   (2**man_bits + M) * 2.0**(E - bias - man_bits))
    val = np.where(E == 2**exp_bits - 1, np.where(M == 0, np.inf, np.nan), val)
    return sign * val


@pytest.mark.parametrize("fmt,t,emax,exp_bits,xmax", [("q43", 4, 7, 4, 240.0), ("q52", 3, 15, 5, 57344.0)])
def test_fp8_enumeration(fmt, t, emax, exp_bits, xmax):
    v = _fp8_from_definition(t, emax)
    assert np.max(v[np.isfinite(v)]) == xmax == FORMATS[fmt].xmax
    decoded = _fp8_from_bits(exp_bits, t - 1)
    assert np.array_equal(np.unique(v), np.unique(decoded[~np.isnan(decoded)]))


@pytest.mark.parametrize("mode", [1, 2, 3, 4])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("fmt,t,emax",
                         [("q43", 4, 7), ("fp8-e4m3", 4, 7), ("q52", 3, 15), ("fp8-e5m2", 3, 15)])
def test_every_fp8_code_point_is_fixed(fmt, t, emax, dtype, mode):
    v = _fp8_from_definition(t, emax).astype(dtype)
    v = np.concatenate([v, [np.nan]]).astype(dtype)
    _assert_fixed(v, {"format": fmt, "round": mode, "subnormal": 1}, f"{fmt} round={mode}")
    normal = ~((v != 0) & (np.abs(v) < 2.0**(1 - emax)))
    _assert_fixed(v[normal], {"format": fmt, "round": mode, "subnormal": 0},
                  f"{fmt} subnormal=0 round={mode}")


# ------------------------------------------------------------- ml_dtypes and torch casts
#
# Casts from float32 round once, to nearest even, and overflow to inf from xboundary
# (float64 inputs would be rounded twice, through float32, by both libraries: only
# float32 values are used, as float32 and as their exact float64 copies).  The
# double-rounding band xmins/2 < |x| <= xmins/2 * (1 + 2**-t) is excluded: chop
# gives 0 there, a correctly rounded cast gives xmins; both are asserted.


def _assert_cast_oracle(fmt, cast, code_points, limit=None, label=""):
    """chop(x, fmt, round to nearest, subnormals) == cast(x) on float32 x below ``limit``.

    ``cast`` maps a float32 array to the format and back to float32; ``code_points``
    are the format's values as float32 (their midpoints and neighbours are inputs too).
    """
    f = FORMATS[fmt]
    half_xmins, t = f.xmins / 2, f.t
    rng = np.random.default_rng(SEED + 2)
    with np.errstate(over="ignore"):
        x = _log_uniform(rng, 300000, f.emins - 3, min(f.emax + 2, 127)).astype(np.float32)
    cp = np.unique(code_points[np.isfinite(code_points)])
    mids = ((cp[:-1].astype(np.float64) + cp[1:]) / 2).astype(np.float32)   # exact in float32
    x = np.concatenate([x, cp, mids, np.nextafter(mids, np.float32(0)),
                        np.nextafter(mids, np.float32(np.inf)), np.float32([np.inf, -np.inf, np.nan])])
    if limit is not None:
        x = x[~(np.abs(x) >= limit)]
    want32 = cast(x)
    band = _in_band(x, (half_xmins, half_xmins * (1 + 2.0**-t)))
    assert band.sum() > 10, "the inputs reach into the double-rounding band"
    assert np.all(np.abs(want32[band]) == np.float32(f.xmins))
    for dtype in DTYPES:
        xd = x.astype(dtype)
        want = want32.astype(dtype)
        got = chop(xd.copy(), {"format": fmt, "round": 1, "subnormal": 1})
        assert_same(got[~band], want[~band], xd[~band], f"{fmt} vs {label} {np.dtype(dtype)}")
        assert np.all(got[band] == 0)
    _assert_fixed(cp.astype(np.float64), {"format": fmt, "round": 1, "subnormal": 1}, f"{label} code points")


ML_FORMATS = [("b", "bfloat16"), ("q43", "float8_e4m3"), ("q52", "float8_e5m2")]


@pytest.mark.parametrize("fmt,ml_name", ML_FORMATS)
def test_ml_dtypes_round_to_nearest(fmt, ml_name):
    """ml_dtypes casts as oracle (ml_dtypes is not a dependency: skipped without it)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    target = getattr(ml_dtypes, ml_name, None)
    if target is None:
        pytest.skip(f"ml_dtypes has no {ml_name}")
    codes = np.arange(2**16, dtype=np.uint16) if ml_name == "bfloat16" else np.arange(2**8, dtype=np.uint8)

    def cast(x):
        with np.errstate(over="ignore"):
            return x.astype(target).astype(np.float32)

    _assert_cast_oracle(fmt, cast, codes.view(target).astype(np.float32), label=f"ml_dtypes.{ml_name}")


# torch.float8_e4m3fn is OCP E4M3 (max 448, no inf): on |x| < 248, the overflow threshold
# of chop's q43 (max 240), the two formats have the same values and round alike.
TORCH_FORMATS = [("b", "bfloat16", 16, None), ("q52", "float8_e5m2", 8, None), ("q43", "float8_e4m3fn", 8, 248.0)]


@pytest.mark.parametrize("fmt,torch_name,bits,limit", TORCH_FORMATS)
def test_torch_casts_round_to_nearest(fmt, torch_name, bits, limit):
    """torch's casts from float32 tensors as oracle (torch is a test dependency in CI)."""
    torch = pytest.importorskip("torch")
    target = getattr(torch, torch_name, None)
    if target is None:
        pytest.skip(f"torch has no {torch_name}")
    codes = torch.arange(2**bits, dtype=torch.int32).to(torch.int16 if bits == 16 else torch.uint8)
    code_points = codes.view(target).to(torch.float32).numpy()
    if limit is not None:
        code_points = code_points[np.abs(code_points) < limit]

    def cast(x):
        return torch.from_numpy(x).to(target).to(torch.float32).numpy()

    _assert_cast_oracle(fmt, cast, code_points, limit=limit, label=f"torch.{torch_name}")
