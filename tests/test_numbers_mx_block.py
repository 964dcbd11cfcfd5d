"""MX formats and block floating point against the specification's rules written out here,
ml_dtypes element casts and exact rational arithmetic."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from pychop_compat import block_quantize, mx_quantize

from test_numbers_fixed import exact_round

ml_dtypes = pytest.importorskip("ml_dtypes")

# (element name, ml_dtypes type, emax_elem, largest magnitude): OCP MX v1.0, table of element types.
FP_ELEMENTS = [
    ("e4m3", ml_dtypes.float8_e4m3fn, 8, 448.0),
    ("e5m2", ml_dtypes.float8_e5m2, 15, 57344.0),
    ("e2m3", ml_dtypes.float6_e2m3fn, 2, 7.5),
    ("e3m2", ml_dtypes.float6_e3m2fn, 4, 28.0),
    ("e2m1", ml_dtypes.float4_e2m1fn, 2, 6.0),
]


def spec_scale_exponent(block, emax_elem):
    """Section 6.3: floor(log2(max|V|)) - emax_elem, with E8M0's range (-127 below; NaN above
    127 or for a NaN/Inf block, as the reference implementation does)."""
    amax = max(abs(v) for v in block)
    if not math.isfinite(amax):
        return None
    if amax == 0:
        return -127
    e = math.frexp(amax)[1] - 1 - emax_elem
    return None if e > 127 else max(e, -127)


def spec_mx(x, emax_elem, convert, block=32):
    """Dequantized MX values of the 1-D ``x`` by the specification's steps."""
    out = []
    for start in range(0, len(x), block):
        chunk = x[start:start + block]
        e = spec_scale_exponent(chunk, emax_elem)
        if e is None:
            out += [math.nan] * len(chunk)
            continue
        out += [convert(math.ldexp(v, -e)) * 2.0 ** e for v in chunk]
    return np.array(out)


def sample(rng, n=200):
    """Normal values at many scales, with exact zeros and wide blocks."""
    x = rng.standard_normal(n) * np.exp2(rng.integers(-20, 20, n))
    x[::17] = 0.0
    x[5] = 1e-300
    return x


@pytest.mark.parametrize("name, dtype, emax_elem, top", FP_ELEMENTS)
def test_mx_fp_against_spec_and_ml_dtypes(name, dtype, emax_elem, top):
    x = sample(np.random.default_rng(1))
    convert = lambda v: float(np.float64(np.clip(v, -top, top)).astype(dtype))  # noqa: E731 (saturating RNE cast)
    np.testing.assert_array_equal(mx_quantize(x, name), spec_mx(list(x), emax_elem, convert))
    scales, elements = mx_quantize(x, name, return_scales=True)
    assert scales.shape == (-(-x.size // 32),)
    np.testing.assert_array_equal(scales.astype(ml_dtypes.float8_e8m0fnu).astype(np.float64), scales)
    np.testing.assert_array_equal(elements.astype(dtype).astype(np.float64), elements)
    assert np.abs(elements).max() <= top


def test_mxint8_against_spec():
    x = sample(np.random.default_rng(2))

    def convert(v):  # INT8 element: two's complement k * 2^-6, nearest-even, clamped to +-127
        return min(max(exact_round(Fraction(v) * 64, 1), -127), 127) / 64

    np.testing.assert_array_equal(mx_quantize(x, "int8"), spec_mx(list(x), 0, convert))


def test_hand_worked_block():
    """A block worked by hand: max 100, floor(log2 100) = 6; E2M1 has emax 2, so X = 2^4 = 16;
    V/X = (0.0625, 0.01875, -0.3125, 6.25) rounds in E2M1 {0, 0.5, 1, 1.5, 2, 3, 4, 6} to
    (0, 0, -0.5, 6) (6.25 clamped to 6)."""
    scales, elements = mx_quantize([1.0, 0.3, -5.0, 100.0], "mxfp4", return_scales=True)
    assert scales.tolist() == [16.0] and elements.tolist() == [0.0, 0.0, -0.5, 6.0]


def test_special_blocks_and_axis():
    x = np.array([[np.nan, 1.0, 2.0, 3.0], [0.0, 0.0, 0.0, 0.0], [np.inf, 1.0, 1e39, 1.0]])
    scales, elements = mx_quantize(x, "e4m3", block_size=2, return_scales=True)
    assert scales.shape == (3, 2)
    assert np.isnan(scales[0, 0]) and scales[0, 1] == 2.0 ** (1 - 8)
    assert scales[1].tolist() == [2.0 ** -127] * 2
    # Inf: NaN scale; 1e39 (beyond float32, fine in E8M0): floor(log2 1e39) = 129, X = 2^(129 - 8)
    assert np.isnan(scales[2, 0]) and scales[2, 1] == 2.0 ** 121
    out = mx_quantize(x, "e4m3", block_size=2)
    assert np.isnan(out[0, :2]).all() and out[1].tolist() == [0.0] * 4
    # blocks along axis 0: columns
    y = np.arange(12.0).reshape(4, 3) ** 3
    cols = mx_quantize(y, "e2m1", block_size=4, axis=0)
    np.testing.assert_array_equal(cols, mx_quantize(y.T, "e2m1", block_size=4).T)


def test_shared_exponent_overflow_is_nan():
    big = 2.0 ** (127 + 8 + 1)  # floor(log2) - emax_elem = 128 > 127
    assert np.isnan(mx_quantize([big, 1.0], "e4m3")).all()
    assert mx_quantize([2.0 ** (127 + 8)], "e4m3")[0] == 2.0 ** (127 + 8)


@pytest.mark.parametrize("mode", [2, 3, 4, -1])
def test_mx_directed_modes_on_e2m1(mode):
    values = np.unique(np.arange(16, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float64))
    x = np.concatenate([[6.0], np.linspace(-6.5, 6.5, 105)])  # first element fixes X = 1
    got = mx_quantize(x, "e2m1", block_size=x.size, round=mode)
    for v, g in zip(x, got):
        if mode == 2:
            want = min([s for s in values if s >= v], default=6.0)
        elif mode == 3:
            want = max([s for s in values if s <= v], default=-6.0)
        elif mode == 4:
            want = math.copysign(max(s for s in values if s <= abs(v)), v)
        else:
            best = min(abs(s - v) for s in values)
            ties = [s for s in values if abs(s - v) == best]
            want = max(ties, key=abs)
        assert g == want, (v, g, want)


def test_mx_torch_keeps_type():
    torch = pytest.importorskip("torch")
    t = torch.linspace(-3, 3, 64, dtype=torch.float32).reshape(2, 32)
    out = mx_quantize(t, "e4m3")
    assert out.dtype == torch.float32 and out.shape == t.shape
    np.testing.assert_array_equal(out.numpy(), mx_quantize(t.numpy(), "e4m3"))
    scales, _ = mx_quantize(t, "e4m3", return_scales=True)
    assert isinstance(scales, torch.Tensor) and scales.shape == (2, 1)


def test_mx_bad_arguments():
    with pytest.raises(ValueError, match="MX element"):
        mx_quantize([1.0], "e4m4")
    with pytest.raises(ValueError, match="block_size"):
        mx_quantize([1.0], "e4m3", block_size=0)
    with pytest.raises(ValueError, match="axis"):
        mx_quantize([1.0], "e4m3", axis=2)


# --- block floating point ----------------------------------------------------------------------

def spec_bfp(x, m, block, mode):
    out = []
    for start in range(0, len(x), block):
        chunk = x[start:start + block]
        amax = max(abs(v) for v in chunk)
        if amax == 0:
            out += [0.0 * v for v in chunk]
            continue
        step = Fraction(2) ** (math.frexp(amax)[1] - 1 - m + 1)
        top = 2 ** m - 1
        out += [math.copysign(float(min(max(exact_round(Fraction(v) / step, mode), -top), top) * step), v)
                for v in chunk]
    return np.array(out)


@pytest.mark.parametrize("m", [1, 2, 3, 5, 10])
@pytest.mark.parametrize("block", [1, 4, 32])
def test_bfp_exhaustive_against_fractions(m, block):
    rng = np.random.default_rng(m * 100 + block)
    x = np.concatenate([np.arange(-40, 41) / 8.0, sample(rng, 64)])
    for mode in (1, 2, 3, 4, -1):
        got = block_quantize(x, m, block_size=block, round=mode)
        np.testing.assert_array_equal(got, spec_bfp(list(x), m, block, mode), err_msg=f"mode {mode}")


def test_bfp_whole_tensor_and_scales():
    x = np.array([[0.5, -3.0], [0.1, 1.0]])
    got = block_quantize(x, 4)
    np.testing.assert_array_equal(got, spec_bfp(list(x.ravel()), 4, 4, 1).reshape(2, 2))
    scales, elements = block_quantize(x, 4, return_scales=True)
    assert scales.tolist() == [[2.0]] and np.array_equal(scales * elements, got)
    assert np.isnan(block_quantize([1.0, np.nan, 2.0], 4, block_size=2)[:2]).all()
    assert block_quantize([1.0, np.nan, 2.0], 4, block_size=2)[2] == 2.0


# --- shapes, dtypes and libraries shared by the four functions ---------------------------------

from pychop_compat import fixed_point, int_quantize  # noqa: E402

CALLS = [
    ("fixed", lambda x: fixed_point(x, 8, 4)),
    ("int", lambda x: int_quantize(x, 8)),
    ("int-affine", lambda x: int_quantize(x, 8, symmetric=False)),
    ("bfp-blocks", lambda x: block_quantize(x, 4, block_size=4)),
    ("bfp-tensor", lambda x: block_quantize(x, 4)),
    ("mx", lambda x: mx_quantize(x, "e4m3")),
]


@pytest.mark.parametrize("name, call", CALLS)
def test_empty_zero_d_and_scalars(name, call):
    for x in (np.zeros(0), np.zeros((0, 3))):
        out = call(x)
        assert out.shape == x.shape and out.dtype == np.float64
    assert isinstance(call(np.float32(1.3)), np.float32)
    assert isinstance(call(2.5), np.float64)
    assert call(np.array(1.7)).shape == ()
    torch = pytest.importorskip("torch")
    assert call(torch.tensor(1.5, dtype=torch.bfloat16)).shape == ()
    assert call(torch.zeros(0, 2)).shape == (0, 2)


@pytest.mark.parametrize("name, call", CALLS)
def test_torch_half_results_are_rounded_once(name, call):
    """float16/bfloat16 tensors get the float64 result rounded once (ml_dtypes' cast, NumPy's
    float16 cast), not torch's float64 -> float32 -> bfloat16 double rounding."""
    torch = pytest.importorskip("torch")
    x = torch.randn(256, generator=torch.Generator().manual_seed(1)) * 3
    for dtype, oracle in ((torch.bfloat16, ml_dtypes.bfloat16), (torch.float16, np.float16)):
        t = x.to(dtype)
        got = call(t)
        assert got.dtype == dtype and got.shape == t.shape
        want = np.asarray(call(t.double().numpy())).astype(oracle).astype(np.float32)
        np.testing.assert_array_equal(got.float().numpy(), want)


def test_mxint8_is_bfp_with_seven_bits_in_blocks_of_32():
    x = sample(np.random.default_rng(4), 256)
    np.testing.assert_array_equal(mx_quantize(x, "int8"), block_quantize(x, 7, block_size=32))


def _element_values(dtype):
    """Every finite value of an ml_dtypes element type, sorted (from all its bit patterns)."""
    bits = 8 if np.dtype(dtype).itemsize == 1 else 16
    codes = np.arange(2 ** bits, dtype=np.uint8 if bits == 8 else np.uint16)
    values = codes.view(dtype).astype(np.float64)
    return np.unique(values[np.isfinite(values)])


@pytest.mark.parametrize("name, dtype, emax_elem, top", FP_ELEMENTS)
def test_mx_every_element_midpoint_and_quarter(name, dtype, emax_elem, top):
    """X = 1 (the block's first value is 2^emax_elem); every element value, every midpoint
    between neighbours (ties to even) and the quarter points, against ml_dtypes' cast."""
    values = _element_values(dtype)
    mids = (values[:-1] + values[1:]) / 2
    quarters = np.concatenate([(3 * values[:-1] + values[1:]) / 4, (values[:-1] + 3 * values[1:]) / 4])
    x = np.concatenate([[2.0 ** emax_elem], values, mids, quarters])
    scales, elements = mx_quantize(x, name, block_size=x.size, return_scales=True)
    assert scales.tolist() == [1.0]
    want = np.clip(x, -top, top).astype(dtype).astype(np.float64)
    np.testing.assert_array_equal(elements, want)


@pytest.mark.parametrize("mode", [5, 6])
def test_mx_stochastic_draws_in_column_major_order(mode):
    values = _element_values(ml_dtypes.float4_e2m1fn)
    x = np.array([[6.0, 0.3, -2.6, 5.0], [1.0, -0.7, 4.5, 0.0]])
    got = mx_quantize(x, "e2m1", block_size=4, axis=-1, round=mode, rng=np.random.default_rng(11))
    # Row 0: max 6 -> X = 1; row 1: max 4.5 -> X = 2^(2 - 2) = 1.  Draws: inexact elements,
    # column-major order, magnitude rounds up iff u <= its position between the neighbours.
    u = iter(np.random.default_rng(11).random(x.size))
    want = np.empty_like(x)
    for j in range(x.shape[1]):
        for i in range(x.shape[0]):
            a = abs(x[i, j])
            lo, hi = values[values <= a].max(), values[values >= a].min()
            if lo == hi:
                want[i, j] = x[i, j]
                continue
            r = (a - lo) / (hi - lo)
            up = next(u) <= (r if mode == 5 else 0.5)
            want[i, j] = np.copysign(hi if up else lo, x[i, j])
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name, call", CALLS)
def test_ndarray_subclasses_are_refused_not_flattened(name, call):
    with pytest.raises(TypeError, match="ndarray subclass"):
        call(np.ma.masked_array([1.0, 2.0], mask=[False, True]))
    with pytest.raises(TypeError, match="ndarray subclass"):
        call(np.asmatrix([[1.0, 2.0]]))


def test_a_block_longer_than_the_axis_is_the_whole_row():
    """block_size may exceed the axis (the last block is shorter): one block per row, as with
    block_size equal to the axis.  0.9.x allocated block_size numbers per row (MemoryError)."""
    x = np.array([[1.0, 0.3, -5.0, 100.0], [2.5, -0.7, 0.1, 3.0]])
    convert = lambda v: float(np.float64(np.clip(v, -6.0, 6.0)).astype(ml_dtypes.float4_e2m1fn))  # noqa: E731
    for size in (5, 2 ** 50):
        want = np.array([spec_mx(list(row), 2, convert, block=4) for row in x])
        np.testing.assert_array_equal(mx_quantize(x, "e2m1", block_size=size), want)
        np.testing.assert_array_equal(mx_quantize(x.T, "e2m1", block_size=size, axis=0), want.T)
        scales, _ = mx_quantize(x, "e2m1", block_size=size, return_scales=True)
        assert scales.shape == (2, 1)
        want = np.array([spec_bfp(list(row), 3, 4, 1) for row in x])
        np.testing.assert_array_equal(block_quantize(x, 3, block_size=size), want)
        assert mx_quantize(np.zeros((0, 3)), "e2m1", block_size=size).shape == (0, 3)


@pytest.mark.parametrize("name, call", CALLS)
def test_wider_floats_are_refused_not_rounded_twice(name, call):
    """np.longdouble input was read as float64 (one rounding) and quantized (another), labelled
    float128: fixed_point(0.25 + 2^-60, 8, 1) gave 0 for 0.5.  Refused, as chop refuses it."""
    swapped = np.array([0.3, -2.5, 7.0], dtype=">f8")  # float64 in either byte order is not wider
    np.testing.assert_array_equal(call(swapped), call(swapped.astype(np.float64)))
    if np.finfo(np.longdouble).nmant <= np.finfo(np.float64).nmant:
        pytest.skip("np.longdouble is float64 on this platform")
    x = np.array([0.25, 1.0], dtype=np.longdouble) + np.longdouble(2) ** -60
    before = x.copy()
    for value in (x, x[0]):
        with pytest.raises(TypeError, match=str(x.dtype)):
            call(value)
    assert np.array_equal(x, before)


FLOAT8 = ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"]


def _nearest(values, v):
    """The nearest of the sorted non-negative ``values`` to ``|v|`` (exact; a tie goes to the even
    index, which is the even code), with the sign of ``v``."""
    a = Fraction(abs(v))
    best = min(range(len(values)), key=lambda i: (abs(Fraction(values[i]) - a), i % 2))
    return math.copysign(values[best], v)


@pytest.mark.parametrize("dtype_name", FLOAT8)
def test_torch_float8_results_are_rounded_once(dtype_name):
    """torch casts float64 to float8 through float32 (two roundings): a float64 result just above a
    midpoint of the format came back rounded down (1.0625 + 2^-40 in E4M3: 1.0, not 1.125)."""
    torch = pytest.importorskip("torch")
    dtype = getattr(torch, dtype_name)
    with np.errstate(invalid="ignore"):  # (fnuz's NaN pattern)
        codes = torch.arange(256, dtype=torch.uint8).view(dtype).float().numpy().astype(np.float64)  # exact
    values = np.unique(np.abs(codes[np.isfinite(codes)]))
    inside = values[(values >= 0.75) & (values < 2.0)]
    mids = (inside[:-1] + inside[1:]) / 2
    scale = np.concatenate([mids * (1 + 2.0 ** -40), mids * (1 - 2.0 ** -40)])
    # 1 / scale rounds to the code 1, so each result is its scale, exactly, before the cast
    got = int_quantize(torch.ones(scale.size).to(dtype), 4, scale=scale)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got.float().numpy(), [_nearest(values, s) for s in scale])
    # the other functions share the cast back
    x = (torch.randn(64, generator=torch.Generator().manual_seed(2)) * 3).to(dtype)
    for _, call in CALLS:
        got = call(x)
        assert got.dtype == dtype and got.shape == x.shape
        np.testing.assert_array_equal(got.float().numpy(), [_nearest(values, v) for v in call(x.double().numpy())])
