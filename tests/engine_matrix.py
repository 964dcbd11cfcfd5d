"""The engine test matrix, shared by the engine tests: inputs, the matrix of options, and
the check that an engine equals the NumPy engine bit for bit."""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np
import pytest

from bits import assert_bits_equal  # noqa: F401  (the one bit-equality helper; re-exported here)
from pychop_compat import chop, rand, rng
from pychop_compat.formats import custom_format, lookup_format
from pychop_compat.matlab.options import resolve
from pychop_compat.rules.chop import chop_vector

# --- inputs -----------------------------------------------------------------------------------

def boundaries(fmt, dtype) -> np.ndarray:
    """chop's thresholds for ``fmt``, the carrier's extremes and ties, each with both neighbours and sign."""
    dt = np.dtype(dtype)
    info = np.finfo(dt)
    t, ulp = fmt.t, math.ldexp(1.0, -fmt.t)
    base = [fmt.xmin, fmt.xmins, fmt.xmax, fmt.xboundary, fmt.xmin / 2, fmt.xmins / 2,
            fmt.xmins / 2 * (1 + ulp), fmt.xmin / 2 * (1 + ulp), math.ldexp(1.0, min(fmt.emax + 1, 1023)),
            1.0, 1 + ulp, 1 + 3 * ulp, 1 + 2 * ulp, 3 * ulp, 0.75 * fmt.xmins, 0.875 * fmt.xmins,
            float(info.max), float(info.tiny), float(info.smallest_subnormal), 0.75 * float(info.tiny)]
    base += [k * fmt.xmins for k in (1.5, 2, 2.5, 3, 3.5, 7.25)]
    grid = math.ldexp(1.0, max(fmt.emin - t + 1, -1074))
    base += [(m + 0.5) * grid for m in (1, 2, 2 ** (t - 1), 2 ** t - 1)]
    values = []
    with np.errstate(over="ignore", under="ignore"):
        for v in base:
            f = dt.type(v)
            if not np.isfinite(f):
                f = dt.type(info.max)
            for g in (f, np.nextafter(f, dt.type(np.inf)), np.nextafter(f, dt.type(0))):
                values += [g, -g]
    values += [dt.type(0), dt.type(-0.0), dt.type(np.inf), dt.type(-np.inf), dt.type(np.nan)]
    return np.array(values, dtype=dt)


def _random_values(gen, n: int, fmt, dtype) -> np.ndarray:
    """Magnitudes spread over the carrier's range and the format's, and ties at t bits."""
    dt = np.dtype(dtype)
    info = np.finfo(dt)
    lo, hi = math.log2(float(info.smallest_subnormal)), math.log2(float(info.max))
    exponent = np.where(gen.random(n) < 0.6,
                        gen.uniform(max(lo, fmt.emins - 4), min(hi, fmt.emax + 2), n),
                        gen.uniform(lo, hi, n))
    with np.errstate(over="ignore", under="ignore"):
        values = (np.exp2(exponent) * gen.choice([-1.0, 1.0], n)).astype(dt)
        ties = np.ldexp(gen.integers(2 ** (fmt.t - 1), 2 ** fmt.t, n) + 0.5,
                        gen.integers(int(max(lo, fmt.emins)), int(min(hi - 1, fmt.emax)), n) - fmt.t + 1)
    values = np.where(gen.random(n) < 0.25, ties.astype(dt), values)
    return np.where(np.isfinite(values), values, dt.type(0.5))


def make_input(fmt, dtype, seed: int, n: int = 600, columns: int = 6) -> np.ndarray:
    """A (rows, columns) C-ordered test array for ``fmt`` in ``dtype``."""
    gen = np.random.default_rng(seed)
    values = np.concatenate([boundaries(fmt, dtype), _random_values(gen, n, fmt, dtype)])
    gen.shuffle(values)
    return values[: values.size - values.size % columns].reshape(-1, columns)


# --- the matrix -------------------------------------------------------------------------------

FORMATS = {"q43": None, "q52": None, "b": None, "h": None, "s": None, "d": None,
           "c1_3": [1, 3], "c3_1": [3, 1], "c5_3": [5, 3], "c10_30": [10, 30], "c20_300": [20, 300],
           "c10_5000": [10, 5000]}  # t = 1; 0, Inf and NaN in the subnormal block; xmin = 0 in double


SWITCHES = list(itertools.product((0, 1), (0, 1), (0, 1)))  # (subnormal, explim, flip)


def in_sample(name, dtype, mode, sub, explim, flip) -> bool:
    """The deterministic sample of the matrix: for each format, dtype and mode, one of the
    eight switch settings (subnormal, explim, flip), taken in turn, so that the sample holds
    every format x dtype x mode and each switch setting about equally often (138 of 1,056)."""
    switches = SWITCHES if name != "c1_3" else [s for s in SWITCHES if not s[2]]
    turn = (list(FORMATS).index(name) * 2 + ("float32", "float64").index(dtype)) * 6 + mode
    return switches[turn % len(switches)] == (sub, explim, flip)


def matrix(sample: bool = False):
    """The matrix of options: formats x dtype x mode x subnormal x explim x flip (1,056 points).

    With ``sample=True`` the points outside :func:`in_sample` are marked ``slow``: the
    default run takes the sample, ``pytest -m slow`` the rest."""
    for (name, params), dtype, mode, sub, explim, flip in itertools.product(
            FORMATS.items(), ("float32", "float64"), range(1, 7), (0, 1), (0, 1), (0, 1)):
        if name == "c20_300" and dtype == "float32":
            continue  # over chop.m's precision limits for single
        if name == "c1_3" and flip:
            continue  # flips need t >= 2 (test_flip_needs_two_bits_on_every_engine)
        marks = [pytest.mark.slow] if sample and not in_sample(name, dtype, mode, sub, explim, flip) else []
        yield pytest.param(name, params, dtype, mode, sub, explim, flip, marks=marks,
                           id=f"{name}-{dtype}-r{mode}-s{sub}-e{explim}-f{flip}")


class CountingRandfunc:
    """A seeded randfunc that counts the numbers it gives."""

    def __init__(self, seed):
        self.gen, self.used = np.random.default_rng(seed), 0

    def __call__(self, n):
        self.used += n
        return self.gen.random(n)


def options_for(name, params, mode, sub, explim, flip, randfunc=None):
    options = {"format": "c" if params else name, "round": mode, "subnormal": sub,
               "explim": explim, "flip": flip}
    if params:
        options["params"] = params
    if randfunc is not None:
        options["randfunc"] = randfunc
    return options


def run_on_engine(engine, x: np.ndarray, options: dict, seed: int):
    """chop(x, options) on ``engine`` after rng(seed); the result as NumPy and the stream's next numbers."""
    rng(seed)
    xe = engine.to(x.copy())
    out = chop(xe, options)
    back = engine.back(out, xe)
    return back, rand(4, 1)


def zlib_seed(*parts) -> int:
    import zlib

    return zlib.crc32(repr(parts).encode())


def run_numpy(x, options, seed, reference=False):
    """The NumPy engine through the API, or (for the numpy row) the reference algorithm itself."""
    rng(seed)
    if not reference:
        from pychop_compat.kernels.compiled import cpu_engine

        with cpu_engine("numpy"):  # the NumPy engine, whatever the test's engine
            out = chop(x.copy(), options)
    else:
        settings = resolve(options, None, "single" if x.dtype == np.float32 else "double")
        from pychop_compat.random.sources import sources_for

        out = chop_vector(x.ravel(order="F"), settings.spec, sources_for(settings.randfunc)).reshape(x.shape, order="F")
    return out, rand(4, 1)


def _check_against_reference(label, run, reference, name, params, dtype, mode, sub, explim, flip):
    """``run(x, options, seed) -> (result, MATLAB's stream after)`` equals the NumPy engine's run
    (chop.m's algorithm itself with ``reference``) bit for bit, leaves the input alone, and draws
    the same numbers from the same sources."""
    fmt = custom_format(*params) if params else lookup_format(name)
    seed = zlib_seed(name, dtype, mode, sub, explim, flip)
    x = make_input(fmt, dtype, seed)
    x_before = x.copy()
    random = mode >= 5
    expected_randfunc, randfunc = (CountingRandfunc(seed), CountingRandfunc(seed)) if random else (None, None)
    expected, expected_after = run_numpy(x, options_for(name, params, mode, sub, explim, flip, expected_randfunc),
                                         seed, reference=reference)
    actual, after = run(x, options_for(name, params, mode, sub, explim, flip, randfunc), seed)
    context = f"{label} {name} {dtype} round={mode} subnormal={sub} explim={explim} flip={flip}"
    assert_bits_equal(actual, expected, context)
    np.testing.assert_array_equal(x, x_before)
    assert np.array_equal(after, expected_after), f"{context}: MATLAB's stream moved differently"
    if random:
        assert randfunc.used == expected_randfunc.used, f"{context}: number of stochastic draws"


def check_engine_matches_numpy(engine, name, params, dtype, mode, sub, explim, flip):
    """chop on ``engine`` equals the NumPy engine (the reference algorithm for the numpy row)
    bit for bit, leaves the input alone, and draws the same numbers from the same sources."""
    _check_against_reference(engine.name, functools.partial(run_on_engine, engine), engine.name == "numpy",
                             name, params, dtype, mode, sub, explim, flip)


def check_kernel_matches_rules(kernel, name, params, dtype, mode, sub, explim, flip):
    """The registry's ``kernel`` (run by name on a NumPy array: ``round_array(..., kernel=)``)
    equals chop.m's algorithm (rules/chop.py) bit for bit, leaves the input alone, takes as
    many numbers from randfunc and moves MATLAB's stream as the algorithm does."""
    from pychop_compat.engines.dispatch import round_array
    from pychop_compat.random.sources import sources_for

    def run(x, options, seed):
        settings = resolve(options, None, "single" if x.dtype == np.float32 else "double")
        rng(seed)
        with np.errstate(over="ignore", invalid="ignore"):  # as round_array's own host route (2^-s overflows)
            actual = round_array(x, settings.spec, sources_for(settings.randfunc), kernel=kernel)
        return actual, rand(4, 1)

    _check_against_reference(kernel, run, True, name, params, dtype, mode, sub, explim, flip)
