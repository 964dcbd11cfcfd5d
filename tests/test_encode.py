"""encode/decode against hardware casts: every code point of the 8- and 16-bit formats.

Oracles: NumPy's float16 and ml_dtypes' bfloat16, float8_e4m3 (IEEE-like,
max 240: chop's 'q43') and float8_e5m2 ('q52') interpret the same bits.
"""

from __future__ import annotations

import numpy as np
import pytest

from pychop_compat import chopped, decode, encode
from pychop_compat.arithmetic import bit_layout


def hardware_types():
    types = [("h", np.float16, np.uint16)]
    ml_dtypes = pytest.importorskip("ml_dtypes")
    types += [("b", ml_dtypes.bfloat16, np.uint16), ("q43", ml_dtypes.float8_e4m3, np.uint8),
              ("q52", ml_dtypes.float8_e5m2, np.uint8)]
    return types


@pytest.mark.parametrize("index", range(4))
def test_every_code_point_round_trips_against_hardware(index):
    types = hardware_types()
    fmt, hw, utype = types[index]
    codes = np.arange(2 ** (8 * np.dtype(utype).itemsize), dtype=np.uint64).astype(utype)
    with np.errstate(invalid="ignore"):  # signalling NaN codes
        want = codes.view(hw).astype(np.float64)
    got = decode(codes, fmt)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, want)  # NaN positions agree too
    assert np.array_equal(np.signbit(got), np.signbit(want))
    finite_or_inf = ~np.isnan(want)
    back = encode(want[finite_or_inf], fmt)
    assert back.dtype == utype
    np.testing.assert_array_equal(back, codes[finite_or_inf])
    nan_code = encode(np.array([np.nan]), fmt)
    assert np.isnan(nan_code.view(hw)[0])


def test_float32_sample_against_numpy():
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 2**32, 200000, dtype=np.uint64).astype(np.uint32)
    codes = np.concatenate([codes, np.array([0, 1, 0x7F800000, 0xFF800000, 0x80000001], np.uint32)])
    with np.errstate(invalid="ignore"):
        want = codes.view(np.float32).astype(np.float64)
    np.testing.assert_array_equal(decode(codes, "s"), want)
    ok = ~np.isnan(want)
    np.testing.assert_array_equal(encode(want[ok], "s"), codes[ok])


def test_chopped_arrays_export_their_codes():
    x = np.random.default_rng(1).standard_normal(1000) * 100
    c = chopped(x, "h")
    np.testing.assert_array_equal(encode(c), x.astype(np.float16).view(np.uint16))
    assert encode(chopped(1.0, "q52")) == 0x3C


def test_layouts_and_errors():
    assert bit_layout("h") == (1, 5, 10)
    assert bit_layout("b") == (1, 8, 7)
    assert bit_layout("q43") == (1, 4, 3)
    assert bit_layout({"format": "c", "params": [6, 31]}) == (1, 6, 5)
    with pytest.raises(ValueError, match="power of two"):
        bit_layout({"format": "c", "params": [6, 20]})
    with pytest.raises(ValueError, match="not representable"):
        encode([0.1], "h")
    with pytest.raises(ValueError, match="not representable"):
        encode([70000.0], "h")
    with pytest.raises(ValueError, match="codes"):
        decode([1 << 16], "h")
