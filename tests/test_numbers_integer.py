"""Integer quantization, checked exhaustively against exact rational arithmetic."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import pychop_compat
from pychop_compat import int_quantize
from pychop_compat.numbers import int_range

from test_numbers_fixed import exact_round


def oracle(values, bits, signed, symmetric, mode, scale=None):
    """Codes, scale and zero point by the documented formulas, in exact arithmetic
    (each floating-point step of the definition rounded to double by Fraction -> float)."""
    qmin, qmax = (-2 ** (bits - 1), 2 ** (bits - 1) - 1) if signed else (0, 2 ** bits - 1)
    finite = [v for v in values if math.isfinite(v)] or [0.0]
    lo, hi = min(min(finite), 0.0), max(max(finite), 0.0)
    if scale is None:
        if symmetric:
            quotient = Fraction(max(abs(v) for v in finite)) / (2 ** (bits - 1) - 1)
        else:
            quotient = Fraction(float(Fraction(hi) - Fraction(lo))) / (qmax - qmin)
        if quotient == 0:
            scale = 1.0
        elif quotient < Fraction(1, 2 ** 1022):  # documented: rounded up on the subnormals' grid
            scale = float(math.ceil(quotient * 2 ** 1074) * Fraction(1, 2 ** 1074))
        else:
            scale = float(quotient)
    if symmetric:
        zp = 0 if signed else 2 ** (bits - 1)
    else:
        zp = min(max(qmin - round(Fraction(lo) / Fraction(scale)), qmin), qmax)
    codes = []
    for v in values:
        if math.isnan(v):
            codes.append(None)
        elif math.isinf(v):
            codes.append(qmax if v > 0 else qmin)
        else:
            codes.append(min(max(exact_round(Fraction(v) / Fraction(scale), mode) + zp, qmin), qmax))
    return codes, scale, zp


def samples(amax_numerator):
    """A grid dense in quotient space around every code, with an awkward (non-dyadic) maximum."""
    base = np.arange(-64, 65) / 16.0
    extra = np.array([amax_numerator / 7, -amax_numerator / 3, 0.1, -0.3, 1e-310, 2.0 ** -40])
    return np.concatenate([base, extra, base / 7, base * 3 / 10])


@pytest.mark.parametrize("bits", [2, 3, 4, 8, 16])
@pytest.mark.parametrize("signed", [True, False])
@pytest.mark.parametrize("symmetric", [True, False])
def test_exhaustive_against_fractions(bits, signed, symmetric):
    x = samples(5.0)
    for mode in (1, 2, 3, 4, -1):
        codes, scale, zp = int_quantize(x, bits, signed=signed, symmetric=symmetric, round=mode,
                                        return_codes=True)
        want, want_scale, want_zp = oracle(list(x), bits, signed, symmetric, mode)
        assert scale.item() == want_scale and zp.item() == want_zp
        assert codes.tolist() == want, f"mode {mode}"
        deq = int_quantize(x, bits, signed=signed, symmetric=symmetric, round=mode)
        np.testing.assert_array_equal(deq, [float(Fraction(c - want_zp) * Fraction(want_scale)) for c in want])


@pytest.mark.parametrize("scale", [0.375, 3.0, 0.1, 1 / 3])
def test_given_scale_ties_exactly(scale):
    """Exact ties x = (n + 1/2) scale (dyadic scales) and near ties (0.1, 1/3: the double
    quotient lands on a tie that the exact quotient misses)."""
    n = np.arange(-20, 21)
    x = np.concatenate([(n + 0.5) * scale, n * scale, (n + 0.25) * scale])
    for mode in (1, -1, 2, 3, 4):
        codes = int_quantize(x, 6, scale=scale, round=mode, return_codes=True)[0]
        want = oracle(list(x), 6, True, True, mode, scale=scale)[0]
        assert codes.tolist() == want, f"mode {mode}"


def test_near_ties_are_decided_exactly():
    # 0.35 / 0.1 is 3.4999999999999996 exactly-ish in doubles but the exact quotient of the
    # two doubles is what counts; compare with Fraction directly on many such pairs.
    rng = np.random.default_rng(0)
    scale = 0.1
    x = (rng.integers(-50, 50, 2000) + 0.5) * scale
    codes = int_quantize(x, 8, scale=scale, return_codes=True)[0]
    want = [exact_round(Fraction(v) / Fraction(scale), 1) for v in x]
    assert codes.tolist() == want


@pytest.mark.parametrize("axis", [0, 1, (0,), -1])
@pytest.mark.parametrize("symmetric", [True, False])
def test_per_channel(axis, symmetric):
    x = np.array([[0.3, -1.7, 2.2, 0.0], [10.0, 5.5, -2.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    codes, scale, zp = int_quantize(x, 4, axis=axis, symmetric=symmetric, return_codes=True)
    a = axis[0] if isinstance(axis, tuple) else axis
    moved = np.moveaxis(x, a, 0)
    got = np.moveaxis(codes, a, 0)
    for i in range(moved.shape[0]):
        want, want_scale, want_zp = oracle(list(moved[i]), 4, True, symmetric, 1)
        assert got[i].tolist() == want
        assert np.moveaxis(scale, a, 0).ravel()[i] == want_scale


@pytest.mark.parametrize("mode", [5, 6])
def test_stochastic(mode):
    x = np.array([0.31, -0.77, 0.5, 1.0, 0.12])
    codes = int_quantize(x, 4, scale=0.25, round=mode, rng=np.random.default_rng(5), return_codes=True)[0]
    u = iter(np.random.default_rng(5).random(x.size))
    want = []
    for v in x:
        y = Fraction(v) * 4
        whole, frac = math.floor(abs(y)), abs(y) - math.floor(abs(y))
        if frac:
            whole += next(u) <= (float(frac) if mode == 5 else 0.5)
        want.append(int(math.copysign(whole, v)))
    assert codes.tolist() == want


def test_specials_and_types():
    out = int_quantize(np.array([np.nan, np.inf, -np.inf, 1.0]), 8)
    assert np.isnan(out[0]) and out[1] == 1.0 and out[2] == -128 / 127
    torch = pytest.importorskip("torch")
    t = torch.tensor([[0.5, -0.25], [1.0, 0.125]], dtype=torch.float32)
    out = int_quantize(t, 4, axis=0)
    assert out.dtype == torch.float32 and out.shape == t.shape
    codes, scale, zp = int_quantize(t, 4, axis=0, return_codes=True)
    assert codes.dtype == torch.int64 and scale.dtype == torch.float64


def test_range_and_bad_arguments():
    assert int_range(2) == (-2, 1) and int_range(16, signed=False) == (0, 65535)
    with pytest.raises(ValueError, match="bits"):
        int_quantize([1.0], 17)
    with pytest.raises(ValueError, match="scale"):
        int_quantize([1.0], 8, scale=0.0)
    with pytest.raises(ValueError, match="zero_point"):
        int_quantize([1.0], 8, scale=1.0, zero_point=200)
    with pytest.raises(ValueError, match="round"):
        int_quantize([1.0], 8, round=0)


def test_affine_scale_of_a_range_beyond_the_doubles():
    # hi - lo overflows a double here, the scale (hi - lo) / 255 does not.  Scaling the input by 4
    # scales every step of the documented formulas exactly, so the results must scale with it.
    for values in ([1e308, -1e308], [1.7e308, -3e307, 5e307], [1.79e308, -1.79e308, 0.0, 1e300]):
        x = np.array(values)
        codes, scale, zero = int_quantize(x, 8, symmetric=False, return_codes=True)
        small_codes, small_scale, small_zero = int_quantize(x / 4, 8, symmetric=False, return_codes=True)
        assert np.isfinite(scale).all() and np.array_equal(scale, small_scale * 4)
        assert np.array_equal(codes, small_codes) and np.array_equal(zero, small_zero)
        assert np.array_equal(int_quantize(x, 8, symmetric=False), int_quantize(x / 4, 8, symmetric=False) * 4)


def test_axis_takes_any_integer_and_refuses_other_types():
    # axis is documented as an int or a tuple of ints: NumPy integers too (as for mx/block_quantize,
    # 0.6.x: "'numpy.int64' object is not iterable"); a float is a clear TypeError naming axis.
    x = np.array([[0.3, -1.7, 2.2], [10.0, 5.5, -2.0]])
    for axis in (np.int64(1), np.int32(-1), (np.int64(1),)):
        codes, scale, _ = int_quantize(x, 4, axis=axis, return_codes=True)
        for j in range(3):
            want, want_scale, _ = oracle(list(x[:, j]), 4, True, True, 1)
            assert codes[:, j].tolist() == want and scale.ravel()[j] == want_scale
    for axis in (1.0, "1", np.float64(1.0), (1.0,)):
        with pytest.raises(TypeError, match="axis"):
            int_quantize(x, 4, axis=axis)


@pytest.mark.parametrize("symmetric", [True, False])
def test_a_range_whose_scale_underflows_gets_the_smallest_double(symmetric):
    # max|x| / 127 (or (hi - lo) / 255) rounds to 0 for a non-zero range below 127 * 2^-1075 (255 * 2^-1075):
    # the documented scale is then 2^-1074, of which each x is an exact multiple within the codes
    # (0.6.x: scale 1, every code the zero point, every value 0).
    tiny = Fraction(1, 2 ** 1074)
    x = np.array([1e-322, -5e-323, 3e-323, 0.0])  # 20, -10, 6 and 0 times 2^-1074
    codes, scale, zp = int_quantize(x, 8, symmetric=symmetric, return_codes=True)
    want_zp = 0 if symmetric else -128 + 10  # qmin - lo / scale
    assert scale.tolist() == [float(tiny)] and zp.tolist() == [want_zp]
    assert codes.tolist() == [int(Fraction(v) / tiny) + want_zp for v in x]
    np.testing.assert_array_equal(int_quantize(x, 8, symmetric=symmetric), x)
    # per channel: a zero channel keeps scale 1
    scale = int_quantize(np.array([[0.0, 0.0], [1e-322, 3e-323]]), 8, axis=0, symmetric=symmetric,
                         return_codes=True)[1]
    assert scale.ravel().tolist() == [1.0, float(tiny)]


@pytest.mark.parametrize("bits", [2, 3, 4, 8, 16])
@pytest.mark.parametrize("signed", [True, False])
@pytest.mark.parametrize("symmetric", [True, False])
def test_a_subnormal_scale_is_rounded_up_so_no_value_clips(bits, signed, symmetric):
    # Below 2^-1022 the nearest double to max|x| / (2^(bits-1) - 1) can be far below it (0.9.0: max|x| =
    # 190 * 2^-1074 at 8 bits gave scale 2^-1074 and clipped code 190 to 127, value 127 * 2^-1074).  The
    # documented scale is rounded up there: every code within the codes, as exact arithmetic keeps them.
    tiny = Fraction(1, 2 ** 1074)
    count = 2 ** (bits - 1) - 1 if symmetric else (2 ** bits - 1)
    rng = np.random.default_rng(bits)
    # max|x| = m * 2^-1074: small m, random ones, and around the normal boundary (quotient 2^-1022)
    ms = list(range(1, 200)) + [int(m) for m in rng.integers(200, 2 ** 53, 40)]
    ms += [count * 2 ** 52 + d for d in (-2 * count, -count, -1, 0, 1)]
    for i, m in enumerate(ms):
        mode = (1, 2, 3, 4, -1)[i % 5]
        x = np.array([m, -(m // 3), m // 2, 1, 0], dtype=np.float64) * float(tiny)  # the doubles nearest
        codes, scale, zp = int_quantize(x, bits, signed=signed, symmetric=symmetric, round=mode,
                                        return_codes=True)
        want, want_scale, want_zp = oracle(list(x), bits, signed, symmetric, mode)
        assert scale.item() == want_scale and zp.item() == want_zp, m
        assert codes.tolist() == want, (m, mode)
        # a subnormal scale keeps max|x| / scale <= count (affine: (hi - lo) / scale) exactly: nothing clips
        spread = Fraction(max(abs(v) for v in x)) if symmetric else Fraction(float(Fraction(x[0]) - Fraction(x[1])))
        assert want_scale >= 2.0 ** -1022 or spread / Fraction(want_scale) <= count, m
    # the reported case, by hand: scale 2 * 2^-1074, the largest value kept (-31.5 and 47.5: ties to even)
    x = np.array([190, -63, 95, 0]) * float(tiny)
    codes, scale, _ = int_quantize(x, 8, return_codes=True)
    assert scale.tolist() == [float(2 * tiny)] and codes.tolist() == [95, -32, 48, 0]
    np.testing.assert_array_equal(int_quantize(x, 8), np.array([190, -64, 96, 0]) * float(tiny))
    # float32 subnormals are normal doubles, and so is their scale (computed in float64): no rounding up
    x32 = np.array([190, -63, 95, 0], dtype=np.float32) * np.float32(2.0 ** -149)
    codes, scale, _ = int_quantize(x32, 8, return_codes=True)
    assert scale.item() == float(Fraction(x32[0].item()) / 127) and codes.tolist() == [127, -42, 63, 0]


@pytest.mark.parametrize("mode", [5, 6])
@pytest.mark.parametrize("scale", [0.5, 0.1])
def test_stochastic_draws_also_where_the_code_clips(mode, scale):
    """One number per element whose quotient x / scale is not an integer, +-Inf included (chop's
    roundit draws for them), in column-major order, also where the code clips (docs/numbers.rst).
    0.9.x drew none for quotients beyond the codes by more than two, shifting every later draw."""
    x = np.array([[1000.3, 0.3, np.inf], [0.6, -1e300, 2.3], [-np.inf, np.ldexp(0.1, 10), 1e6],
                  [0.55, 24.0, -np.ldexp(0.1, 60)]])
    codes = int_quantize(x, 4, scale=scale, round=mode, rng=np.random.default_rng(3), return_codes=True)[0]
    u = iter(np.random.default_rng(3).random(x.size))
    want = np.empty(x.shape, dtype=np.int64)
    for j in range(x.shape[1]):
        for i in range(x.shape[0]):
            v = x[i, j]
            if math.isinf(v):
                next(u)  # Inf - floor(Inf) is NaN: a draw, and the code clips to an end
                want[i, j] = 7 if v > 0 else -8
                continue
            y = Fraction(v) / Fraction(scale)
            whole, frac = math.floor(abs(y)), abs(y) - math.floor(abs(y))
            if frac:
                whole += bool(next(u) <= (float(frac) if mode == 5 else 0.5))
            want[i, j] = min(max(-whole if v < 0 else whole, -8), 7)
    assert codes.tolist() == want.tolist()
    # the reported case, on MATLAB's stream: chop's roundit, then the codes' range
    v = np.array([1000.3, 0.3, 0.6, 2.3, -np.inf, 0.7])
    pychop_compat.rng(1)
    got = int_quantize(v, 4, scale=1.0, round=mode, return_codes=True)[0]
    pychop_compat.rng(1)
    assert got.tolist() == np.clip(pychop_compat.roundit(v, {"round": mode}), -8, 7).tolist()
