"""Property-based tests of chop (Hypothesis, derandomized: CI is deterministic).

Representability is judged by the independent oracle (pychop_compat/oracle.py); the
neighbours used for stochastic rounding come from it as well.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

from pychop_compat import chop
from pychop_compat.validation.oracle import FORMATS, FormatSpec, is_representable, neighbours

# Derandomized, no example database, no deadline: the same examples on every run.
# The autouse fixture of conftest.py only clears chop's persistent options (every
# call here passes complete options), so sharing it across examples is harmless.
# 150 examples a property in the default profile; tests/test_fuzz.py's long profile takes thousands.
PROPS = settings(derandomize=True, database=None, deadline=None, max_examples=150,
                 suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
FEW = settings(PROPS, max_examples=40)

# (format, params): every built-in format and custom ones; float32 inputs only for
# formats that single precision holds (chop.m allows custom t <= 11 with single inputs).
FORMAT_CASES = [("q43", None), ("q52", None), ("b", None), ("h", None), ("s", None),
                ("d", None), ("c", (5, 3)), ("c", (10, 30)), ("c", (20, 300)),
                ("fp8-e4m3", None), ("bfloat16", None), ("half", None)]
F32_OK = {"q43", "q52", "b", "h", "s", "fp8-e4m3", "bfloat16", "half", (5, 3), (10, 30)}


def _spec(fmt, params) -> FormatSpec:
    return FormatSpec(*params) if params else FORMATS[fmt]


def _opts(fmt, params, mode, subnormal, explim=1, **extra):
    o = {"format": fmt, "round": mode, "subnormal": subnormal, "explim": explim, **extra}
    if params:
        o["params"] = list(params)
    return o


@st.composite
def setups(draw):
    """(fmt, params, spec, dtype, subnormal)."""
    fmt, params = draw(st.sampled_from(FORMAT_CASES))
    ok32 = (params if params else fmt) in F32_OK
    dtype = draw(st.sampled_from([np.float64, np.float32] if ok32 else [np.float64]))
    return fmt, params, _spec(fmt, params), dtype, draw(st.sampled_from([1, 0]))


def _ldexp(m: int, e: int) -> float:
    """m * 2**e as a double (any rounding is fine for an input; overflow gives inf)."""
    try:
        return math.ldexp(m, e)
    except OverflowError:
        return math.copysign(math.inf, m)


@st.composite
def value_arrays(draw, spec: FormatSpec, dtype, finite=False, within_xmax=False):
    """1-D arrays over the whole range of the format: random significands (full input
    precision, or t + 1 bits, which makes ties likely) at exponents from emins - 3 to
    emax + 2, critical points, generic floats, zeros and (unless finite) inf and NaN."""
    info = np.finfo(dtype)
    p = info.nmant + 1
    lo_e = max(spec.emins - 3, int(np.log2(float(info.smallest_subnormal))))
    hi_e = min(spec.emax + 2, int(info.maxexp) - 1)
    sign = st.sampled_from([-1.0, 1.0])
    full = st.builds(lambda s, m, e: _ldexp(s * m, e - p + 1), sign,
                     st.integers(2**(p - 1), 2**p - 1), st.integers(lo_e, hi_e))
    short = st.builds(lambda s, m, e: _ldexp(s * m, e - spec.t), sign,
                      st.integers(2**spec.t, 2**(spec.t + 1) - 1), st.integers(lo_e, hi_e))
    crit = st.builds(lambda s, v: s * v, sign, st.sampled_from(
        [0.0, spec.xmins / 4, spec.xmins / 2, spec.xmins, 1.5 * spec.xmins, spec.xmin / 2,
         spec.xmin, spec.xmax, float(info.max), float(info.smallest_subnormal)]))
    generic = st.floats(width=info.bits, allow_nan=not finite, allow_infinity=not finite)
    elem = st.one_of(full, full, short, crit, generic)
    values = draw(st.lists(elem, min_size=1, max_size=40))
    # a cluster: a value and its neighbours at steps of a quarter t-bit ulp, across
    # rounding boundaries and ties (for monotonicity and the underflow/overflow edges)
    base = draw(st.one_of(full, short, crit))
    if draw(st.booleans()) and math.isfinite(base):
        step = math.ldexp(1.0, math.frexp(base)[1] - 1 - spec.t - 2) if base else spec.xmins / 4
        values += [base + k * step for k in range(-8, 9)]
    if not finite:
        values += draw(st.lists(st.sampled_from([np.inf, -np.inf, np.nan]), max_size=2))
    with np.errstate(over="ignore"):
        x = np.array(values, dtype=np.float64).astype(dtype)
    if finite:
        x = x[np.isfinite(x)]
    if within_xmax:
        x = x[np.abs(x.astype(np.float64)) <= spec.xmax]
    return x if x.size else np.zeros(1, dtype)


def _call(x, options):
    c = chop(x.copy(), options)
    assert isinstance(c, np.ndarray) and c.dtype == x.dtype and c.shape == x.shape
    return c


# ----------------------------------------------------------------------------- deterministic modes

@PROPS
@given(data=st.data(), setup=setups(), mode=st.sampled_from([1, 2, 3, 4]))
def test_results_are_representable(data, setup, mode):
    fmt, params, spec, dtype, subnormal = setup
    x = data.draw(value_arrays(spec, dtype))
    c = _call(x, _opts(fmt, params, mode, subnormal))
    rep = is_representable(c, spec.t, spec.emax, subnormal)
    assert rep.all(), (x[~rep], c[~rep])
    assert np.array_equal(np.isnan(c), np.isnan(x))


@PROPS
@given(data=st.data(), setup=setups(), mode=st.sampled_from([1, 2, 3, 4]),
       explim=st.sampled_from([1, 0]))
def test_idempotent_and_monotone(data, setup, mode, explim):
    fmt, params, spec, dtype, subnormal = setup
    x = np.sort(data.draw(value_arrays(spec, dtype)))
    x = x[~np.isnan(x)]
    if not x.size:
        x = np.zeros(1, dtype)
    opts = _opts(fmt, params, mode, subnormal, explim)
    c = _call(x, opts)
    cc = _call(c, opts)
    assert np.array_equal(cc, c, equal_nan=True), "not idempotent"
    assert np.all(c[1:] >= c[:-1]), f"not monotone: x={x!r} c={c!r}"


@PROPS
@given(data=st.data(), setup=setups())
def test_directed_modes_bracket_x(data, setup):
    """For finite |x| <= xmax: round-down <= x <= round-up, round-to-nearest is one of
    the two, and |round-towards-zero| <= |x| (the latter for every finite x)."""
    fmt, params, spec, dtype, subnormal = setup
    x = data.draw(value_arrays(spec, dtype, finite=True))
    c = {m: _call(x, _opts(fmt, params, m, subnormal)).astype(np.float64) for m in (1, 2, 3, 4)}
    x64 = x.astype(np.float64)
    assert np.all(np.abs(c[4]) <= np.abs(x64))
    r = np.abs(x64) <= spec.xmax
    assert np.all(c[3][r] <= x64[r]) and np.all(x64[r] <= c[2][r])
    assert np.all((c[1][r] == c[2][r]) | (c[1][r] == c[3][r]))


# ----------------------------------------------------------------------------- stochastic modes
# Restricted to |x| <= xmax: for xmax < |x| < xboundary mode 6 may round up to
# 2**(emax+1), which chop.m (overflow to inf only from xboundary on) leaves as it is.

@PROPS
@given(data=st.data(), setup=setups(), mode=st.sampled_from([5, 6]), seed=st.integers(0, 2**32 - 1))
def test_stochastic_returns_a_neighbour(data, setup, mode, seed):
    fmt, params, spec, dtype, subnormal = setup
    x = data.draw(value_arrays(spec, dtype, finite=True, within_xmax=True))
    x = np.tile(x, 8)                           # several draws per value
    lower, upper = neighbours(x, spec.t, spec.emax, subnormal)
    rf = np.random.default_rng(seed).random
    c = _call(x, _opts(fmt, params, mode, subnormal, randfunc=rf))
    ok = (c == lower) | (c == upper)
    assert ok.all(), (x[~ok], c[~ok], lower[~ok], upper[~ok])
    exact = lower == upper                       # representable values are not changed
    assert np.array_equal(c[exact], x[exact])


N_DRAWS = 20000
DELTA = 1e-9


def _bernstein_eps(p: float, n: int = N_DRAWS, delta: float = DELTA) -> float:
    """Half-width e with P(|k/n - p| >= e) <= delta for k ~ Binomial(n, p).

    Bernstein's inequality for i.i.d. Bernoulli(p) variables gives
    P(|k/n - p| >= e) <= 2 exp(-n e**2 / (2 p (1 - p) + 2 e / 3)); solving for e:
    e = L/(3n) + sqrt(L**2/(9 n**2) + 2 L p (1 - p) / n) with L = ln(2/delta).  With
    delta = 1e-9, L = 21.4 and e is about 6.5 standard deviations sqrt(p(1-p)/n),
    plus a term L/(3n) that keeps the bound valid for p near 0 or 1, where the
    normal approximation behind a plain "6 sigma" rule fails.  A chance failure
    would need a 1e-9 event; the stream is seeded, so the test is deterministic.
    The uniform numbers are multiples of 2**-53, which moves P(rnd <= frac) by at
    most 2**-53: negligible.
    """
    L = math.log(2 / delta)
    return L / (3 * n) + math.sqrt(L * L / (9 * n * n) + 2 * L * p * (1 - p) / n)


@st.composite
def one_inexact_value(draw):
    """(fmt, params, spec, dtype, subnormal, x) with x between two representable numbers,
    in the normal range or, with subnormal = 1, in the subnormal range (where chop.m
    rounds on the subnormal grid, so the probabilities are those of the grid)."""
    # formats narrower than the input dtype (else every input is representable)
    fmt, params, spec, dtype, subnormal = draw(
        setups().filter(lambda s: s[2].t < np.finfo(s[3]).nmant + 1))
    x = draw(value_arrays(spec, dtype, finite=True, within_xmax=True))
    ax = np.abs(x.astype(np.float64))
    lo = spec.xmins if subnormal else spec.xmin
    lower, upper = neighbours(x, spec.t, spec.emax, subnormal)
    cand = np.flatnonzero((ax >= lo) & (lower != upper))
    if not cand.size:                           # fall back to a value of the grid's interior
        x = np.array([spec.xmin * (1 + 2.0**-(spec.t + 1) * 3)], dtype)
        cand = np.array([0])
    i = draw(st.sampled_from(list(cand)))
    return fmt, params, spec, dtype, subnormal, x[i:i + 1]


def _draw_fraction_up(case, mode, seed):
    fmt, params, spec, dtype, subnormal, x1 = case
    lower, upper = (float(v[0]) for v in neighbours(x1, spec.t, spec.emax, subnormal))
    x = np.repeat(x1, N_DRAWS)
    rf = np.random.default_rng(seed).random
    c = _call(x, _opts(fmt, params, mode, subnormal, randfunc=rf)).astype(np.float64)
    assert np.all((c == lower) | (c == upper))
    k = int(np.count_nonzero(c == upper))
    return float(x1[0]), lower, upper, k, c


@FEW
@given(case=one_inexact_value(), seed=st.integers(0, 2**32 - 1))
def test_mode5_mean_is_x(case, seed):
    """Mode 5 rounds to upper with probability p = (x - lower) / (upper - lower), so the
    mean of the draws, lower + (upper - lower) k/N, is x up to (upper - lower) * eps(p)."""
    x, lower, upper, k, c = _draw_fraction_up(case, 5, seed)
    p = (Fraction(x) - Fraction(lower)) / (Fraction(upper) - Fraction(lower))
    mean = Fraction(lower) + (Fraction(upper) - Fraction(lower)) * Fraction(k, N_DRAWS)
    assert mean == sum(map(Fraction, c.tolist())) / N_DRAWS        # exact mean of the draws
    bound = (Fraction(upper) - Fraction(lower)) * Fraction(_bernstein_eps(float(p)))
    assert abs(mean - Fraction(x)) <= bound, (x, lower, upper, k, float(p))


@FEW
@given(case=one_inexact_value(), seed=st.integers(0, 2**32 - 1))
def test_mode6_rounds_up_half_the_time(case, seed):
    x, lower, upper, k, _ = _draw_fraction_up(case, 6, seed)
    assert abs(k / N_DRAWS - 0.5) <= _bernstein_eps(0.5), (x, lower, upper, k)
