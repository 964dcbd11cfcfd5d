"""The spelling decides: a format name beyond chop.m's own rounds as the format's definition says.

chop.m's spellings (``'h'``, ``'b'``, ``'q43'``, ... and ``'c'``) keep chop.m's
algorithm bit for bit (the MATLAB corpus and the history tests check that).  Every
other name of the catalogue (``'bf16'``, ``'binary16'``, ``'tf32'``, ``'E5M2'``, the
OCP/ML names) gives one correct rounding under every facade: ``chop``, ``Chop``,
``cpfloat``, ``round_to_format``, ``chopped`` and ``nn.quantize``.

Oracles (float32 inputs, where ml_dtypes rounds once):

* ml_dtypes' casts for the 8-, 6- and 4-bit formats and bfloat16, NumPy's float16
  for binary16, the identity for binary32 and binary64 (a float32 input is exact);
* TensorFloat-32 (t = 11, the exponent range of binary32): the input scaled by a
  power of two into float16's range, cast to float16, scaled back (exact steps; a
  result above tf32's xmax is Inf);
* E8M0 below 2^-126, where ml_dtypes' cast of float32 subnormals is not a correct
  rounding: with t = 1 and no zero the correct result is 2^-127 below the midpoint
  1.5 * 2^-127 of [2^-127, 2^-126] and 2^-126 from it (ties to the even 2^-126);
* stochastic rounding: the two neighbours and the dropped fraction from exact
  rational arithmetic (:class:`fractions.Fraction`) on the format's parameters.

Values that ml_dtypes cannot give are stated: NaN stays NaN in the formats without
NaN (ml_dtypes writes -0 there, which is no NaN).
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest

from bits import same_bits

from pychop_compat import Chop, chop, chopped, clear_cpfloat, cpfloat
from pychop_compat.cpfloat import CPFLOAT_FORMATS
from pychop_compat.formats import CHOP_FORMAT_NAMES, catalogue_format, known_names
from pychop_compat.matlab.options import default_rules
from pychop_compat.rounding import round_to_format

ml_dtypes = pytest.importorskip("ml_dtypes")

#: Every name chop accepts that is not one of chop.m's spellings.
NAMES = [n for n in known_names() if n not in CHOP_FORMAT_NAMES and catalogue_format(n).t <= 53]
#: One name per format beyond chop.m's (the facades' test), the ml_dtypes name where there is one.
ONE_NAME = ["bf16", "binary16", "tf32", "binary32", "binary64", "float8_e4m3", "E5M2", "float8_e4m3fn",
            "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e3m4", "float6_e2m3fn", "float6_e3m2fn",
            "float4_e2m1fn", "float8_e8m0fnu"]

_ML_TYPE = {"q43": "float8_e4m3", "q52": "float8_e5m2", "b": "bfloat16"}


def tf32_cast(x: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even to TensorFloat-32 by float16's cast on exactly scaled values."""
    v = x.astype(np.float64)
    a = np.abs(v)
    out = v.copy()
    normal = np.isfinite(v) & (a >= 2.0 ** -126)
    e = np.frexp(a[normal])[1] - 1  # a = 2^e * 1.f, scaled to [1, 2): float16 rounds to 11 bits there
    out[normal] = np.ldexp(np.ldexp(v[normal], -e).astype(np.float16).astype(np.float64), e)
    tiny = np.isfinite(v) & (a < 2.0 ** -126)  # tf32's subnormal grid 2^-136 onto float16's 2^-24
    out[tiny] = np.ldexp(np.ldexp(v[tiny], 112).astype(np.float16).astype(np.float64), -112)
    xmax = (2 - 2.0 ** -10) * 2.0 ** 127
    out[np.abs(out) > xmax] = np.copysign(np.inf, out[np.abs(out) > xmax])
    return out


def reference_cast(x: np.ndarray, name: str) -> np.ndarray:
    """The format's reference cast of the float32 array ``x``, as float64 (see the module notes)."""
    fmt = catalogue_format(name)
    key = fmt.names[0]
    with warnings.catch_warnings(), np.errstate(over="ignore", invalid="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        if key in ("s", "d"):
            want = x.astype(np.float64)
        elif key == "h":
            want = x.astype(np.float16).astype(np.float64)
        elif key == "t":
            want = tf32_cast(x)
        else:
            want = x.astype(getattr(ml_dtypes, _ML_TYPE.get(key, key))).astype(np.float64)
    if fmt.encoding == "e8m0":
        tiny = (x > 0) & (x < 2.0 ** -126)
        want[tiny] = np.where(x[tiny].astype(np.float64) < 1.5 * 2.0 ** -127, 2.0 ** -127, 2.0 ** -126)
    want[np.isnan(x)] = np.nan
    return want


def spanning_values(name: str, n: int, seed: int = 7) -> np.ndarray:
    """``n`` float32 values spanning the format's range (subnormals and beyond xmax included):
    random exponents and significands, both signs, then every code point of the format, the
    midpoints between neighbours and their float32 neighbours, 0, +-Inf and NaN."""
    fmt = catalogue_format(name)
    gen = np.random.default_rng(seed)
    low = max(fmt.emin - fmt.t - 2, -149)
    high = min(fmt.emax + 1, 127)
    e = gen.integers(low, high + 1, n)
    significand = 1 + gen.integers(0, 1 << 23, n) / 2.0 ** 23
    x = np.ldexp(significand, e) * gen.choice([-1.0, 1.0], n)
    points = np.unique(np.abs(_code_points(fmt)))
    if points.size > 1:
        mids = (points[:-1] + points[1:]) / 2
        edges = np.concatenate([points, mids])
        with np.errstate(over="ignore"):
            e32 = edges.astype(np.float32)
            near = np.concatenate([e32, np.nextafter(e32, np.float32(np.inf)), np.nextafter(e32, np.float32(0))])
        if near.size > n // 2:
            near = gen.choice(near, n // 2, replace=False)
        x[: near.size] = near * np.where(gen.random(near.size) < 0.5, -1, 1)
    with np.errstate(over="ignore"):
        x = x.astype(np.float32)
    x[-4:] = [0.0, np.inf, -np.inf, np.nan]
    return x


def _code_points(fmt) -> np.ndarray:
    """Finite values of formats of at most 16 bits (from ml_dtypes or float16), else none."""
    key = fmt.names[0]
    if key == "h":
        kind, bits = np.float16, 16
    elif key in _ML_TYPE or key.startswith("float"):
        kind = getattr(ml_dtypes, _ML_TYPE.get(key, key))
        bits = 16 if key == "b" else (8 if key.startswith("float8") or key in _ML_TYPE else int(key[5]))
    else:
        return np.zeros(0)
    codes = np.arange(2 ** bits, dtype=np.uint16 if bits == 16 else np.uint8).view(kind).astype(np.float64)
    return codes[np.isfinite(codes)]


def test_names_and_their_rules():
    """chop.m's spellings keep chop.m's algorithm; every other name selects correct rounding."""
    assert {default_rules(n) for n in CHOP_FORMAT_NAMES} == {"chop"}
    assert {default_rules(n) for n in NAMES} == {"correct"}
    assert {catalogue_format(n).names[0] for n in ONE_NAME} == {catalogue_format(n).names[0] for n in NAMES}
    for name in ("bf16", "binary16", "float16", "tf32", "E5M2", "float8_e4m3fn", "float4_e2m1fn"):
        assert name in NAMES


@pytest.mark.parametrize("name", NAMES)
def test_chop_is_the_reference_cast_on_a_million_float32_values(name):
    x = spanning_values(name, 10 ** 6)
    want = reference_cast(x, name)
    got = chop(x, {"format": name}).astype(np.float64)
    ok = same_bits(got, want)
    assert ok.all(), list(zip(x[~ok][:5], got[~ok][:5], want[~ok][:5]))


FACADES = {
    "chop shorthand": lambda x, name: chop(x, name),
    "Chop": lambda x, name: Chop(name)(x),
    "cpfloat": lambda x, name: (clear_cpfloat(), cpfloat(x, name))[1],  # cpfloat keeps switches between calls
    "round_to_format": lambda x, name: round_to_format(x, name),
    "chopped": lambda x, name: np.asarray(chopped(x, {"format": name})),
}


@pytest.mark.parametrize("facade", FACADES)
@pytest.mark.parametrize("name", ONE_NAME)
def test_every_facade_rounds_as_the_cast(name, facade):
    if facade == "cpfloat" and name in CPFLOAT_FORMATS:
        pytest.skip("CPFloat's own spellings keep CPFloat's defaults (the CPFloat corpus checks them)")
    x = spanning_values(name, 1 << 14, seed=11)
    want = reference_cast(x, name)
    got = np.asarray(FACADES[facade](x, name)).astype(np.float64)
    ok = same_bits(got, want)
    assert ok.all(), list(zip(x[~ok][:5], got[~ok][:5], want[~ok][:5]))


@pytest.mark.parametrize("name", ONE_NAME)
def test_nn_quantize_rounds_as_the_cast(name):
    torch = pytest.importorskip("torch")
    from pychop_compat.nn import quantize

    x = spanning_values(name, 1 << 14, seed=12)
    want = reference_cast(x, name)
    got = quantize(torch.from_numpy(x), name).numpy().astype(np.float64)
    ok = same_bits(got, want)
    assert ok.all(), list(zip(x[~ok][:5], got[~ok][:5], want[~ok][:5]))


@pytest.mark.parametrize("name", ["bf16", "float8_e4m3fn", "float4_e2m1fn", "float8_e5m2fnuz"])
def test_device_routes_round_as_the_cast(name):
    """The routes a CUDA tensor takes (run on CPU tensors), round to nearest and stochastic."""
    torch = pytest.importorskip("torch")
    from pychop_compat.engines.dispatch import device_paths_on_cpu

    x = spanning_values(name, 1 << 12, seed=13)
    want = reference_cast(x, name)
    with device_paths_on_cpu():
        got = chop(torch.from_numpy(x), {"format": name}).numpy().astype(np.float64)
        up = chop(torch.from_numpy(x), {"format": name, "round": 5, "randfunc": lambda n: np.zeros(n)})
    assert same_bits(got, want).all()
    assert same_bits(up.numpy(), chop(x, {"format": name, "round": 5, "randfunc": lambda n: np.zeros(n)})).all()
    # Numbers made per element (a seeded counter): the elementwise kernel on the device and the
    # specification on the host, both comparing the numbers in float32 as chop.m does.
    for mode in (5, 6):
        with device_paths_on_cpu():
            on_device = Chop({"format": name, "round": mode}, rng=7)(torch.from_numpy(x)).numpy()
        assert same_bits(on_device, Chop({"format": name, "round": mode}, rng=7)(x)).all()
    # A number just above 1/2 is 1/2 in float32: mode 6 then rounds every inexact element up.
    from pychop_compat.engines.dispatch import round_array
    from pychop_compat.matlab.options import resolve
    from pychop_compat.random.sources import given_sources

    spec = resolve({"format": name, "round": 6}, None, "single").spec
    u = np.full(x.shape, 0.5 + 2.0 ** -30)
    always_up = chop(x, {"format": name, "round": 6, "randfunc": lambda n: np.zeros(n)})
    assert same_bits(round_array(x, spec, given_sources(u)), always_up).all()
    with device_paths_on_cpu():
        on_device = round_array(torch.from_numpy(x), spec, given_sources(torch.from_numpy(u))).numpy()
    assert same_bits(on_device, always_up).all()


def _exact_neighbours(v: float, name: str) -> tuple[Fraction, Fraction]:
    """The format's two neighbours of the finite ``v`` (``lo <= |v| <= hi``, magnitudes), by
    rational arithmetic on ``t``, ``emin`` and the grid; ``hi`` may exceed xmax."""
    fmt = catalogue_format(name)
    a = abs(Fraction(v))
    if a == 0:
        return a, a
    e = math.floor(math.log2(a))
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    quantum = Fraction(2) ** (max(e, fmt.emin) - fmt.t + 1)
    lo = (a // quantum) * quantum
    return lo, lo if lo == a else lo + quantum


@pytest.mark.parametrize("name", ["bf16", "float8_e4m3fn", "float6_e3m2fn", "float4_e2m1fn"])
@pytest.mark.parametrize("mode", [5, 6])
def test_stochastic_rounding_picks_a_neighbour_by_the_drawn_number(name, mode):
    """One number per element (the count chop.m draws): up exactly when u <= the dropped
    fraction (mode 5) or u <= 1/2 (mode 6), on the format's grid; results beyond xmax
    overflow as the format does (Inf, NaN or saturation)."""
    fmt = catalogue_format(name)
    gen = np.random.default_rng(5)
    x = spanning_values(name, 3000, seed=14)
    x = x[np.isfinite(x)]
    u = gen.random(x.size)
    drawn = []

    def randfunc(n):
        drawn.append(n)
        return u[sum(drawn) - n: sum(drawn)]

    got = chop(x, {"format": name, "round": mode, "randfunc": randfunc})
    assert sum(drawn) == x.size  # both of chop.m's blocks have inexact elements here
    # chop.m's order: the elements outside its subnormal block first, then those inside it.
    e = np.frexp(np.abs(x.astype(np.float64)))[1] - 1
    in_block = (e < fmt.emin) & (e >= fmt.emin - fmt.t + 1)
    order = np.concatenate([np.flatnonzero(~in_block), np.flatnonzero(in_block)])
    u_of = np.empty(x.size)
    u_of[order] = u
    for v, uv, g in zip(x.astype(np.float64), u_of, got.astype(np.float64)):
        lo, hi = _exact_neighbours(v, name)
        if lo == hi:
            want = lo
        else:
            frac = (abs(Fraction(v)) - lo) / (hi - lo)
            want = hi if uv <= (frac if mode == 5 else 0.5) else lo
        want_f = math.copysign(float(want), v)
        if abs(want) > Fraction(fmt.xmax):
            want_f = (math.copysign(fmt.xmax, v) if fmt.overflow == "saturate" else
                      math.copysign(math.inf, v) if fmt.has_inf else math.nan)
        elif want == 0 and fmt.encoding == "fnuz":
            want_f = 0.0
        assert same_bits(np.array([g]), np.array([want_f])).all(), (v, uv, g, want_f)


def test_chop_m_order_of_draws():
    """The first number goes to the element outside chop.m's subnormal block, the second to
    the one inside it (bf16: xmin = 2^-126, subnormal block 2^-133 <= |x| < 2^-126)."""
    x = np.array([3 * 2.0 ** -130 + 2.0 ** -140, 1 + 2.0 ** -9], dtype=np.float64)
    numbers = iter([0.0, 0.999])
    got = chop(x, {"format": "bf16", "round": 5, "randfunc": lambda n: np.array([next(numbers) for _ in range(n)])})
    assert got.tolist() == [3 * 2.0 ** -130, 1 + 2.0 ** -7]


def test_rules_option_chooses_chop_ms_rule_on_any_name():
    """options.rules = 'chop' gives chop.m's underflow rule on another name (round to t bits,
    then compare with xmins/2: an input just above xmins/2 gives 0), and 'correct' gives one
    correct rounding on chop.m's own names."""
    half = 2.0 ** -10  # float8_e4m3fn: xmins = 2^-9
    x = np.array([half * (1 + 2.0 ** -6)], dtype=np.float32)
    assert chop(x, {"format": "float8_e4m3fn"})[0] == 2.0 ** -9
    assert chop(x, {"format": "float8_e4m3fn", "rules": "chop"})[0] == 0
    h = np.array([2.0 ** -25 * (1 + 2.0 ** -12)], dtype=np.float32)  # fp16: xmins = 2^-24
    assert chop(h, {"format": "h"})[0] == 0
    assert chop(h, {"format": "h", "rules": "correct"})[0] == 2.0 ** -24 == h.astype(np.float16)[0]
    with pytest.raises(ValueError, match="options.rules"):
        chop(h, {"format": "h", "rules": "nearest"})


def test_bf16_keeps_subnormals_and_bfloat16_keeps_chop_ms_default():
    x = np.array([1e-40, -3e-39], dtype=np.float32)
    assert same_bits(chop(x, "bf16"), x.astype(ml_dtypes.bfloat16).astype(np.float32)).all()
    assert chop(x, "bf16")[0] != 0
    assert chop(x, "bfloat16").tolist() == [0.0, 0.0]


def test_chop_at_refuses_names_chop_m_never_had():
    from pychop_compat import chop_at

    with pytest.raises(ValueError, match="chop_at reproduces chop.m"):
        chop_at("2023-01-01")(0.1, {"format": "float8_e4m3fn"})
    with pytest.raises(ValueError, match="options.rules"):
        chop_at("2023-01-01")(0.1, {"format": "h", "rules": "correct"})


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", ["binary16", "float8_e4m3fn", "float4_e2m1fn", "float8_e8m0fnu", "tf32"])
def test_stochastic_rounding_runs_compiled_with_the_specifications_numbers(name, dtype):
    """Stochastic rounding of these names on a NumPy array runs the compiled CPFloat kernel
    (kernels.numba_cpfloat) with the numbers the specification takes (rules.cpfloat.round_correct:
    drawn block by block in chop.m's order, or one per element): its bits, and MATLAB's stream
    left where the specification leaves it; 2-D input (column-major order), every switch.  Bit
    flips stay on the specification."""
    pytest.importorskip("numba")
    from pychop_compat import rng
    from pychop_compat.engines import dispatch
    from pychop_compat.matlab.options import resolve
    from pychop_compat.random.sources import MATLAB_STREAM, counter_sources

    x = spanning_values(name, 6000).astype(dtype).reshape(2000, 3)
    for mode in (5, 6):
        for subnormal in (0, 1):
            for explim in (0, 1):
                spec = resolve({"format": name, "round": mode, "subnormal": subnormal, "explim": explim},
                               None, "single" if dtype == np.float32 else "double").spec
                for seed in (None, 4):
                    outs, after = [], []
                    for kernel in (None, "reference"):
                        rng(9)
                        sources = MATLAB_STREAM if seed is None else counter_sources(seed)
                        if kernel is None:
                            assert dispatch.route(x, spec, sources).kernel.name == "numba-cpfloat"
                        with np.errstate(all="ignore"):
                            outs.append(dispatch.round_array(x, spec, sources, kernel=kernel))
                        after.append(chop_rand() if seed is None else None)
                    assert same_bits(outs[0], outs[1]).all(), (mode, subnormal, explim, seed)
                    assert after[0] == after[1]
    flips = resolve({"format": name, "round": 5, "flip": 1}, None, "double").spec
    if flips.fmt.t < 2:  # no bit below the leading one to flip: chop refuses the call, and so does route
        with pytest.raises(ValueError, match="precision t >= 2"):
            dispatch.route(x.astype(np.float64), flips, MATLAB_STREAM)
    else:
        assert dispatch.route(x.astype(np.float64), flips, MATLAB_STREAM).kernel.name == "reference"


def chop_rand() -> float:
    """The next number of MATLAB's stream (where the rounding left it)."""
    from pychop_compat import rand

    return float(rand())
