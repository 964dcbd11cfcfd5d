"""pychop_compat.matlab: MATLAB-language behaviour, checked against its mathematical definition
and MathWorks' documented outputs."""

from __future__ import annotations

import struct
import warnings
from fractions import Fraction

import numpy as np
import pytest

from pychop_compat import chop
from pychop_compat.matlab import chop_struct, int_divide, round_half_away, sequential_sum, sprintf


def _round_half_away_exact(x: float) -> float:
    """sign(x) * floor(|x| + 1/2) in exact rational arithmetic (the definition of MATLAB's round)."""
    q = Fraction(abs(x)) + Fraction(1, 2)
    return float(np.copysign(float(q.numerator // q.denominator), x))


def test_round_half_away_on_halves_and_their_neighbours():
    k = np.arange(-50, 51, dtype=np.float64)
    halves = k + 0.5
    # k + 1/2 lies exactly between k and k + 1; away from zero means k + 1 for k >= 0, k for k < 0
    np.testing.assert_array_equal(round_half_away(halves), np.where(k >= 0, k + 1, k))
    below, above = np.nextafter(halves, -np.inf), np.nextafter(halves, np.inf)
    np.testing.assert_array_equal(round_half_away(below), [_round_half_away_exact(v) for v in below])
    np.testing.assert_array_equal(round_half_away(above), [_round_half_away_exact(v) for v in above])
    # the classic trap: floor(x + 0.5) gives 1 for the double just below 1/2
    x = 0.49999999999999994
    assert np.floor(x + 0.5) == 1.0 and round_half_away(x) == 0.0


def test_round_half_away_random_and_special_values():
    rng = np.random.default_rng(19)
    x = np.concatenate([rng.standard_normal(2000) * 10.0 ** rng.integers(-3, 18, 2000),
                        [2.0**52 + 1, -(2.0**53) + 2, 1e300, 5e-324]])
    np.testing.assert_array_equal(round_half_away(x), [_round_half_away_exact(v) for v in x])
    special = round_half_away([np.inf, -np.inf, np.nan])
    assert special[0] == np.inf and special[1] == -np.inf and np.isnan(special[2])
    assert round_half_away(np.float32([2.5])).dtype == np.float32
    assert round_half_away(np.float32(-2.5)) == -3.0
    assert round(2.5) == 2 and np.round(2.5) == 2.0  # Python's and NumPy's: ties to even


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16])
def test_int_divide_rounds_half_away_and_saturates(dtype):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(int(info.bits))
    a = rng.integers(info.min, info.max, 500, endpoint=True, dtype=dtype)
    b = rng.integers(info.min, info.max, 500, endpoint=True, dtype=dtype)
    b[:20] = 0
    a[20:40] = info.min
    if info.min < 0:
        b[20:40] = -1  # intmin / -1 overflows: saturates to intmax
    b[40:60] = 2  # many exact halves
    got = int_divide(a, b)
    assert got.dtype == np.dtype(dtype)
    for p, q, r in zip(a.tolist(), b.tolist(), got.tolist()):
        if q == 0:  # MATLAB: x/0 is intmax for x > 0, intmin for x < 0, 0 for 0
            want = info.max if p > 0 else info.min if p < 0 else 0
        else:
            exact = Fraction(p, q)
            want = int(np.sign(exact)) * int(abs(exact) + Fraction(1, 2))
            want = min(max(want, info.min), info.max)
        assert r == want, (p, q, r, want)


def test_int_divide_examples_and_errors():
    # MATLAB: int32(7)/int32(2) = 4, int32(-7)/int32(2) = -4; Python floors: 7 // 2 = 3, -7 // 2 = -4
    np.testing.assert_array_equal(int_divide(np.int32([7, -7, -5]), np.int32(2)), [4, -4, -3])
    assert (7 // 2, -7 // 2, -5 // 2) == (3, -4, -3)
    with pytest.raises(TypeError, match="integer"):
        int_divide(np.array([1.0]), np.array([2.0]))
    with pytest.raises(TypeError, match="same integer class"):
        int_divide(np.int8([1]), np.int16([2]))


def test_sprintf_recycles_the_format_column_major():
    A = np.array([[1, 2], [3, 4]])  # MATLAB [1 2; 3 4]; A(:) is 1, 3, 2, 4
    assert sprintf("%d %d\n", A) == "1 3\n2 4\n"
    assert sprintf("%d", [1, 2, 3]) == "123"
    assert sprintf("%d, %d\n", [1, 2, 3]) == "1, 2\n3, "  # stops before the conversion without a value
    assert sprintf(r"%d\n", 5) == "5\n"  # a raw-string format copied from MATLAB
    assert sprintf("%s = %g\n", "x", 0.25) == "x = 0.25\n"
    assert sprintf("100%%") == "100%"


def test_sprintf_prints_inf_and_nan_as_matlab_does():
    for conversion in ("%f", "%e", "%g", "%d", "%.3f"):
        assert sprintf(conversion + " ", [np.inf, -np.inf, np.nan]) == "Inf -Inf NaN "
    assert sprintf("%5.1f|", np.nan) == "  NaN|"  # the width still pads
    assert "%f" % np.inf == "inf"  # Python's spelling, the trap


def test_sprintf_integer_conversion_of_a_fraction_uses_e():
    # MathWorks' documentation: a value that does not fit the conversion is printed with %e
    assert sprintf("%d", np.pi) == "3.141593e+00"
    assert sprintf("%d", 2.0) == "2"
    assert sprintf("%x", 255) == "ff"


def test_chop_struct_ignores_unknown_fields_like_chop_m():
    with pytest.warns(UserWarning, match="'precision'.*defaults apply to format"):
        opts = chop_struct({"precision": "b", "round": 1})
    # no format field: chop.m's default, fp16 (11 bits): 1/3 -> 0.333251953125
    assert chop(1 / 3, opts) == 0.333251953125
    assert chop(1 / 3, {"format": "h"}) == 0.333251953125
    assert chop(1 / 3, {"format": "b"}) == 0.333984375  # what 'precision' meant, bfloat16
    with pytest.raises(ValueError, match="precision"):
        chop(1 / 3, {"precision": "b"})  # a dict refuses the unknown key instead
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert vars(chop_struct({"format": "b", "round": 2}, warn=True)) == {"format": "b", "round": 2}


def test_sprintf_integers_print_their_own_digits():
    # an integer's digits, not those of the nearest double (2^53 + 1 and 2^64 - 1 are no doubles)
    for value in (2**53 + 1, 2**60 + 1, 1 - 2**63, 2**64 - 1):
        assert float(value) != value
    assert sprintf("%d", np.int64(9007199254740993)) == str(2**53 + 1)
    assert sprintf("%d", np.uint64(2**64 - 1)) == "18446744073709551615"
    assert sprintf("%d", 2**60 + 1) == "1152921504606846977"
    assert sprintf("%i|%u|%x", np.int64([1 - 2**63, 2**62 + 1, 2**62 + 1])) == (
        f"{1 - 2**63}|{2**62 + 1}|{2**62 + 1:x}")


def test_sprintf_char_data_and_numbers_with_s_and_c():
    # MathWorks Answers 1808680: text given to a numeric conversion prints its character codes
    assert sprintf("%d", "abc") == "".join(str(ord(c)) for c in "abc") == "979899"
    assert sprintf("%d %f", "10") == f"{ord('1')} {ord('0')}.000000"
    # MATLAB's sprintf doc: %c is a single character, so a char array is consumed one character at a time
    assert sprintf("%c-", "abc") == "a-b-c-"
    assert sprintf("A is %c", "ZH") == "A is ZA is H"
    assert sprintf("%s\n", "abc") == "abc\n"  # %s takes the whole char array
    # MATLAB's sprintf doc: %s and %c convert integers that are valid character codes to characters
    assert sprintf("%s", 65) == chr(65) == "A"
    assert sprintf("%s", [72, 105]) == "Hi"
    assert sprintf("%c", np.array([72.0, 105.0])) == "Hi"
    # MATLAB's fprintf doc: "a string conversion for a numeric value ... MATLAB overrides the specified
    # conversion, and uses %e"
    assert sprintf("%s", 1.5) == "%e" % 1.5 == "1.500000e+00"
    assert sprintf("%c", -1234.5) == "%e" % -1234.5
    assert sprintf("%c|%s", np.nan, np.inf) == "NaN|Inf"
    assert sprintf("%d %s|", "ab", [72, 1.5]) == "97 b|72 1.500000e+00|"  # codes, then the rest, then %e
    assert sprintf("%s|", "", "x") == "x|"  # an empty char array has no elements


def test_sprintf_numeric_escapes_and_bit_subtypes():
    # MATLAB's sprintf doc, formatSpec special characters: sprintf('\x5A') and sprintf('\132') return 'Z'
    assert sprintf("\\x5A|\\132") == "Z|Z"
    assert sprintf("hello\\x41\\101") == "hello" + chr(0x41) + chr(0o101) == "helloAA"
    assert sprintf("\\\\101") == "\\101"  # an escaped backslash, then text
    # MATLAB's sprintf doc, subtypes: %bx the double's bits in hex, %tx the single's
    assert sprintf("%bx", 1.0) == struct.pack(">d", 1.0).hex() == "3ff0000000000000"
    assert sprintf("%tx", 1.0) == struct.pack(">f", 1.0).hex() == "3f800000"
    assert sprintf("%bX %bu %to", -0.1, 2.0, 0.5) == (
        f"{struct.unpack('>Q', struct.pack('>d', -0.1))[0]:X} {struct.unpack('>Q', struct.pack('>d', 2.0))[0]} "
        f"{struct.unpack('>I', struct.pack('>f', 0.5))[0]:o}")


def test_int_divide_with_doubles_keeps_the_integer_class():
    # MATLAB's "Integers" doc: an integer class combined with a double gives the integer class; the double is
    # used as it is and the result rounded half away from zero and saturated
    got = int_divide(300, np.int8(2))
    assert got.dtype == np.int8 and got == 127  # 300/2 = 150 saturates (not int8(300)/2 = 64)
    got = int_divide(np.int32(7), 2.5)
    assert got.dtype == np.int32 and got == 3  # 7/2.5 = 2.8 (not 7/2 = 3.5 -> 4)
    np.testing.assert_array_equal(int_divide(np.int32([-7, 7]), [2.0, -2.0]), [-4, -4])
    big = 2**62 + 1  # exact quotient 2^61 + 1/2 rounds to 2^61 + 1; in doubles it would be 2^61
    assert int_divide(np.int64(big), 2.0) == 2**61 + 1
    rng = np.random.default_rng(7)
    a = rng.integers(-(2**31), 2**31, 300, dtype=np.int32)
    b = rng.standard_normal(300) * 10.0 ** rng.integers(-3, 4, 300)
    got = int_divide(a, b)
    assert got.dtype == np.int32
    for p, q, r in zip(a.tolist(), b.tolist(), got.tolist()):
        exact = Fraction(p) / Fraction(q)
        want = int(np.sign(exact)) * int(abs(exact) + Fraction(1, 2))
        assert r == min(max(want, -(2**31)), 2**31 - 1), (p, q, r)
    with pytest.raises(TypeError, match="same integer class"):
        int_divide(np.int32(7), np.int16(2))  # 0-d operands too


def test_sequential_sum_of_a_1d_array_is_the_row_it_stands_for():
    # MATLAB's sum doc: sum(A, 1) sums each column; [1 2] has two columns of one element: sum([1 2], 1) = [1 2]
    got = sequential_sum(np.array([1.0, 2.0]), 1)
    np.testing.assert_array_equal(got, [1.0, 2.0])
    assert sequential_sum(np.array([1.0, 2.0]), 2) == 3.0
    np.testing.assert_array_equal(sequential_sum(np.array([[1.0, 2.0]]), 1), [1.0, 2.0])  # the same as 1 x 2


def test_chop_struct_drops_rules_which_chop_m_does_not_read():
    # chop.m reads format, subnormal, round, flip, p, explim, randfunc, params; 'rules' is this package's
    with pytest.warns(UserWarning, match="'rules'"):
        opts = chop_struct({"format": "fp8-e4m3", "rules": "correct"})
    assert vars(opts) == {"format": "fp8-e4m3"}
    x = np.linspace(-3, 3, 101)
    np.testing.assert_array_equal(chop(x, opts), chop(x, {"format": "fp8-e4m3"}))


_SIGNED_SPECS = ["%.3d", "%2.2d", "%5.3i", "%-6.3d|", "%+.4d", "% .2d", "%.0d"]
_UNSIGNED_SPECS = ["%.3u", "%8.5x", "%.4X", "%.4o", "%#.4x", "%-4.2x|"]


@pytest.mark.parametrize("spec, value", [(s, v) for s in _SIGNED_SPECS for v in (5, 1, -5, -123456, 123456, 0)]
                         + [(s, v) for s in _UNSIGNED_SPECS for v in (5, 1, 255, 123456, 0)])
def test_sprintf_integer_precision_pads_with_zeros_as_c_does(spec, value):
    # MATLAB's integer conversions follow C's printf: the precision is the least number of digits.
    # Python's % operator is C's here (C's %.0d of 0 is '', Python's '0': left out; negative
    # numbers only for the signed conversions, which C prints with a sign).
    if spec == "%.0d" and value == 0:
        return
    want = spec % value
    assert sprintf(spec, value) == want
    assert sprintf(spec, float(value)) == want  # a double holding an integer prints as that integer
    assert sprintf(spec, np.int64(value)) == want


def test_sprintf_integer_precision_ignores_the_zero_flag():
    # C: "For d, i, o, u, x and X conversions, if a precision is specified, the 0 flag is ignored"
    # (Python's % keeps it: '%05.3d' % 5 is '00005'); without a precision 0 pads as usual.
    assert sprintf("%05.3d", 5) == "%5.3d" % 5 == "  005"
    assert sprintf("%-05.3d|", -5) == "%-5.3d|" % -5
    assert sprintf("%05d", 5) == "%05d" % 5 == "00005"
