"""OCP/ML formats of the catalogue against hardware-style casts: ml_dtypes and torch's float8.

Oracles: ``x.astype(ml_dtypes.<format>)`` (round to nearest even, one rounding
from float32 or float64) and torch's ``tensor.to(torch.float8_*)`` from float32.
Overflow differs between them and is stated here: ml_dtypes gives NaN for
formats with a NaN (``fn``, ``fnuz``, E8M0), Inf for IEEE formats and the
largest finite number for formats without NaN (``float6``/``float4``);
torch's ``float8_e4m3fn`` cast saturates (Inf and overflow give +-448).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from pychop_compat import chop
from pychop_compat.formats import catalogue_format
from pychop_compat.rounding import round_to_format

ml_dtypes = pytest.importorskip("ml_dtypes")

NAMES = ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3", "float8_e3m4",
         "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn", "float8_e8m0fnu"]


def ml_type(name):
    kind = getattr(ml_dtypes, name, None)
    if kind is None:
        pytest.skip(f"ml_dtypes {ml_dtypes.__version__} has no {name}")
    return kind


def code_points(name) -> np.ndarray:
    """Every value of the format (decoded by ml_dtypes), as float64, NaNs dropped."""
    kind = ml_type(name)
    bits = 8 if name.startswith("float8") else int(name[5])
    values = np.arange(2 ** bits, dtype=np.uint8).view(kind).astype(np.float64)
    return values[~np.isnan(values)]


def ml_cast(x: np.ndarray, name) -> np.ndarray:
    """ml_dtypes' cast as a correct rounding of ``x``, as float64.

    ml_dtypes casts float64 through float32 (two roundings: an input just above
    a midpoint can land on it).  So float64 inputs are first rounded to float32
    *to odd* (inexact results get an odd last bit), which keeps the one
    correct rounding to any format with at least two bits fewer than float32
    (Boldo and Melquiond, 2008), and then cast.
    """
    if x.dtype == np.float64:
        with np.errstate(over="ignore"):
            r = x.astype(np.float32)
            inexact = np.isfinite(x) & (r.astype(np.float64) != x)
            even = (r.view(np.uint32) & 1) == 0
            fix = inexact & even
            toward = np.where(x[fix] > r[fix].astype(np.float64), np.float32(np.inf), np.float32(-np.inf))
            r[fix] = np.nextafter(r[fix], toward)
        x = r
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(ml_type(name)).astype(np.float64)


def same(got, want) -> np.ndarray:
    """Elementwise: equal with the sign of zero, or both NaN."""
    return ((got == want) & (np.signbit(got) == np.signbit(want))) | (np.isnan(got) & np.isnan(want))


@pytest.mark.parametrize("name", NAMES)
def test_format_parameters_match_ml_dtypes(name):
    info = ml_dtypes.finfo(ml_type(name))
    fmt = catalogue_format(name)
    assert fmt.xmax == float(info.max)
    assert fmt.xmin == float(info.smallest_normal)
    assert fmt.xmins == float(info.smallest_subnormal)
    assert fmt.t == info.nmant + 1
    assert fmt.bits == info.bits


def sweep(name, dtype) -> np.ndarray:
    """Every code point, every midpoint between neighbours and its two neighbours in ``dtype``,
    values beyond the range and below the smallest subnormal, random values; both signs."""
    fmt = catalogue_format(name)
    points = np.unique(np.abs(code_points(name)))
    mids = (points[:-1] + points[1:]) / 2
    edges = [fmt.xmax * k for k in (1.01, 1.5, 2, 1e3)] + [fmt.xmins * k for k in (0.25, 0.5, 0.51, 0.75, 1.25)]
    gen = np.random.default_rng(13)
    rand = np.exp2(gen.uniform(fmt.emin - fmt.t - 3, fmt.emax + 2, 4000)) * gen.uniform(1, 2, 4000)
    with np.errstate(over="ignore"):  # e8m0's 1e3 * xmax is beyond float32: Inf, on purpose
        base = np.concatenate([points, mids, edges, rand]).astype(dtype)
        near = np.concatenate([base, np.nextafter(base, dtype(np.inf)), np.nextafter(base, dtype(0))])
    special = np.array([0.0, np.inf], dtype)
    values = np.concatenate([near, special])
    return np.concatenate([values, -values])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", NAMES)
def test_correct_rounding_equals_ml_dtypes_cast(name, dtype):
    """The general rounding (CPFloat's rules, the format's defaults) is ml_dtypes' cast, every value:
    code points are fixed, midpoints go to even, overflow follows the format's encoding."""
    fmt = catalogue_format(name)
    x = sweep(name, dtype)
    if fmt.encoding == "e8m0":
        # No sign and no zero: ml_dtypes maps them to NaN, and so do we (tested below).  Below
        # 2^-126 ml_dtypes's cast of float32 subnormals is not a correct rounding (1.25 * 2^-127
        # gives 2^-126): those inputs are checked against the rule stated in the test below.
        x = x[(x > 0) & (x >= 2.0 ** -126)]
    want = ml_cast(x, name)
    got = round_to_format(x, fmt).astype(np.float64)
    ok = same(got, want)
    assert ok.all(), list(zip(x[~ok][:5], got[~ok][:5], want[~ok][:5]))
    codes = code_points(name)
    assert same(round_to_format(codes, fmt), codes).all()


def test_e8m0_has_no_zero_and_no_sign():
    got = round_to_format(np.array([0.0, -0.0, -1.0, np.nan, 2.0 ** -140, 3.0]), "float8_e8m0fnu")
    want = np.array([0.0, -0.0, -1.0, np.nan, 2.0 ** -140, 3.0]).astype(ml_dtypes.float8_e8m0fnu).astype(float)
    assert same(got, want).all() and np.isnan(got[:4]).all() and got[4] == 2.0 ** -127 and got[5] == 4.0
    # Correct rounding below 2^-126 with t = 1: the midpoint of [2^-127, 2^-126] is 1.5 * 2^-127.
    tiny = np.array([1.25, 1.5, 1.75]) * 2.0 ** -127
    assert round_to_format(tiny, "float8_e8m0fnu").tolist() == [2.0 ** -127, 2.0 ** -126, 2.0 ** -126]


@pytest.mark.parametrize("engine", ["numpy", "numba", "reference", "torch"])
@pytest.mark.parametrize("mode", [1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize("name", [n for n in NAMES if n not in ("float8_e5m2", "float8_e4m3", "float8_e3m4")])
def test_infinite_inputs_take_the_encoding_under_correct_rounding(name, mode, engine):
    """docs/formats.rst: correct rounding decides overflow on the rounded value; an Inf input is
    no overflow of a finite value: +-Inf, then the format's encoding: NaN where the format has a
    NaN ('fn', 'fnuz', E8M0; ml_dtypes' cast agrees), +-xmax in the 'finite' formats, in every
    mode (0.6.x gave +-xmax where a directed mode rounds toward zero, CPFloat's infinity = 0
    rule, which cpfloat keeps)."""
    x = np.array([np.inf, -np.inf] * 3000)
    want = x.astype(ml_type(name)).astype(np.float64)  # NaN, or +-xmax without NaN
    got = _chop_on(engine, x, {"format": name, "round": mode})
    assert same(got, want).all(), got[:2].tolist()


def _chop_on(engine: str, x: np.ndarray, options: dict) -> np.ndarray:
    """``chop(x, options)`` by the rules' reference kernel, on a torch tensor, or on a CPU engine."""
    from pychop_compat.engines.dispatch import round_array
    from pychop_compat.kernels.compiled import cpu_engine
    from pychop_compat.matlab.options import resolve
    from pychop_compat.random.sources import MATLAB_STREAM

    if engine == "reference":
        spec = resolve(options, None, "single" if x.dtype == np.float32 else "double").spec
        return round_array(x, spec, MATLAB_STREAM, kernel="reference")
    if engine == "torch":
        torch = pytest.importorskip("torch")
        return chop(torch.from_numpy(x), options).numpy()
    if engine == "numba":
        pytest.importorskip("numba")
    with cpu_engine(engine):
        return chop(x, options)


@pytest.mark.parametrize("engine", ["numpy", "numba", "reference", "torch"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mode", [1, 2, 3, 4])
def test_e8m0_with_explim_0_keeps_its_encoding(mode, dtype, engine):
    """docs/formats.rst: with explim = 0 correct rounding widens the format to the input class's
    exponent range keeping its encoding; E8M0 has no sign and no zero, so zero, negative and NaN
    inputs (-Inf too) give NaN, and results flushed to zero its smallest number, 2^emin of the
    class (0.6.x returned -1, -4, 0 for -1, -3, 0: the IEEE encoding).  The rule written out:
    t = 1, so positive values round to a power of two, ties (1.5 * 2^e) up in mode 1."""
    from pychop_compat import Chop

    emin, tiny = (-126, 2.0 ** -130) if dtype == np.float32 else (-1022, 1e-310)
    x = np.array([-1.0, -3.0, 0.0, -0.0, np.nan, -np.inf, 2.0, 3.0, 5.0, tiny, 2.0 ** (emin - 1)], dtype)
    # 3 (a tie: to the even multiple of 2) rounds to 4 in modes 1 and 2; 5 to 8 in mode 2 only
    want = [np.nan] * 6 + [2.0, 4.0 if mode in (1, 2) else 2.0, 8.0 if mode == 2 else 4.0] + [2.0 ** emin] * 2
    options = {"format": "float8_e8m0fnu", "explim": 0, "round": mode}
    got = _chop_on(engine, np.tile(x, 500), options)[:x.size]  # (a large array: the bulk kernels)
    assert got.dtype == dtype
    assert same(got.astype(np.float64), np.array(want)).all(), got.tolist()
    assert same(Chop(options)(x).astype(np.float64), np.array(want)).all()
    assert same(chop(x, options).astype(np.float64), np.array(want)).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", [n for n in NAMES if n != "float8_e8m0fnu"])
def test_chop_on_ocp_formats_equals_ml_dtypes_except_chops_underflow_rule(name, dtype):
    """chop(x, {'format': name}) keeps chop.m's rules on every format: below the smallest
    subnormal it rounds to t bits first and then compares with xmins/2, so an input just
    above xmins/2 that rounds to xmins/2 gives 0 where a single rounding gives xmins."""
    fmt = catalogue_format(name)
    x = sweep(name, dtype)
    want = ml_cast(x, name)
    got = chop(x, {"rules": "chop", "format": name}).astype(np.float64)
    a = np.abs(x.astype(np.float64))
    half = fmt.xmins / 2
    chop_rule = (a > half) & (a <= half * (1 + 2.0 ** -fmt.t))  # rounds to xmins/2 at t bits
    want = np.where(chop_rule, 0.0, want)
    # chop.m returns +0 where its range rules flush (the sign of zero is not part of chop's results).
    ok = (got == want) | (np.isnan(got) & np.isnan(want))
    assert ok.all(), list(zip(x[~ok][:5], got[~ok][:5], want[~ok][:5]))


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"])
def test_torch_float8_casts(name):
    torch = pytest.importorskip("torch")
    kind = getattr(torch, name, None)
    if kind is None:
        pytest.skip(f"torch has no {name}")
    fmt = catalogue_format(name)
    x = sweep(name, np.float32)
    xt = torch.from_numpy(x)
    with warnings.catch_warnings():  # torch warns when it casts Inf to a format without Inf
        warnings.simplefilter("ignore", RuntimeWarning)
        want = xt.to(kind).to(torch.float32).numpy().astype(np.float64)
    # torch saturates its OCP E4M3 cast (Inf and overflow give +-448); the others follow the format.
    saturate = name == "float8_e4m3fn"
    got = round_to_format(xt, fmt, saturation=saturate or None).numpy().astype(np.float64)
    ok = same(got, want)
    assert ok.all(), list(zip(x[~ok][:5], got[~ok][:5], want[~ok][:5]))


def test_round_to_format_takes_mode_names_refuses_other_modes_and_keeps_the_type():
    # 'up' is CPFloat's code 2; 0.3 lies between e4m3fn's 0.28125 and 0.3125
    assert round_to_format([0.3], "float8_e4m3fn", "up").tolist() == [0.3125]
    assert round_to_format([0.3], "float8_e4m3fn", "nearest").tolist() == [0.3125]
    for bad in (1.9, True, "sideways"):
        with pytest.raises(ValueError):
            round_to_format([0.3], "float8_e4m3fn", bad)
    assert type(round_to_format(0.3, "float8_e4m3fn")) is float  # as chop: a float gives a float
    assert round_to_format(np.float16([0.3]), "float8_e4m3fn").dtype == np.float16


def test_e8m0_of_bfloat16_reaches_its_smallest_number():
    # 2^-127 (E8M0's smallest) is exact in bfloat16 and E8M0 (ml_dtypes' cast agrees); bfloat16 is
    # computed as float32, which is widened to double for E8M0 (0.6.0 clamped bfloat16 to 2^-126)
    torch = pytest.importorskip("torch")
    x = torch.tensor([2.0**-127, 2.0**-130, 3.0], dtype=torch.bfloat16)
    got = chop(x, {"format": "float8_e8m0fnu"})
    assert got.dtype == torch.bfloat16 and got.double().tolist() == [2.0**-127, 2.0**-127, 4.0]


def test_round_to_format_takes_labelled_arrays_as_chop_does():
    # Its docstring: what chop takes, so xarray DataArrays (over NumPy) and pandas Series too,
    # labels kept (0.6.x raised "does not support xarray ..."); oracle: ml_dtypes' cast.
    xarray = pytest.importorskip("xarray")
    pandas = pytest.importorskip("pandas")
    x = np.array([300.0, 500.0, 0.001, -0.3])
    want = x.astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
    labelled = xarray.DataArray(x, dims="i", coords={"i": [1, 2, 3, 4]}, attrs={"units": "m"})
    got = round_to_format(labelled, "float8_e4m3fn")
    assert isinstance(got, xarray.DataArray) and got.attrs == {"units": "m"}
    assert got["i"].values.tolist() == [1, 2, 3, 4]
    np.testing.assert_array_equal(got.values, want)
    assert labelled.values.tolist() == x.tolist()  # the caller's array is not modified
    series = round_to_format(pandas.Series(x, name="s"), "float8_e4m3fn")
    assert isinstance(series, pandas.Series) and series.name == "s"
    np.testing.assert_array_equal(series.to_numpy(), want)
    with pytest.raises(TypeError, match="round_to_format does not support builtins.object"):
        round_to_format(object(), "float8_e4m3fn")
