"""chop against the exact mpmath-based oracle of pychop_compat/oracle.py.

For every built-in format and three custom ones, subnormal on and off, explim 1
and 0, rounding modes 1-4, float64 inputs (and float32 inputs for formats
narrower than single), at least 10**5 inputs per format spread over the whole
range (see :func:`pychop_compat.validation.oracle.oracle_inputs`) are rounded by ``chop`` and compared exactly
with :func:`oracles.chop_rule_round` (NaN == NaN, sign of zero ignored, nothing
else), and outside the double-rounding band with :func:`oracles.ieee_round`.
The oracle itself is first checked against NumPy's float16/float32 casts, a
bfloat16 bit-pattern rounding, and mpmath's own rounding.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from mpmath import libmp

from conftest import assert_same
from pychop_compat import chop
from pychop_compat.validation.oracle import (FORMATS, FLOAT32_CASES, ORACLE_CASES, DATASETS, DATASET_IDS, ExactValues,
                                  FormatSpec, case_options, case_spec, chop_rule_round, double_bound,
                                  grid_neighbours, ieee_round, oracle_inputs, scalar_grid_round)
from pychop_compat.validation.oracle import SEED, _dtype_limits  # the generator's seed and dtype limits

@functools.lru_cache(maxsize=None)
def _dataset(case: str, dtype_name: str):
    x = oracle_inputs(case, dtype_name)
    x.setflags(write=False)
    return x, ExactValues(x)


# ----------------------------------------------------------------------------- comparison

def _double_rounding_band(ev: ExactValues, spec: FormatSpec, subnormal: int) -> np.ndarray:
    """Inputs where chop.m's round-to-nearest differs from IEEE rounding by design.

    subnormal = 1: xmins/2 < |x| <= xmins/2 * (1 + 2**-t).  These values have
    exponent emins - 1 < emins, so chop.m first rounds them to t bits at their
    own exponent, which gives exactly xmins/2 (the upper end is a tie and
    xmins/2 has an even significand); the underflow rule then needs
    |c| > xmins/2 and flushes to 0, while IEEE rounding gives xmins (the value
    is nearer xmins than 0).

    subnormal = 0: xmin/2 - xmins/2 <= |x| <= xmin/2.  chop.m rounds these on
    the subnormal grid (spacing xmins) even without subnormals, which gives
    xmin/2 (the lower end is a tie, xmin/2 = 2**(t-2) xmins is the even
    neighbour for t >= 3), and the rule |c| >= xmin/2 gives xmin; rounding
    directly to {0, xmin} gives 0 (|x| < xmin/2; the tie xmin/2 goes to the
    even 0).

    Only mode 1 has a band: directed rounding to the t-bit grid of the own
    exponent or to the subnormal grid and then to {0, min_rep} in the same
    direction is the same as rounding directly (the grids are nested), and
    overflow in chop.m (decided on x) coincides with IEEE overflow.
    """
    m = libmp.from_man_exp
    ax = np.abs(ev.x)
    if subnormal:
        lo = double_bound(m(1, spec.emins - 1), "floor")                     # exclusive
        hi = double_bound(m(2**spec.t + 1, spec.emins - 1 - spec.t), "floor")  # inclusive
        return (ax > lo) & (ax <= hi)
    lo = double_bound(m(2**(spec.t - 1) - 1, spec.emins - 1), "ceil")      # inclusive
    hi = double_bound(m(1, spec.emin - 1), "floor")                         # inclusive
    return (ax >= lo) & (ax <= hi)


# ----------------------------------------------------------------------------- the oracle itself

def _random_doubles(rng, n, lo, hi):
    return rng.choice([-1.0, 1.0], n) * np.ldexp(1.0 + rng.random(n), rng.integers(lo, hi + 1, n))


def _all_float16_and_midpoints():
    h = np.arange(0x7C00, dtype=np.uint16).view(np.float16).astype(np.float64)   # +0 ... 65504
    mids = (h[:-1] + h[1:]) / 2
    return np.concatenate([h, mids, np.nextafter(mids, 0), np.nextafter(mids, np.inf),
                           [65520.0, np.nextafter(65520.0, 0), 7e4]])


def test_oracle_ieee_matches_numpy_float16():
    rng = np.random.default_rng(SEED)
    x = np.concatenate([_all_float16_and_midpoints(), _random_doubles(rng, 100000, -30, 17)])
    x = np.concatenate([x, -x])
    for dtype in (np.float64, np.float32):
        xd = x.astype(dtype)
        with np.errstate(over="ignore"):
            want = xd.astype(np.float16).astype(dtype)
        assert_same(ieee_round(xd, 11, 15, 1, 1), want, xd, f"fp16 {dtype.__name__}")


def test_oracle_ieee_matches_numpy_float32():
    rng = np.random.default_rng(SEED + 1)
    x = _random_doubles(rng, 200000, -155, 130)
    with np.errstate(over="ignore"):
        want = x.astype(np.float32).astype(np.float64)
    assert_same(ieee_round(x, 24, 127, 1, 1), want, x, "fp32")


def test_oracle_ieee_matches_bfloat16_bit_rounding():
    # bfloat16 = upper half of a float32; round-to-nearest-even on the bit pattern
    # (a carry into the exponent field gives the next binade or inf) is correct rounding
    # with subnormals for float32 inputs.
    rng = np.random.default_rng(SEED + 2)
    with np.errstate(over="ignore"):
        x = _random_doubles(rng, 200000, -140, 130).astype(np.float32)
    bits = np.arange(2**16, dtype=np.uint32) << 16
    x = np.concatenate([x, bits.view(np.float32), (bits + 0x8000).view(np.float32)])
    x = x[np.isfinite(x)]
    b = x.view(np.uint32).astype(np.uint64)
    want = ((((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16).astype(np.uint32)).view(np.float32)
    assert_same(ieee_round(x, 8, 127, 1, 1), want, x, "bfloat16")


@pytest.mark.parametrize("case", list(ORACLE_CASES))
def test_oracle_grid_rounding_matches_mpmath_normalize(case):
    """The int64 grid rounding equals mpmath's own rounding (libmp.normalize)."""
    from pychop_compat.validation.oracle import _grid_exponent, _select    # internals, tested on purpose
    spec = case_spec(case)
    x, ev = _dataset(case, "float64")
    rng = np.random.default_rng(SEED + 3)
    idx = rng.choice(np.flatnonzero(ev.nonzero), 1500, replace=False)
    sub = ExactValues(x[idx])
    for kind in ("own", "ieee1", "ieee0", "chop"):
        q = _grid_exponent(sub, spec, kind)
        nb = grid_neighbours(sub, q)
        for mode in (1, 2, 3, 4):
            got = _select(sub, nb, mode)
            ok = np.isfinite(got)          # mpmath's to_float(strict) refuses overflow
            want = np.array([scalar_grid_round(float(v), int(k), mode)
                             for v, k in zip(sub.x[ok], q[ok])])
            assert_same(got[ok], want, sub.x[ok], f"{case} {kind} mode {mode}")


def test_oracle_thresholds_and_documented_examples():
    h = FORMATS["h"]
    assert (h.xmin, h.xmins, h.xmax) == (2.0**-14, 2.0**-24, 65504.0)
    assert double_bound(h.xboundary_mpf, "nearest") == 65520.0
    assert double_bound(FORMATS["d"].xboundary_mpf, "ceil") == np.inf
    assert double_bound(FORMATS["d"].xboundary_mpf, "floor") == np.finfo(np.float64).max
    assert double_bound(libmp.from_man_exp(1, -1075), "ceil") == 5e-324
    assert double_bound(libmp.from_man_exp(1, -1075), "floor") == 0.0
    assert (FORMATS["q43"].xmax, FORMATS["q52"].xmax) == (240.0, 57344.0)
    x = np.array([2.0**-25 * (1 + 2.0**-20)])
    assert chop_rule_round(x, 11, 15, 1, 1)[0] == 0.0          # double rounding: 0
    assert ieee_round(x, 11, 15, 1, 1)[0] == 2.0**-24          # IEEE: xmins
    x = np.array([2.0**-15 - 2.0**-25, 2.0**-15])                # xmin/2 - xmins/2, xmin/2
    assert np.all(chop_rule_round(x, 11, 15, 0, 1) == 2.0**-14)
    assert np.all(ieee_round(x, 11, 15, 0, 1) == 0.0)
    x = np.array([65519.99, 65520.0, -65520.0, 7e4, -7e4])
    assert list(chop_rule_round(x, 11, 15, 1, 1)) == [65504.0, np.inf, -np.inf, np.inf, -np.inf]
    assert list(chop_rule_round(x, 11, 15, 1, 2)) == [np.inf, np.inf, -65504.0, np.inf, -65504.0]
    assert list(chop_rule_round(x, 11, 15, 1, 3)) == [65504.0, 65504.0, -np.inf, 65504.0, -np.inf]
    assert list(chop_rule_round(x, 11, 15, 1, 4)) == [65504.0, 65504.0, -65504.0, 65504.0, -65504.0]
    assert list(chop_rule_round(x, 11, 15, 1, 1, explim=0)) == [65504.0, 65536.0, -65536.0, 70016.0, -70016.0]


@pytest.mark.parametrize("case,dtype_name", DATASETS, ids=DATASET_IDS)
def test_dataset_size_and_coverage(case, dtype_name):
    spec = case_spec(case)
    x, ev = _dataset(case, dtype_name)
    assert x.size >= 100_000 and x.dtype == np.dtype(dtype_name)
    assert np.isnan(x).any() and np.isposinf(x).any() and np.isneginf(x).any()
    e = ev.e[ev.nonzero]
    # values below xmins/4 where the dtype has them, and above 4 * xboundary where finite
    assert e.min() <= max(spec.emins - 3, _dtype_limits(x.dtype)[0])
    assert e.max() >= min(spec.emax + 2, _dtype_limits(x.dtype)[1])
    if spec.t + 1 <= _dtype_limits(x.dtype)[2]:
        ties = grid_neighbours(ev, ev.e + 1 - spec.t).cls == 2
        assert ties.sum() >= 20000


# ----------------------------------------------------------------------------- chop vs the oracles

def _sampled(switches: list, names: list) -> list:
    """(case, dtype_name, *switch, mode) for every dataset, switch setting and mode; each is a
    pass over 10^5 values, so the default profile runs every mode of one switch setting per
    dataset (the setting rotates across the datasets, so each one meets every mode), the other
    settings under -m slow."""
    params = []
    for k, ((case, dtype_name), dataset_id) in enumerate(zip(DATASETS, DATASET_IDS)):
        for j, (switch, name) in enumerate(zip(switches, names)):
            for mode in (1, 2, 3, 4):
                marks = [] if j == k % len(switches) else [pytest.mark.slow]
                params.append(pytest.param(case, dtype_name, *switch, mode, marks=marks,
                                           id=f"{dataset_id}-{name}-round{mode}"))
    return params


@pytest.mark.parametrize("case, dtype_name, explim, subnormal, mode",
                         _sampled([(1, 1), (1, 0), (0, 1), (0, 0)],
                                  ["explim1-sub1", "explim1-sub0", "explim0-sub1", "explim0-sub0"]))
def test_chop_equals_chop_rule_oracle(case, dtype_name, explim, subnormal, mode):
    spec = case_spec(case)
    x, ev = _dataset(case, dtype_name)
    want = chop_rule_round(ev, spec.t, spec.emax, subnormal, mode, explim)
    got = chop(x.copy(), case_options(case, mode, subnormal, explim))
    assert_same(got, want, x, f"{case} {dtype_name} explim={explim} subnormal={subnormal} round={mode}")


@pytest.mark.parametrize("case, dtype_name, subnormal, mode", _sampled([(1,), (0,)], ["sub1", "sub0"]))
def test_chop_equals_ieee_outside_double_rounding_band(case, dtype_name, subnormal, mode):
    """explim = 1: chop is IEEE rounding (with IEEE overflow) except in the band of
    :func:`_double_rounding_band` for mode 1, where it must differ for every input."""
    spec = case_spec(case)
    x, ev = _dataset(case, dtype_name)
    want = ieee_round(ev, spec.t, spec.emax, subnormal, mode)
    got = chop(x.copy(), case_options(case, mode, subnormal, 1))
    band = (_double_rounding_band(ev, spec, subnormal) if mode == 1
            else np.zeros(x.size, bool)).reshape(x.shape)
    ctx = f"{case} {dtype_name} subnormal={subnormal} round={mode}"
    assert_same(got[~band], want[~band], x[~band], ctx)
    # the excluded band is tight: there chop (double rounding) and IEEE always differ
    assert np.all(got[band] != want[band]), ctx
