"""Shared cases for the tests of CPFloat's rules on every engine: formats, modes, switches
and edge values (the oracle is the reference round_cpfloat, validated by the CPFloat corpus)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import bits

from pychop_compat.formats import Format, lookup_format
from pychop_compat.random.sources import MATLAB_STREAM
from pychop_compat.rounding import make_spec
from pychop_compat.rules.cpfloat import round_cpfloat

MODES = (-1, 0, 1, 2, 3, 4, 7, 8, 9)  # 8 and 9: "no rounding"
SWITCHES = list(itertools.product((0, 1), repeat=4))  # subnormal, explim, saturation, infinity
FORMATS = {name: lookup_format(name) for name in (
    "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn", "float6_e2m3fn", "float8_e4m3fnuz",
    "float8_e5m2fnuz", "bf16", "fp16", "tf32", "fp32", "fp64", "float8_e8m0fnu")}
FORMATS["[3, -4, 5]"] = Format(3, 5, ("c",), emin=-4)
FORMATS["[1, -3, 4]"] = Format(1, 4, ("c",), emin=-3)  # t = 1: the kept significand is the hidden bit
FORMATS["[24, -130, 130]"] = Format(24, 130, ("c",), emin=-130)  # beyond float32's range and precision
UINT = {np.dtype(np.float32): np.uint32, np.dtype(np.float64): np.uint64}
#: The formats whose float32 carrier the default test run checks: the narrow ones whose numbers
#: float32 holds with room to spare, one custom format, and the one beyond float32's range.
SINGLE_CARRIER_SAMPLE = ("float8_e4m3fn", "bf16", "[3, -4, 5]", "[24, -130, 130]")
#: ``(name, dtype)`` for every format of :data:`FORMATS` on both carriers: float64 for every format
#: in the default test run, float32 for :data:`SINGLE_CARRIER_SAMPLE` (the rest under ``slow``).
FORMATS_AND_CARRIERS = [
    pytest.param(name, dtype, id=f"{name}-{np.dtype(dtype).name}",
                 marks=() if dtype is np.float64 or name in SINGLE_CARRIER_SAMPLE else pytest.mark.slow)
    for name in FORMATS for dtype in (np.float32, np.float64)]
#: The drawn modes' share of the default run (each case checks hundreds of specs with four kinds of
#: numbers): the float64 carrier of every encoding kind (fn, fnuz, finite, E8M0, IEEE, custom and
#: t = 1) and one float32 carrier; every other pair under ``slow``.
DRAWN_SAMPLE = ("float8_e4m3fn", "float8_e5m2fnuz", "float4_e2m1fn", "float8_e8m0fnu", "fp16", "[1, -3, 4]",
                "[24, -130, 130]")
DRAWN_FORMATS_AND_CARRIERS = [
    pytest.param(name, dtype, id=f"{name}-{np.dtype(dtype).name}",
                 marks=() if (name in DRAWN_SAMPLE and dtype is np.float64) or (name, dtype) == ("bf16", np.float32)
                 else pytest.mark.slow)
    for name in FORMATS for dtype in (np.float32, np.float64)]


def same_bits(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Elementwise: identical bit patterns (so -0 != +0, and NaN signs count): the shared
    helper (bits.py) with NaN payloads compared."""
    return bits.same_bits(got, want, nan_payloads=True)


def spec_of(fmt: Format, mode: int, subnormal: int, explim: int, saturation: int, infinity: int):
    return make_spec(fmt, mode, subnormal=bool(subnormal), explim=bool(explim),
                     saturation=bool(saturation), infinity=bool(infinity))


def edge_values(fmt: Format, dtype) -> np.ndarray:
    """Zeros, +-Inf, NaN, the storage's extremes, every binade from below xmins to above xmax
    with its ends, midpoints and neighbours of midpoints, the format's xmin, xmins, xmax and
    overflow threshold, each with its storage neighbours; then a dense sweep of bit patterns
    (every exponent field, random significands) and random values across the magnitudes."""
    info = np.finfo(dtype)
    values = [0.0, math.inf, math.nan, 1.0, 3.0, 1e300, 1e30, 1e-300, 1e-40, 5e-324, 1e-45,
              float(info.max), float(info.tiny), float(info.smallest_subnormal)]
    t = fmt.t
    for e in range(max(fmt.emin - t - 3, -1080), min(fmt.emax + 3, 1024)):
        for m in (1.0, 1.25, 1.5, 1.75, 1 + math.ldexp(1, -t), 1 + 3 * math.ldexp(1, -t),
                  1 + 1.5 * math.ldexp(1, 1 - t), 2 - math.ldexp(1, -t), 2 - math.ldexp(1, 1 - t)):
            try:
                values.append(math.ldexp(m, e))
            except OverflowError:
                values.append(math.inf)
    values += [fmt.xmax, fmt.xmin, fmt.xmins, fmt.xboundary]
    with np.errstate(all="ignore"):
        a = np.array(values, np.float64).astype(dtype)
        a = np.concatenate([a, np.nextafter(a, dtype(np.inf)), np.nextafter(a, dtype(0))])
    rng = np.random.default_rng(2026)
    u = UINT[np.dtype(dtype)]
    width = 8 * np.dtype(dtype).itemsize
    high = np.arange(1 << 12, dtype=np.uint64) << np.uint64(width - 12)
    low = rng.integers(0, 1 << (width - 12), high.size, dtype=np.uint64)
    sweep = (high | low).astype(u).view(dtype)
    exponents = np.clip(rng.integers(fmt.emin - t - 4, fmt.emax + 3, 3000), -1070, 1020)
    with np.errstate(all="ignore"):
        spread = (rng.standard_normal(3000) * np.exp2(exponents.astype(np.float64))).astype(dtype)
    a = np.concatenate([a, spread])
    return np.concatenate([a, -a, sweep])


def differences_from_reference(x: np.ndarray, fmt: Format, engines: dict) -> list:
    """Every deterministic mode and switch: ``engines[name](x, spec)`` against ``round_cpfloat``,
    bit for bit.  Returns the differing settings (empty when all agree); checks that each result
    is a new array of x's dtype and shape and that ``x`` is not modified."""
    before = x.copy()
    failures = []
    for mode in MODES:
        for switches in SWITCHES:
            want = round_cpfloat(x, fmt, mode, *map(bool, switches), MATLAB_STREAM)
            spec = spec_of(fmt, mode, *switches)
            for name, engine in engines.items():
                got = engine(x, spec)
                assert got.dtype == x.dtype and got.shape == x.shape
                assert not np.shares_memory(got, x)  # a new array, "no rounding" included
                bad = np.flatnonzero(~same_bits(got, want))
                if bad.size:
                    failures.append((name, mode, switches, x[bad[:3]], got[bad[:3]], want[bad[:3]]))
    assert same_bits(x, before).all()  # the input is not modified
    return failures
