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
    assert sprintf("%u", np.uint64(2**64 - 1)) == "18446744073709551615"
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
    # Python's % operator is C's here except for 0: C's %.0d prints no digit and %#x no 0x (Octave 7.3:
    # sprintf('%.0d|%#.4x', 0, 0) is '|0000'); negative numbers only for the signed conversions.
    want = spec % value if value else {"%.0d": "", "%#.4x": "0000"}.get(spec, spec % value)
    assert sprintf(spec, value) == want
    assert sprintf(spec, float(value)) == want  # a double holding an integer prints as that integer
    assert sprintf(spec, np.int64(value)) == want


def test_sprintf_integer_precision_ignores_the_zero_flag():
    # C: "For d, i, o, u, x and X conversions, if a precision is specified, the 0 flag is ignored"
    # (Python's % keeps it: '%05.3d' % 5 is '00005'); without a precision 0 pads as usual.
    assert sprintf("%05.3d", 5) == "%5.3d" % 5 == "  005"
    assert sprintf("%-05.3d|", -5) == "%-5.3d|" % -5
    assert sprintf("%05d", 5) == "%05d" % 5 == "00005"


def test_sprintf_integer_flags_follow_c_not_python():
    # C's printf, which MATLAB's and Octave's follow, where Python's % differs: precision 0 prints no digit
    # for 0 ('%.d' is precision 0 too), '#' gives %o a leading 0 (Python: '0o') and 0 no prefix, and the + and
    # space flags sign only %d and %i.  Octave 7.3:
    #   sprintf('%.0d|%.0x|%5.0d|%.d|%+.0d|% .0d|%#.0o', 0, 0, 0, 0, 0, 0, 0)  ->  '||     ||+| |0'
    #   sprintf('%#o|%#o|%#x|%#X|%#.3o|%-#8o|%#x', 8, 0, 0, 0, 8, 8, 255)       ->  '010|0|0|0|010|010     |0xff'
    #   sprintf('%+x|%+u|% x|%+o|%+X', 255, 5, 5, 8, 255)                       ->  'ff|5|5|10|FF'
    assert sprintf("%.0d|%.0x|%5.0d|%.d|%+.0d|% .0d|%#.0o", *[0] * 7) == "||     ||+| |0"
    assert sprintf("%#o|%#o|%#x|%#X|%#.3o|%-#8o|%#x", 8, 0, 0, 0, 8, 8, 255) == "010|0|0|0|010|010     |0xff"
    assert sprintf("%+x|%+u|% x|%+o|%+X", 255, 5, 5, 8, 255) == "ff|5|5|10|FF"
    assert sprintf("%.0d|%#o|%+x", 0.0, 8.0, 255.0) == "|010|ff"  # doubles holding integers: the same
    assert sprintf("%.0bx|%#to", 0.0, 0.5) == "|0" + format(struct.unpack(">I", struct.pack(">f", 0.5))[0], "o")
    # the length modifiers of MATLAB's '%ld' (MathWorks Answers 9850) change nothing; Octave 7.3:
    #   sprintf('%ld|%hd|%lx|%lu', 5, 5, 255, uint64(18446744073709551615))  ->  '5|5|ff|18446744073709551615'
    assert sprintf("%ld|%hd|%lx|%lu", 5, 5, 255, np.uint64(2**64 - 1)) == "5|5|ff|18446744073709551615"


def test_sprintf_integer_conversion_of_a_value_it_cannot_hold_uses_e():
    # MATLAB's sprintf doc: a conversion that does not fit the data is overridden with %e.  MathWorks Answers
    # 821305 shows it for negative values and %X: fprintf('%04X', int16(-10077)) prints '-1.007700e+04' and
    # int16(3436) prints '0D6C'; comp.soft-sys.matlab (1995): fprintf('%x', -11) prints -1.1e+01 with %e.
    # (Octave prints sprintf('%x', -1) as '-1' instead; this follows MATLAB.)
    assert sprintf("%04X|%04X", np.int16(-10077), np.int16(3436)) == "-1.007700e+04|0D6C"
    assert sprintf("%x|%o|%u|%X", -11, -8, -5.0, np.int64(-1)) == "|".join("%e" % v for v in (-11, -8, -5, -1))
    assert sprintf("%.0x|%5.3u|", -1, -5) == "-1e+00|-5.000e+00|"  # flags, width and precision kept, as %e
    assert sprintf("%d|%i", -5, np.int8(-5)) == "-5|-5"  # the signed conversions print negative integers
    # MATLAB R2015b (Stack Overflow 22494124): sprintf('%d', uint64(2^63)) is '9.223372e+18', beyond int64,
    # and sprintf('%u', uint64(2^63)) '9223372036854775808'; a double: sprintf('%u', (2^32-1)*(2^32-1)) is
    # '18446744065119617024'.  (Octave: '9.22337e+18' and the same digits.)
    assert sprintf("%d|%u", np.uint64(2**63), np.uint64(2**63)) == "9.223372e+18|9223372036854775808"
    assert sprintf("%u", float((2**32 - 1) * (2**32 - 1))) == str(int(float((2**32 - 1) ** 2))) == (
        "18446744065119617024")
    assert sprintf("%i|%d", np.uint64(2**63 - 1), -(2**63)) == f"{2**63 - 1}|{-(2**63)}"  # int64's range: digits
    assert sprintf("%d|%x", 2.0**63, 2.0**64) == f"{2.0**63:e}|{2.0**64:e}"  # beyond int64 / uint64


def test_sprintf_plus_flag_signs_nan():
    # Octave 7.3 (MATLAB's doc does not say): sprintf('%+f|%+5d|%-+6x|%+c', NaN, NaN, NaN, NaN)
    #   ->  '+NaN| +NaN|+NaN  |+NaN'
    assert sprintf("%+f|%+5d|%-+6x|%+c", *[np.nan] * 4) == "+NaN| +NaN|+NaN  |+NaN"
    assert sprintf("%+d|%+f|% d", np.inf, -np.inf, np.nan) == "+Inf|-Inf|NaN"
