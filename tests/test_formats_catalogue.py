"""The format model and catalogue, chop on catalogue names, the ``extended`` rule, and the
extended semantics on every engine (random bits, round to odd, flips of encoding bits)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from bits import assert_bits_equal

from pychop_compat import chop, float_params
from pychop_compat.formats import (CATALOGUE, CHOP_FORMAT_NAMES, CUSTOM_NAMES, Format, catalogue_format,
                                   custom_format, lookup_format)
from pychop_compat.matlab.options import DEFAULT_SPEC, resolve
from pychop_compat.rounding import make_spec, round_to_format


def test_public_names_keep_working():
    assert CUSTOM_NAMES == ("c", "custom")
    assert set(CHOP_FORMAT_NAMES) >= {"q43", "fp8-e4m3", "q52", "fp8-e5m2", "b", "bfloat16", "h", "half",
                                      "fp16", "s", "single", "fp32", "d", "double", "fp64", "c", "custom"}
    f = Format(11, 15)
    assert (f.t, f.emax, f.emin, f.emins, f.xmin, f.xmins, f.xmax, f.xboundary, f.unit_roundoff, f.params) == (
        11, 15, -14, -24, 2.0 ** -14, 2.0 ** -24, 65504.0, 65520.0, 2.0 ** -11, [11, 15])
    assert custom_format(5, 20) == Format(5, 20) and custom_format(5, 20).name == "c"


@pytest.mark.parametrize("fmt", CATALOGUE, ids=lambda f: f.name)
def test_derived_values_from_the_primary_parameters(fmt):
    """xmax is the top significand in the top binade; the overflow threshold is half a step above."""
    if fmt.emax > 1023:
        assert fmt.xmax == math.inf
        return
    top = (1 << fmt.t) - 1 - (fmt.encoding == "fn")
    assert Fraction(fmt.xmax) == top * Fraction(2) ** (fmt.emax - fmt.t + 1)
    if fmt.t < 53:
        assert Fraction(fmt.xboundary) == Fraction(fmt.xmax) + Fraction(2) ** (fmt.emax - fmt.t)
    assert fmt.xmin == 2.0 ** fmt.emin
    u, xmins, xmin, xmax, p, emins, emin, emax = float_params(fmt.name)
    assert (xmins, xmin, xmax, p, emin, emax) == (fmt.xmins, fmt.xmin, fmt.xmax, fmt.t, fmt.emin, fmt.emax)


def test_every_name_reported_by_float_params():
    for fmt in CATALOGUE:
        for name in fmt.names:
            assert float_params(name)[4] == fmt.t


@pytest.mark.parametrize("spelling,chop_name", [
    ("bf16", "b"), ("half", "h"), ("binary16", "h"), ("float16", "h"), ("fp32", "s"), ("binary32", "s"),
    ("binary64", "d"), ("float8_e4m3", "q43"), ("float8_e5m2", "q52"), ("E5M2", "q52")])
def test_new_spellings_of_chops_formats_are_chops_formats(spelling, chop_name):
    x = np.random.default_rng(3).standard_normal(2000) * np.exp2(np.random.default_rng(4).integers(-150, 150, 2000))
    assert lookup_format(spelling) == lookup_format(chop_name)
    # The spelling chooses the rule (docs/formats.rst): chop.m's algorithm for chop.m's names,
    # one correct rounding for the others; options.rules overrides it either way.
    subnormal = resolve({"format": chop_name}, None).spec.subnormal  # 'bf16' keeps them, 'b' does not
    assert np.array_equal(chop(x, {"format": spelling, "rules": "chop", "subnormal": subnormal}),
                          chop(x, {"format": chop_name}), equal_nan=True)
    own = resolve({"format": spelling}, None).spec.subnormal
    assert np.array_equal(chop(x, {"format": spelling}),
                          chop(x, {"format": chop_name, "rules": "correct", "subnormal": own}), equal_nan=True)
    assert not resolve({"format": spelling, "rules": "chop"}, None).spec.extended


def test_bf16_keeps_the_formats_subnormals_and_bfloat16_chop_ms_default():
    assert resolve({"format": "bf16"}, None).spec.subnormal == 1
    assert resolve({"format": "bfloat16"}, None).spec.subnormal == 0


def test_tf32_is_fp16_precision_with_singles_range():
    """In fp16's normal range (below its top binade) both keep 11 bits: the same results;
    beyond it tf32 still rounds to 11 bits where fp16 overflows."""
    x = np.random.default_rng(5).uniform(2.0 ** -14, 2.0 ** 15, 5000)
    assert np.array_equal(chop(x, {"format": "tf32"}), chop(x, {"format": "h"}))
    assert chop(1e30, {"format": "tf32"}) == exact_round(1e30, Format(11, 127), 1) != math.inf


def test_unknown_and_ambiguous_names():
    with pytest.raises(ValueError, match="Known formats:.*'float8_e4m3fn'"):
        chop(1.0, {"format": "fp7"})
    with pytest.raises(ValueError, match="three different formats"):
        chop(1.0, {"format": "E4M3"})
    with pytest.raises(ValueError, match="more precision than double"):
        chop(1.0, {"format": "quadruple"})
    with pytest.raises(ValueError, match="Unrecognized precision"):
        float_params("fp7")


def test_extended_rule():
    assert not DEFAULT_SPEC.spec.extended
    for name in CHOP_FORMAT_NAMES[:-2]:
        for mode, sub, flip, explim in itertools.product(range(1, 7), (0, 1), (0, 1), (0, 1)):
            spec = resolve({"format": name, "round": mode, "subnormal": sub, "flip": flip, "explim": explim}, None).spec
            assert not spec.extended
    assert not resolve({"format": "c", "params": [5, 20]}, None).spec.extended
    for name in ("float8_e4m3fn", "float8_e4m3fnuz", "float6_e2m3fn", "float4_e2m1fn", "float8_e8m0fnu"):
        assert resolve({"format": name}, None).spec.extended
    base = make_spec("h", rules="chop")
    assert not base.extended
    from dataclasses import replace
    for change in (dict(round=7), dict(round=-1), dict(round=0), dict(round=8), dict(saturation=True),
                   dict(infinity=False), dict(range_rules="cpfloat"), dict(random_bits=8),
                   dict(flip_scope="encoding"), dict(fmt=Format(11, 15, emin=-10))):
        assert replace(base, **change).extended, change


def test_chop_on_ocp_formats_overflow_by_the_formats_encoding():
    x = np.array([500.0, -1e6, np.inf, -np.inf, np.nan, -0.0, 464.0, 464.5])
    e4m3 = chop(x, {"format": "float8_e4m3fn"})  # no Inf: overflow gives NaN; 464 is a tie to even 448
    assert np.isnan(e4m3[:5]).all() and e4m3[6] == 448 and np.isnan(e4m3[7])
    fp4 = chop(x, {"format": "float4_e2m1fn"})  # no Inf, no NaN: saturation
    assert fp4[:4].tolist() == [6.0, -6.0, 6.0, -6.0]
    fnuz = chop(np.array([-0.0, -1e-30]), {"format": "float8_e4m3fnuz"})
    assert not np.signbit(fnuz).any()
    for mode in (2, 3, 4):
        r = chop(np.array([1e6, -1e6]), {"format": "float8_e4m3fn", "round": mode})
        assert np.isnan(r).sum() == {2: 1, 3: 1, 4: 0}[mode]


def test_engines_agree_on_extended_specs():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(6).standard_normal((40, 30)) * 50
    before = x.copy()
    for opts in ({"format": "float8_e4m3fn"}, {"format": "float4_e2m1fn", "round": 3},
                 {"format": "float8_e5m2fnuz", "round": 5}):
        from pychop_compat import rng
        rng(1)
        want = chop(x, opts)
        rng(1)
        got = chop(torch.from_numpy(x), opts)
        assert isinstance(got, torch.Tensor) and got.dtype == torch.float64
        assert np.array_equal(got.numpy(), want, equal_nan=True), opts
        half = chop(torch.from_numpy(x).to(torch.float16), opts)
        assert half.dtype == torch.float16
    assert np.array_equal(x, before)
    y = round_to_format(torch.from_numpy(x.astype(np.float32)), "float4_e2m1fn", 7)
    assert np.array_equal(y.numpy(), round_to_format(x.astype(np.float32), "float4_e2m1fn", 7))


def test_python_float_takes_the_extended_path():
    assert math.isnan(chop(1000.0, {"format": "float8_e4m3fn"}))
    assert chop(1000.0, {"format": "float4_e2m1fn"}) == 6.0


# --- new modes against exact rules (no corpus for OCP formats in these modes) ---------------------

def exact_round(x: float, fmt: Format, mode: int) -> float:
    """Round x to fmt's grid by mode (1, -1, 0, 7), subnormals on, no overflow (x within range)."""
    a = Fraction(abs(x))
    if a == 0:
        return x
    e = math.frexp(abs(x))[1] - 1
    unit = Fraction(2) ** (max(e, fmt.emin) - fmt.t + 1)
    n = a / unit
    low = n.numerator // n.denominator
    rest = n - low
    if mode == 1:
        m = low + (rest > Fraction(1, 2) or (rest == Fraction(1, 2) and low % 2 == 1))
    elif mode == -1:
        m = low + (rest >= Fraction(1, 2))
    elif mode == 0:
        m = low + (rest > Fraction(1, 2))
    else:
        m = low + (rest > 0 and low % 2 == 0)
    return math.copysign(float(m * unit), x)


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float6_e3m2fn", "float4_e2m1fn", "h"])
@pytest.mark.parametrize("mode", [-1, 0, 7])
def test_new_modes_against_exact_rounding(name, mode):
    fmt = catalogue_format(name)
    gen = np.random.default_rng(7)
    x = gen.uniform(-1, 1, 3000) * fmt.xmax * 0.9
    grid = np.array([exact_round(v, fmt, 1) for v in x])  # also ties: midpoints of the grid
    x = np.concatenate([x, grid * (1 + 2.0 ** -(fmt.t + 1))])
    want = np.array([exact_round(v, fmt, mode) for v in x.tolist()])
    got = round_to_format(x, fmt, mode, saturation=True)
    assert np.array_equal(got, want)


def test_limited_random_bits_round_up_with_the_truncated_fraction():
    """With r random bits, a dropped fraction f rounds up iff floor(u 2^r) < floor(f 2^r)."""
    r = 3
    draws = np.linspace(0.01, 0.99, 7)
    fractions = np.arange(1, 16) / 16  # dropped fraction of one ulp of fp16 at 1
    x = 1 + fractions * 2.0 ** -10
    for u in draws:
        constant = lambda n, u=u: np.full(n, u)  # noqa: E731
        spec = make_spec("h", 5, rules="chop", random_bits=r)
        got = round_to_format(x, spec, randfunc=constant)
        up = np.floor(u * 2 ** r) < np.floor(fractions * 2 ** r)
        assert np.array_equal(got, 1 + up * 2.0 ** -10), u
        full = make_spec("h", 5, rules="chop")
        assert np.array_equal(round_to_format(x, full, randfunc=constant), 1 + (u <= fractions) * 2.0 ** -10)


def test_flip_any_bit_of_the_encoding_changes_exactly_one_bit():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    from pychop_compat import clear_cpfloat, cpfloat

    clear_cpfloat()  # cpfloat keeps fields from earlier calls: start from its defaults
    x = np.random.default_rng(8).uniform(-400, 400, 4000)
    rounded = cpfloat(x, {"format": "float8_e4m3fn", "round": 1, "flip": 0})
    flipped = cpfloat(x, {"format": "float8_e4m3fn", "flip": 2, "p": 1})
    codes = rounded.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    new = flipped.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    finite = ~np.isnan(flipped)
    changed = np.unpackbits((codes ^ new)[finite][:, None], axis=1).sum(axis=1)
    assert (changed == 1).all()
    assert {int(b) for b in np.log2((codes ^ new)[finite])} == set(range(8))  # every bit is hit
    fraction_only = cpfloat(x, {"format": "float8_e4m3fn", "flip": 1, "p": 1})
    diff = rounded.astype(ml_dtypes.float8_e4m3fn).view(np.uint8) ^ \
        fraction_only.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    assert set(np.unique(diff).tolist()) == {1, 2, 4}


def test_chop_flips_on_ocp_e4m3_never_give_values_beyond_448():
    """A flipped fraction bit of 448 = 1.110b * 2^8 gives 1.111b * 2^8, OCP E4M3's NaN pattern."""
    from pychop_compat import rng
    rng(2)
    y = chop(np.full(400, 448.0), {"format": "float8_e4m3fn", "flip": 1, "p": 1})
    assert np.nanmax(np.abs(y)) <= 448 and np.isnan(y).any()
    assert set(np.unique(y[~np.isnan(y)]).tolist()) == {320.0, 384.0}  # 1.010b and 1.100b times 2^8


def test_stochastic_modes_with_cpfloats_rules_against_exact_rules():
    """Modes 5 and 6 with CPFloat's rules: one draw per inexact finite element, in order; mode 5
    rounds the magnitude up iff u <= f (the dropped fraction), mode 6 iff u <= 1/2.  Beyond xmax,
    CPFloat's rule (src/cpfloat_template.h at commit 3583976, RS_PROP_SCALAR and RS_EQUI_SCALAR):
    mode 5 overflows to Inf from xbnd = xmax + ulp/2 on, and below it iff u <= (|x| - xmax) / (xbnd -
    xmax), else gives xmax; mode 6 takes a draw for every finite |x| > xmax, Inf iff u <= 1/2."""
    fmt = Format(4, 3, emin=-2)
    gen = np.random.default_rng(9)
    x = np.concatenate([gen.uniform(-20, 20, 500), [0.0, 2.0, np.inf, -np.inf, np.nan, 15.9]])
    for mode in (5, 6):
        draws = gen.uniform(size=x.size)
        taken = []

        def randfunc(n, draws=draws, taken=taken):
            taken.append(n)
            return draws[:n]

        got = round_to_format(x, make_spec(fmt, mode), randfunc=randfunc)
        assert len(taken) == 1
        want, k = [], 0
        for v in x.tolist():
            if not math.isfinite(v):
                want.append(v)
                continue
            a = Fraction(abs(v))
            e = math.frexp(abs(v))[1] - 1 if v else 0
            unit = Fraction(2) ** (max(e, fmt.emin) - fmt.t + 1)
            n = a / unit
            low = n.numerator // n.denominator
            frac = n - low
            up = False
            xmax, xbnd = Fraction(fmt.xmax), Fraction(fmt.xboundary)
            if frac or (a > xmax and mode == 6):
                u = draws[k]
                k += 1
                up = u <= (frac if mode == 5 else 0.5)
            value = float((low + up) * unit)
            if a >= xbnd and mode == 5:
                value = math.inf
            elif a > xmax:
                over = u <= (a - xmax) / (xbnd - xmax) if mode == 5 else up
                value = math.inf if over else fmt.xmax
            want.append(math.copysign(value, v))
        assert taken == [k]
        assert np.array_equal(got, np.array(want), equal_nan=True)


# --- fast engines against the reference, on the same random numbers ----------------------------

def _mixed_inputs(dtype, n=3000, seed=10):
    gen = np.random.default_rng(seed)
    kind = np.uint32 if dtype == np.float32 else np.uint64
    patterns = gen.integers(0, np.iinfo(kind).max, n, dtype=kind, endpoint=True).view(dtype)
    scaled = (gen.standard_normal(n) * np.exp2(gen.integers(-20, 12, n))).astype(dtype)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 448, 464, -464, 480, 6, 7, 0.25], dtype)
    return np.concatenate([patterns, scaled, special])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2fnuz", "float6_e3m2fn", "float4_e2m1fn"])
def test_chop_rules_fast_engine_equals_reference(name, dtype):
    """numpy_fast (taught emin != 1 - emax) + encoding equals chop.m's reference algorithm +
    encoding, bit for bit, with the same MATLAB stream draws (stochastic modes and flips)."""
    from pychop_compat import rng
    from pychop_compat.engines.dispatch import round_array
    from pychop_compat.random.sources import MATLAB_STREAM

    x = _mixed_inputs(dtype).reshape(-1, 4, order="F")
    for mode, sub, flip, explim in itertools.product(range(1, 7), (0, 1), (0, 1), (0, 1)):
        spec = resolve({"format": name, "round": mode, "subnormal": sub, "flip": flip, "explim": explim},
                       None, "single" if dtype == np.float32 else "double").spec
        rng(5)
        fast = round_array(x, spec, MATLAB_STREAM)
        after_fast = np.asarray(__import__("pychop_compat").rand(1, 1))
        rng(5)
        ref = round_array(x, spec, MATLAB_STREAM, kernel="reference")
        after_ref = np.asarray(__import__("pychop_compat").rand(1, 1))
        assert_bits_equal(fast, ref, str((mode, sub, flip, explim)))
        assert np.array_equal(after_fast, after_ref)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cpfloat_bit_pattern_engine_equals_reference(dtype):
    from pychop_compat.engines.dispatch import round_array
    from pychop_compat.random.sources import MATLAB_STREAM

    x = _mixed_inputs(dtype)
    formats = [Format(11, 15), Format(4, 8, emin=-6), Format(1, 4, emin=-3), Format(3, 3, emin=-2),
               catalogue_format("float8_e4m3fn"), catalogue_format("float4_e2m1fn"),
               catalogue_format("float8_e4m3fnuz"), Format(20, 90, emin=-100), Format(24, 127)]
    for fmt in formats:
        for mode in (-1, 0, 1, 2, 3, 4, 7, 8):
            for sub, explim, sat, inf in itertools.product((0, 1), repeat=4):
                spec = make_spec(fmt, mode, subnormal=sub, explim=explim, saturation=sat, infinity=inf)
                fast = round_array(x, spec, MATLAB_STREAM)
                ref = round_array(x, spec, MATLAB_STREAM, kernel="reference")
                assert_bits_equal(fast, ref, str((fmt, mode, sub, explim, sat, inf)))
