"""Fixed point, checked exhaustively against exact rational arithmetic (fractions.Fraction)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import pychop_compat
from pychop_compat import fixed_point
from pychop_compat.numbers import fixed_point_range


def exact_round(y: Fraction, mode: int) -> int:
    """Rounding of an exact rational to an integer, by definition."""
    lower = math.floor(y)
    frac = y - lower
    if frac == 0:
        return lower
    if mode == 1:
        return lower + (frac > Fraction(1, 2) or (frac == Fraction(1, 2) and lower % 2 == 1))
    if mode == -1:
        if frac == Fraction(1, 2):
            return lower + 1 if y > 0 else lower
        return lower + (frac > Fraction(1, 2))
    if mode == 2:
        return lower + 1
    if mode == 3:
        return lower
    if mode == 4:
        return lower + 1 if y < 0 else lower
    raise AssertionError(mode)


def exact_fixed(x: float, wl: int, fl: int, signed: bool, overflow: str, mode: int) -> float:
    k = exact_round(Fraction(x) * Fraction(2) ** fl, mode)
    low, high = (-2 ** (wl - 1), 2 ** (wl - 1) - 1) if signed else (0, 2 ** wl - 1)
    if overflow == "saturate":
        k = min(max(k, low), high)
    else:
        k = (k - low) % 2 ** wl + low
    return float(Fraction(k) / Fraction(2) ** fl)


def grid(wl: int, fl: int) -> np.ndarray:
    """Every multiple of a quarter step over twice the range, and some non-dyadic values."""
    step = 2.0 ** -fl
    reach = 2 ** (wl + 1)
    dyadic = np.arange(-4 * reach, 4 * reach + 1) * (step / 4)
    return np.concatenate([dyadic, np.array([0.1, -0.1, 1 / 3, -2 / 3, 1e-300, -1e-300]) * step])


@pytest.mark.parametrize("wl", [1, 2, 3, 5])
@pytest.mark.parametrize("fl", [-2, 0, 3, 7])
@pytest.mark.parametrize("signed", [True, False])
@pytest.mark.parametrize("overflow", ["saturate", "wrap"])
def test_exhaustive_against_fractions(wl, fl, signed, overflow):
    x = grid(wl, fl)
    for mode in (1, 2, 3, 4, -1):
        got = fixed_point(x, wl, fl, signed=signed, overflow=overflow, round=mode)
        expected = [exact_fixed(v, wl, fl, signed, overflow, mode) for v in x]
        np.testing.assert_array_equal(got, expected, err_msg=f"mode {mode}")


def test_range_and_codes():
    assert fixed_point_range(4) == (-8, 7) and fixed_point_range(4, signed=False) == (0, 15)
    codes = fixed_point(np.array([0.3, -5.0, 9.0]), 4, 1, return_codes=True)
    assert codes.dtype == np.int64 and codes.tolist() == [1, -8, 7]
    assert fixed_point(np.array([2.0 ** 30 + 0.5]), 53, 1).item() == 2.0 ** 30 + 0.5


@pytest.mark.parametrize("mode", [5, 6])
def test_stochastic_draws_as_roundit_does(mode):
    """Elements with a fraction draw one uniform each, in column-major order; up (away from 0)
    iff u <= frac (mode 5) or u <= 1/2 (mode 6)."""
    x = np.array([[0.3, 1.0, -0.7], [2.25, -1.5, 0.0]])
    wl, fl = 6, 2
    got = fixed_point(x, wl, fl, round=mode, rng=np.random.default_rng(7))
    u = iter(np.random.default_rng(7).random(x.size))
    expected = np.empty_like(x)
    for j in range(x.shape[1]):
        for i in range(x.shape[0]):
            y = Fraction(x[i, j]) * 4
            whole, frac = math.floor(abs(y)), abs(y) - math.floor(abs(y))
            if frac:
                up = next(u) <= (float(frac) if mode == 5 else 0.5)
                whole += up
            expected[i, j] = math.copysign(whole / 4, x[i, j])
    np.testing.assert_array_equal(got, expected)


def test_stochastic_matches_matlab_stream_roundit():
    x = np.linspace(-3, 3, 37)
    pychop_compat.rng(3)
    got = fixed_point(x, 8, 3, round=5)
    pychop_compat.rng(3)
    np.testing.assert_array_equal(got, pychop_compat.roundit(x * 8, {"round": 5}) / 8)


def test_specials():
    out = fixed_point(np.array([np.inf, -np.inf, np.nan]), 4, 1)
    assert out[0] == 3.5 and out[1] == -4.0 and np.isnan(out[2])
    assert np.isnan(fixed_point(np.array([np.inf]), 4, 1, overflow="wrap")).all()
    with pytest.raises(ValueError, match="NaN"):
        fixed_point(np.array([np.nan]), 4, 1, return_codes=True)


def test_types_kept_and_input_untouched():
    x = np.array([0.3, 0.7], dtype=np.float32)
    before = x.copy()
    out = fixed_point(x, 8, 4)
    assert out.dtype == np.float32 and np.array_equal(x, before)
    assert isinstance(fixed_point(0.3, 8, 4), np.float64)
    assert fixed_point([1, 2], 4, 0).dtype == np.float64


def test_torch_keeps_dtype_shape_device():
    torch = pytest.importorskip("torch")
    x = torch.tensor([[0.3, -0.7], [1.2, 9.0]], dtype=torch.float32, requires_grad=True)
    out = fixed_point(x, 6, 3)
    assert out.dtype == torch.float32 and out.shape == x.shape and out.device == x.device
    assert not out.requires_grad
    np.testing.assert_array_equal(out.numpy(), fixed_point(x.detach().numpy(), 6, 3))
    codes = fixed_point(x, 6, 3, return_codes=True)
    assert codes.dtype == torch.int64


@pytest.mark.parametrize("kwargs, error", [
    ({"wl": 0, "fl": 1}, ValueError), ({"wl": 4.5, "fl": 1}, TypeError),
    ({"wl": 4, "fl": 1, "round": 7}, ValueError), ({"wl": 4, "fl": 1, "overflow": "clip"}, ValueError),
    ({"wl": 4, "fl": 1, "rng": 3}, TypeError),
])
def test_bad_arguments(kwargs, error):
    with pytest.raises(error):
        fixed_point([1.0], **kwargs)
    with pytest.raises(TypeError, match="Complex"):
        fixed_point(np.array([1j]), 4, 1)


@pytest.mark.parametrize("signed", [True, False])
@pytest.mark.parametrize("wl", [1, 8, 16, 53])
def test_wrap_of_values_far_beyond_the_word_is_their_residue(wl, signed):
    # Two's complement wrap is the integer's residue mod 2^wl, exactly (Python integers), also
    # where the spacing of the doubles exceeds the word (0.6.0 computed k - low in double there)
    # and where x * 2^fl is beyond the doubles (a multiple of 2^wl: code 0).
    rng = np.random.default_rng(wl)
    x = np.concatenate([rng.integers(-2**62, 2**62, 300).astype(np.float64),
                        np.ldexp(rng.random(300) * 2 - 1, rng.integers(0, 1020, 300)), [2.0**60, -2.0**60]])
    low = -(1 << (wl - 1)) if signed else 0
    codes = fixed_point(x, wl, 0, signed=signed, overflow="wrap", return_codes=True)
    assert [int(c) for c in codes] == [(round(Fraction(v)) - low) % (1 << wl) + low for v in x]
    beyond = fixed_point(np.array([1.0, -3.0, 0.75]), wl, 1100, signed=signed, overflow="wrap", return_codes=True)
    assert beyond.tolist() == [0, 0, 0]


def test_codes_of_infinities_under_wrap_name_the_infinity():
    # 'wrap' turns +-Inf into NaN (documented); the error must not blame a NaN the input does not have.
    for x in ([np.inf], [1.0, -np.inf]):
        with pytest.raises(ValueError, match="Inf") as raised:
            fixed_point(np.array(x), 8, 2, overflow="wrap", return_codes=True)
        assert "NaN" not in str(raised.value)


def test_fraction_lengths_whose_values_are_not_doubles_are_refused():
    # The values k * 2^-fl are doubles iff 2^-fl >= 2^-1074 (the smallest double; |k| < 2^53) and
    # |k| * 2^-fl < 2^1024 for |k| up to 2^(wl-1) (signed) or 2^wl - 1 (unsigned): wl - 1024 <= fl <= 1074.
    # 0.9.x gave fixed_point([1.0], 8, 1100) = [0.] (code 127) and numpy's OverflowError for fl = 2^31.
    for wl, fl in [(8, 1075), (8, 1100), (8, 2 ** 31), (8, -1017), (53, -972), (1, -1024), (8, -2 ** 31)]:
        with pytest.raises(ValueError, match="fl"):
            fixed_point([1.0], wl, fl)
    # the ends of the range are exact (Fraction)
    for wl, fl, signed, x in [(8, 1074, True, [3 * 2.0 ** -1074, 1e-320, -1e-321, 1.0, -1.0]),
                              (8, -1016, True, [1e308, -1e308, 5e305]), (53, -971, False, [1.7e308, 1e300]),
                              (1, -1023, True, [-1e308, 1e308, -1e307])]:
        got = fixed_point(np.array(x), wl, fl, signed=signed)
        assert got.tolist() == [exact_fixed(v, wl, fl, signed, "saturate", 1) for v in x], (wl, fl)


@pytest.mark.parametrize("mode", [1, 2, 3, 4, -1])
def test_codes_for_any_fraction_length(mode):
    # Codes are exact for any integer fl (0.9.x: OverflowError from ldexp for |fl| >= 2^31).  For
    # fl = 2^31, |x| 2^fl is beyond every code and a multiple of 2^wl: the ends, or 0 wrapped; for
    # fl = -2^31, x 2^fl lies strictly between -1 and 1 (not 0): 0, or +-1 where the mode rounds away.
    x = np.array([1.0, -3.0, 1e-300, -1e300])
    for fl in (2 ** 31, 2 ** 40):
        assert fixed_point(x, 8, fl, round=mode, return_codes=True).tolist() == [127, -128, 127, -128]
        assert fixed_point(x, 8, fl, round=mode, overflow="wrap", return_codes=True).tolist() == [0] * 4
    up = {2: [1, 0, 1, 0], 3: [0, -1, 0, -1]}.get(mode, [0] * 4)
    for fl in (-2 ** 31, -2 ** 40):
        assert fixed_point(x, 8, fl, round=mode, return_codes=True).tolist() == up
