"""Properties of the number formats (hypothesis): idempotence, monotonicity, sign symmetry,
error bounds."""

from __future__ import annotations

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra.numpy import arrays  # noqa: E402

from pychop_compat import block_quantize, fixed_point, int_quantize, mx_quantize  # noqa: E402
from pychop_compat.numbers import mx_element  # noqa: E402

FAST = settings(derandomize=True, database=None, max_examples=60, deadline=None)
reals = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False, allow_subnormal=True)
vectors = arrays(np.float64, st.integers(1, 70), elements=reals)
deterministic = st.sampled_from([1, 2, 3, 4, -1])
symmetric_modes = st.sampled_from([1, 4, -1])
mx_names = st.sampled_from(["e4m3", "e5m2", "e2m3", "e3m2", "e2m1", "int8"])


@FAST
@given(vectors, st.integers(1, 20), st.integers(-8, 12), deterministic, st.sampled_from(["saturate", "wrap"]))
def test_fixed_idempotent_monotone(x, wl, fl, mode, overflow):
    once = fixed_point(x, wl, fl, round=mode, overflow=overflow)
    np.testing.assert_array_equal(fixed_point(once, wl, fl, round=mode, overflow=overflow), once)
    if overflow == "saturate":
        order = np.argsort(x, kind="stable")
        assert (np.diff(once[order]) >= 0).all()


@FAST
@given(vectors, st.integers(2, 20), st.integers(-8, 12), symmetric_modes)
def test_fixed_sign_symmetry_and_error_bound(x, wl, fl, mode):
    step = 2.0 ** -fl
    inside = np.abs(x) <= (2 ** (wl - 1) - 1) * step
    out = fixed_point(x, wl, fl, round=mode)
    np.testing.assert_array_equal(fixed_point(-x[inside], wl, fl, round=mode), -out[inside])
    bound = step / 2 if mode in (1, -1) else step
    assert (np.abs(out[inside] - x[inside]) <= bound).all()


@FAST
@given(vectors, st.integers(2, 16), st.booleans(), deterministic)
def test_int_idempotent_monotone_bounded(x, bits, symmetric, mode):
    codes, scale, zp = int_quantize(x, bits, symmetric=symmetric, round=mode, return_codes=True)
    deq = int_quantize(x, bits, symmetric=symmetric, round=mode)
    if mode in (1, -1):
        # (q - zp) * scale is rounded to double: within a hair of a code, which nearest rounding
        # recovers; a directed mode may step off it (documented), so idempotence is for nearest.
        again = int_quantize(deq, bits, scale=scale, zero_point=zp, round=mode)
        np.testing.assert_array_equal(again, deq)
    order = np.argsort(x, kind="stable")
    assert (np.diff(codes[order]) >= 0).all()
    # Inside the range every value is within one step (half a step for nearest) plus the product's rounding.
    s = scale.item()
    bound = (s / 2 if mode in (1, -1) else s) + 4 * np.spacing(np.abs(x).max() + s)
    assert (np.abs(deq - x) <= bound).all()


@FAST
@given(vectors, st.integers(2, 16), symmetric_modes)
def test_int_symmetric_is_sign_symmetric(x, bits, mode):
    np.testing.assert_array_equal(int_quantize(-x, bits, round=mode), -int_quantize(x, bits, round=mode))


@FAST
@given(vectors, mx_names, st.sampled_from([1, 4, -1]), st.sampled_from([1, 8, 32]))
def test_mx_idempotent_symmetric_bounded(x, name, mode, block):
    once = mx_quantize(x, name, block_size=block, round=mode)
    np.testing.assert_array_equal(mx_quantize(once, name, block_size=block, round=mode), once)
    np.testing.assert_array_equal(mx_quantize(-x, name, block_size=block, round=mode), -once)
    scales, _ = mx_quantize(x, name, block_size=block, return_scales=True)
    X = np.repeat(scales, block)[: x.size]
    element = mx_element(name)
    if element.format is None:
        bound = X * 2.0 ** -6  # INT8: fixed point k 2^-6 with |V/X| < 2: one step at most
    else:
        # Half an ulp (or one, for toward zero) of the element, relative in the normal range
        # and absolute below it; saturation costs at most 2^(2-t) relative.
        t, emin = element.format.t, element.format.emin
        bound = X * np.maximum(np.abs(x) / X * 2.0 ** (2 - t), 2.0 ** (emin - t + 1))
    assert (np.abs(once - x) <= bound).all()


@FAST
@given(vectors, st.integers(1, 24), st.sampled_from([None, 1, 5, 32]), deterministic)
def test_bfp_idempotent_bounded(x, m, block, mode):
    once = block_quantize(x, m, block_size=block, round=mode)
    np.testing.assert_array_equal(block_quantize(once, m, block_size=block, round=mode), once)
    scales, _ = block_quantize(x, m, block_size=block, return_scales=True)
    step = (np.repeat(scales, block)[: x.size] if block else np.full(x.size, scales.item())) * 2.0 ** (1 - m)
    assert (np.abs(once - x) <= step).all()
    if mode in (1, 4, -1):
        np.testing.assert_array_equal(block_quantize(-x, m, block_size=block, round=mode), -once)


@FAST
@given(st.floats(0.01, 100), st.integers(0, 2 ** 31))
def test_stochastic_fixed_point_is_unbiased_on_average(value, seed):
    x = np.full(4000, value)
    out = fixed_point(x, 16, 2, round=5, rng=np.random.default_rng(seed))
    assert set(np.unique(out)) <= {np.floor(value * 4) / 4, np.ceil(value * 4) / 4}
    assert abs(out.mean() - value) <= 6 * 0.25 / np.sqrt(4000) + 1e-12
