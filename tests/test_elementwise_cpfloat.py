"""CPFloat's deterministic rules as elementwise operations on bit patterns, on device arrays.

``engines/elementwise_cpfloat.py`` is written once against an array
namespace and runs on NumPy (tested here), JAX (eager and under ``jit``),
torch tensors off the CPU (run here on CPU tensors through the device path)
and CuPy (tested on a NumPy stand-in in test_gpu_paths.py).  Oracles: the
reference :func:`pychop_compat.rules.cpfloat.round_cpfloat` bit for bit
(NaN patterns and signs of zero included; the reference reproduces the CPFloat
corpus, tests/test_cpfloat_corpus.py), and the CPFloat corpus itself on the
torch device path, which must never call the NumPy engine.
"""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest

from pychop_compat.cpfloat import clear_cpfloat, cpfloat
from pychop_compat.engines import dispatch
from pychop_compat.kernels.xp import library_namespace
from pychop_compat.kernels.elementwise_cpfloat import cpfloat_covers, cpfloat_inexact, round_cpfloat_elementwise
from pychop_compat.formats import Format, lookup_format
from pychop_compat.random.sources import MATLAB_STREAM, RandomSources
from pychop_compat.rounding import make_spec
from pychop_compat.rules.cpfloat import round_cpfloat

from cpfloat_cases import FORMATS, FORMATS_AND_CARRIERS, SWITCHES, differences_from_reference, edge_values, same_bits, spec_of


@pytest.mark.parametrize("name, dtype", FORMATS_AND_CARRIERS)
def test_numpy_namespace_is_the_reference_bit_for_bit(name, dtype):
    """Every deterministic mode and "no rounding", every switch, on edge values and sweeps."""
    fmt = FORMATS[name]
    engine = {"numpy namespace": lambda x, spec: round_cpfloat_elementwise(library_namespace("numpy"), x, spec)}
    failures = differences_from_reference(edge_values(fmt, dtype), fmt, engine)
    assert not failures, f"{len(failures)} settings differ, e.g. {failures[:3]}"


def test_the_comparison_can_fail():
    """The result differs from the reference of another mode or switch (the test above has teeth)."""
    fmt = FORMATS["float8_e4m3fn"]
    x = edge_values(fmt, np.float64)
    got = round_cpfloat_elementwise(library_namespace("numpy"), x, spec_of(fmt, 1, 1, 1, 0, 1))
    for other in (-1, 0, 7):
        assert not same_bits(got, round_cpfloat(x, fmt, other, True, True, False, True, MATLAB_STREAM)).all()
    assert not same_bits(got, round_cpfloat(x, fmt, 1, True, True, True, True, MATLAB_STREAM)).all()


def test_any_shape_and_what_is_refused():
    fmt = lookup_format("float4_e2m1fn")
    spec = make_spec(fmt, 7)
    x = np.random.default_rng(4).standard_normal((3, 4, 5)) * 8
    got = round_cpfloat_elementwise(library_namespace("numpy"), x, spec)
    want = round_cpfloat(x.ravel(), fmt, 7, True, True, False, False, MATLAB_STREAM).reshape(x.shape)
    assert got.shape == x.shape and same_bits(got, want).all()
    scalar = round_cpfloat_elementwise(library_namespace("numpy"), np.array(0.3), spec)
    assert scalar.shape == () and float(scalar) == 0.5  # round to odd: 0.3 lies between 0 and 0.5
    assert cpfloat_covers(spec) and cpfloat_covers(make_spec(fmt, 8))
    assert cpfloat_covers(make_spec(fmt, 5), stochastic=True) and not cpfloat_covers(make_spec(fmt, 5))
    for uncovered in (make_spec(fmt, 1, flip=1), make_spec(fmt, 5, flip=2), make_spec(fmt, 1, rules="chop"),
                      make_spec(fmt, 5, rules="chop")):
        assert not cpfloat_covers(uncovered) and not cpfloat_covers(uncovered, stochastic=True)
        with pytest.raises(ValueError, match="without bit flips"):
            round_cpfloat_elementwise(library_namespace("numpy"), x, uncovered)
    with pytest.raises(ValueError, match="needs u_round"):
        round_cpfloat_elementwise(library_namespace("numpy"), x, make_spec(fmt, 6))
    with pytest.raises(ValueError, match="stochastic rounding"):
        cpfloat_inexact(library_namespace("numpy"), x, spec)
    with pytest.raises(TypeError, match="float32 or float64"):
        round_cpfloat_elementwise(library_namespace("numpy"), x.astype(np.float16), spec)


def numbers_for(count: int, seed: int) -> np.ndarray:
    """Uniform numbers, a third of them short binary fractions (0.5, 0.375, ...) so that the
    comparison u <= r meets equality."""
    rng = np.random.default_rng(seed)
    u = rng.random(count)
    short = rng.random(count) < 1 / 3
    u[short] = rng.integers(1, 16, short.sum()) / 16
    return u


def stochastic_reference(x: np.ndarray, fmt, mode: int, switches, seed: int):
    """round_cpfloat on x in column-major order with known numbers: (result, numbers used)."""
    drawn = []

    def stochastic(n):
        drawn.append(numbers_for(n, seed))
        return drawn[-1]

    sources = RandomSources(stochastic, None, None)
    out = round_cpfloat(x.ravel(order="F"), fmt, mode, *map(bool, switches), sources).reshape(x.shape, order="F")
    return out, (np.concatenate(drawn) if drawn else np.zeros(0))


def stochastic_elementwise(ns, x: np.ndarray, spec, numbers: np.ndarray) -> np.ndarray:
    """The elementwise rounding with ``numbers`` given to the inexact elements in column-major order."""
    need = cpfloat_inexact(ns, x, spec)
    order = np.flatnonzero(need.ravel(order="F"))
    assert order.size == numbers.size  # as many numbers as the reference drew
    u = np.full(x.size, 2.0)
    u[order] = numbers
    return round_cpfloat_elementwise(ns, x, spec, u.reshape(x.shape, order="F"))


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", list(FORMATS))
def test_stochastic_rounding_is_the_reference_with_the_same_numbers(name, dtype):
    """Modes 5 and 6, every switch: the same elements draw (in column-major order) and, given the
    reference's numbers, the same bits."""
    fmt = FORMATS[name]
    x = edge_values(fmt, dtype)
    x = x[: x.size // 6 * 6].reshape(6, -1)  # 2-D: column-major order differs from memory order
    failures = []
    for mode in (5, 6):
        for switches in SWITCHES:
            want, numbers = stochastic_reference(x, fmt, mode, switches, seed=mode)
            got = stochastic_elementwise(library_namespace("numpy"), x, spec_of(fmt, mode, *switches), numbers)
            assert got.dtype == x.dtype and got.shape == x.shape
            bad = np.flatnonzero(~same_bits(got, want).ravel())
            if bad.size:
                failures.append((mode, switches, x.ravel()[bad[:3]], got.ravel()[bad[:3]], want.ravel()[bad[:3]]))
    assert not failures, f"{len(failures)} settings differ, e.g. {failures[:3]}"


def test_stochastic_comparison_can_fail():
    """Other numbers give other bits, and mode 6 differs from mode 5 (the test above has teeth)."""
    fmt = FORMATS["float8_e4m3fn"]
    x = edge_values(fmt, np.float64).reshape(-1, 1)
    want, numbers = stochastic_reference(x, fmt, 5, (1, 1, 0, 1), seed=5)
    spec = spec_of(fmt, 5, 1, 1, 0, 1)
    assert same_bits(stochastic_elementwise(library_namespace("numpy"), x, spec, numbers), want).all()
    assert not same_bits(stochastic_elementwise(library_namespace("numpy"), x, spec, numbers[::-1].copy()), want).all()
    # (with saturation: mode 6 then draws for the same elements as mode 5, beyond xmax too)
    want, numbers = stochastic_reference(x, fmt, 5, (1, 1, 1, 1), seed=5)
    assert not same_bits(stochastic_elementwise(library_namespace("numpy"), x, spec_of(fmt, 6, 1, 1, 1, 1), numbers),
                         want).all()


@pytest.mark.parametrize("subnormal", [0, 1])
def test_tiny_inputs_below_a_grid_above_one(subnormal):
    """A format whose smallest number is 2^51 (t = 1, emin = emax = 51): a positive float64
    subnormal input x lies strictly between 0 and 2^51, so round up and round to odd give 2^51,
    the other deterministic modes 0 (stated mathematics).  |x| / 2^51 underflows in float64: the
    reference once read it as exact and returned 0 for every mode."""
    from pychop_compat.kernels import numpy_cpfloat

    fmt = Format(1, 51, ("c",), emin=51)
    x = np.array([4.3e-309, 5e-324, 2.0**-1030])
    expected = {-1: 0.0, 0: 0.0, 1: 0.0, 2: 2.0**51, 3: 0.0, 4: 0.0, 7: 2.0**51}
    for mode, value in expected.items():
        spec = spec_of(fmt, mode, subnormal, 1, 0, 1)
        want = np.full(x.shape, value)
        assert same_bits(round_cpfloat(x, fmt, mode, bool(subnormal), True, False, True, MATLAB_STREAM), want).all()
        assert same_bits(round_cpfloat_elementwise(library_namespace("numpy"), x, spec), want).all()
        assert same_bits(numpy_cpfloat.round_array(x, spec), want).all()
    assert same_bits(round_cpfloat(-x, fmt, 3, bool(subnormal), True, False, True, MATLAB_STREAM),
                     np.full(x.shape, -2.0**51)).all()  # round down of a negative one


# --- stochastic rounding beyond xmax: CPFloat's rule ----------------------------------------------
#
# CPFloat's C source, src/cpfloat_template.h at commit 3583976 (github.com/north-numerical-computing/
# cpfloat), without saturation (its overflow value ofvalue is Inf, or NaN with infinity off):
# * RS_PROP_SCALAR (mode 5): for xmax < |x| < xbnd = 2^emax (2 - 2^-t) it adds the random integer
#   R of the W = p - t dropped bits, shifted right by one, and keeps t + 1 bits: the sum carries to
#   xbnd exactly when R >> 1 >= 2^(W-1) - d, d = (|x| - xmax) / 2^(e-p+1), probability d / 2^(W-1)
#   = (|x| - xmax) / (xbnd - xmax); then "ABS(x) >= xbnd" overflows, as every |x| >= xbnd does.
# * RS_EQUI_SCALAR (mode 6): "ABS(y) > xmax && ABS(y) != ofvalue" takes a random bit: ofvalue or
#   xmax, with y's sign; +-Inf too when ofvalue is NaN (infinity off).
# Here the number u in [0, 1) decides: mode 5 overflows when u <= (|x| - xmax) / (xbnd - xmax) (as
# u <= r rounds up elsewhere: probability (|x| - xmax) / (xbnd - xmax)), mode 6 when u <= 1/2.

FP16_XMAX, FP16_XBND = 65504.0, 65520.0  # fp16 (t = 11, emax = 15): 2^15 (2 - 2^-10), 2^15 (2 - 2^-11)


def _beyond_xmax_implementations(x: np.ndarray, spec, u: np.ndarray) -> dict:
    """The reference, the NumPy namespace kernel and (when Numba is installed) the compiled kernel
    on the 1-D ``x`` with the number ``u[i]`` for element ``i``."""
    got = {"reference": round_cpfloat(x, spec.fmt, spec.round, spec.keeps_subnormals, spec.limits_exponent,
                                      spec.saturation, spec.infinity, MATLAB_STREAM, u),
           "namespace": round_cpfloat_elementwise(library_namespace("numpy"), x, spec, u)}
    try:
        from pychop_compat.kernels import numba_cpfloat
    except ImportError:
        return got
    got["numba"] = numba_cpfloat.round_stochastic(x, spec, u)
    return got


@pytest.mark.parametrize("infinity", [1, 0])
def test_stochastic_rounding_beyond_xmax_follows_cpfloats_c_rule(infinity):
    """The thresholds of CPFloat's rule (notes above) with given numbers, both signs, every
    implementation: mode 5 at 65519 overflows for u <= 15/16 only, xbnd = 65520 and 2^16 always;
    mode 6 at 1e6 and 2^16 (exact: it still takes a number) for u <= 1/2; +-Inf with infinity off
    is NaN for u <= 1/2, else +-xmax.  We used to overflow 65519 with probability 15/32, xbnd
    with 1/2, and 1e6 and 2^16 always in mode 6, +-Inf always to NaN."""
    over = np.inf if infinity else np.nan
    p = (65519.0 - FP16_XMAX) / (FP16_XBND - FP16_XMAX)  # 15/16
    above = np.nextafter(p, 1.0)
    half_above = np.nextafter(0.5, 1.0)
    cases = {  # mode: (x, u, expected magnitude)
        5: [(65519.0, p, over), (65519.0, above, FP16_XMAX), (65519.0, 0.0, over),
            (FP16_XBND, 0.999, over), (2.0**16, 0.999, over), (np.nextafter(FP16_XBND, 0.0), 0.999, over),
            (65505.0, 1 / 16, over), (65505.0, np.nextafter(1 / 16, 1.0), FP16_XMAX)],
        6: [(1e6, 0.5, over), (1e6, half_above, FP16_XMAX), (2.0**16, 0.5, over), (2.0**16, half_above, FP16_XMAX),
            (65519.0, 0.5, over), (65519.0, half_above, FP16_XMAX), (np.inf, 0.5, np.nan if not infinity else np.inf),
            (np.inf, half_above, FP16_XMAX if not infinity else np.inf)],
    }
    for mode, rows in cases.items():
        x = np.array([row[0] for row in rows])
        u = np.array([row[1] for row in rows])
        want = np.array([row[2] for row in rows])
        spec = make_spec("fp16", mode, infinity=bool(infinity))
        for signed_x, signed_want in ((x, want), (-x, -want)):  # (-: the sign bit, NaN's too, as in CPFloat)
            for name, got in _beyond_xmax_implementations(signed_x, spec, u).items():
                assert same_bits(got, signed_want).all(), (name, mode, signed_x, got, signed_want)


def test_stochastic_rounding_beyond_xmax_with_explim_off():
    """explim = 0: CPFloat's xmax and xbnd are those of the storage's exponent range with the
    target's precision (DEFEMAX in COMPUTE_GLOBAL_PARAMS), 2^1023 (2 - 2^-10) and 2^1023 (2 - 2^-11)
    for fp16 in float64; halfway between them mode 5 overflows for u <= 1/2; xbnd and the largest
    double always."""
    xmax, xbnd = math.ldexp(2 - 2.0**-10, 1023), math.ldexp(2 - 2.0**-11, 1023)
    x = np.array([xmax + (xbnd - xmax) / 2] * 2 + [xbnd, np.finfo(np.float64).max])
    u = np.array([0.5, np.nextafter(0.5, 1.0), 0.999, 0.999])
    spec = make_spec("fp16", 5, explim=False)
    for name, got in _beyond_xmax_implementations(x, spec, u).items():
        assert same_bits(got, np.array([np.inf, xmax, np.inf, np.inf])).all(), (name, got)


def test_correct_rounding_beyond_xmax_keeps_chops_rule():
    """rules='correct' (chop's options) decides overflow on the rounded value, as chop.m: 65520 is
    halfway between 65504 and 2^16 (which overflows), so it overflows for u <= 1/2 only, in both
    modes; the exact 2^16 rounds to itself (Inf) whatever u."""
    x = np.array([FP16_XBND, FP16_XBND, 2.0**16])
    u = np.array([0.5, 0.75, 0.75])
    fmt = lookup_format("fp16")
    for mode in (5, 6):
        want = np.array([np.inf, FP16_XMAX, np.inf])
        got = round_cpfloat(x, fmt, mode, True, True, False, True, MATLAB_STREAM, u, rules="correct")
        assert same_bits(got, want).all(), (mode, got)
    with pytest.raises(ValueError, match="rules"):
        round_cpfloat(x, fmt, 5, True, True, False, True, MATLAB_STREAM, u, rules="chop")


def test_mode_6_draws_beyond_xmax_and_for_inf_without_infinity():
    """Mode 6 takes a number for every |x| > xmax (2^16, exact in fp16's top-but-one grid, too)
    and, with infinity off, for +-Inf, in column-major order with the inexact elements; 1.0 and
    NaN take none; with saturation or in mode 5, 2^16 and Inf take none (their result is fixed)."""
    x = np.array([1.0, 2.0**16, -np.inf, 1 + 2.0**-12, np.nan, 1e6])
    ns = library_namespace("numpy")
    expected = {(6, True, False): [0, 1, 0, 1, 0, 1], (6, False, False): [0, 1, 1, 1, 0, 1],
                (6, False, True): [0, 0, 0, 1, 0, 1], (5, False, False): [0, 0, 0, 1, 0, 1]}
    for (mode, infinity, saturation), takes in expected.items():
        drawn = []

        def stochastic(n):
            drawn.append(n)
            return np.full(n, 0.25)

        spec = make_spec("fp16", mode, infinity=infinity, saturation=saturation)
        round_cpfloat(x, spec.fmt, mode, True, True, saturation, infinity, RandomSources(stochastic, None, None))
        assert drawn == [sum(takes)], (mode, infinity, saturation, drawn)
        assert cpfloat_inexact(ns, x, spec).astype(int).tolist() == takes


def test_stochastic_rounding_beyond_xmax_has_cpfloats_probabilities():
    """Statistics against the C rule's probabilities (notes above): fp16, 20000 draws each through
    round_to_format on both CPU engines, within 5 standard deviations: 65519 overflows with
    probability 15/16 in mode 5 and xbnd always; in mode 6 1e6 gives 65504 or Inf, and Inf with
    infinity off NaN or 65504, each with probability 1/2 (CPFloat's C library: 0.937, 1.000,
    0.499 and 0.502 with PCG)."""
    from pychop_compat.kernels.compiled import cpu_engine
    from pychop_compat.rounding import round_to_format

    n = 20000
    gen = np.random.default_rng(11)
    checks = [(5, True, 65519.0, np.isinf, 15 / 16), (5, True, FP16_XBND, np.isinf, 1.0),
              (6, True, 1e6, np.isinf, 0.5), (6, False, np.inf, np.isnan, 0.5), (6, False, -1e6, np.isnan, 0.5)]
    engines = ["numpy"] + (["numba"] if importlib.util.find_spec("numba") else [])
    for engine in engines:
        for mode, infinity, value, event, p in checks:
            with cpu_engine(engine):
                got = round_to_format(np.full(n, value), "fp16", mode, infinity=infinity, randfunc=gen.random)
            assert np.all(event(got) | (np.abs(got) == FP16_XMAX))
            share = event(got).mean()
            assert abs(share - p) <= 5 * math.sqrt(p * (1 - p) / n) + 1e-12, (engine, mode, value, share, p)


# --- torch tensors off the CPU (the device path, run on CPU tensors) ------------------------------


@pytest.fixture
def torch_device_path(monkeypatch, device_paths_on_cpu):
    """CPU tensors take the routes of CUDA tensors; none may be copied to the host."""
    torch = pytest.importorskip("torch")
    from pychop_compat.engines import torch_engine

    def host_call(*args, **kwargs):
        raise AssertionError("a tensor was copied to the host")

    monkeypatch.setattr(torch_engine, "to_host", host_call)
    return torch


@pytest.mark.parametrize("part", ["sample", pytest.param("rest", marks=pytest.mark.slow)])
def test_cpfloat_corpus_on_the_torch_device_path(torch_device_path, part):
    """Every untagged case of the CPFloat corpus that the MEX accepts, bit for bit, on tensors
    (float64 and float32 storage), with no host round trip: every 8th case in the default profile
    (a wrapper row: the kernel runs the whole corpus on NumPy), the others under -m slow."""
    import test_cpfloat_corpus as corpus

    torch = torch_device_path
    accepted = [case for case in corpus.UNTAGGED if case["mex_error"] is None and case["round"] not in (5, 6)]
    assert len(accepted) == 1884  # the untagged cases that the MEX accepts (the others raise)
    checked, failures = 0, []
    for k, case in enumerate(accepted):
        if (k % 8 == 0) != (part == "sample"):
            continue
        clear_cpfloat()
        x, want = corpus.ARRAYS[case["input"]], corpus.ARRAYS[case["output"]]
        got = cpfloat(torch.from_numpy(x.copy()), corpus.fpopts(case))
        assert isinstance(got, torch.Tensor) and got.dtype == torch.from_numpy(x).dtype
        checked += 1
        if not corpus.bits_equal(got.numpy(), want).all():
            failures.append(case["id"])
    clear_cpfloat()
    assert not failures, f"{len(failures)} cases differ: {failures[:10]}"
    assert checked == (236 if part == "sample" else 1884 - 236)


@pytest.mark.parametrize("random_bits", [0, 3])
@pytest.mark.parametrize("mode", [5, 6])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", ["float8_e4m3fn", "float4_e2m1fn", "float8_e5m2fnuz", "bf16", "[3, -4, 5]"])
def test_stochastic_rounding_on_the_torch_device_path(torch_device_path, name, dtype, mode, random_bits):
    """CPFloat's stochastic modes on tensors off the CPU: MATLAB's stream drawn by the host for
    the inexact elements in column-major order, the rounding on the device; the NumPy engine's
    bits from the same stream state, and the stream left where the NumPy engine leaves it."""
    from pychop_compat import rand, rng
    from pychop_compat.rounding import round_to_format

    torch = torch_device_path
    fmt = FORMATS[name]
    x = edge_values(fmt, dtype)
    x = x[: x.size // 8 * 8].reshape(8, -1)
    spec = make_spec(fmt, mode, random_bits=random_bits, saturation=name == "bf16")
    rng(3)
    want = dispatch.round_array(x, spec, MATLAB_STREAM)  # the host kernels
    after = rand(1, 4)
    rng(3)
    got = round_to_format(torch.from_numpy(x.copy()).T.contiguous().T, spec)  # a non-contiguous tensor
    assert got.shape == x.shape and got.dtype == torch.from_numpy(x).dtype
    assert same_bits(got.numpy(), want).all()
    assert np.array_equal(rand(1, 4), after)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_torch_dtypes_and_shapes(torch_device_path, dtype):
    """float16/bfloat16 tensors are rounded in float32 and cast back, as on the host."""
    torch = torch_device_path
    fmt = lookup_format("float8_e5m2")
    spec = make_spec(fmt, -1)
    x = torch.randn(6, 7, generator=torch.Generator().manual_seed(3)).to(getattr(torch, dtype)) * 100
    from pychop_compat.rounding import round_to_format

    got = round_to_format(x.t(), spec)  # a transposed (non-contiguous) tensor
    work = x.t().float() if dtype in ("float16", "bfloat16") else x.t()
    want = round_cpfloat(work.contiguous().numpy().ravel(), fmt, -1, True, True, False, True, MATLAB_STREAM)
    want = torch.from_numpy(want.reshape(work.shape)).to(x.dtype)
    assert got.dtype == x.dtype and got.shape == x.t().shape and got.is_contiguous()
    same_width = {2: torch.int16, 4: torch.int32, 8: torch.int64}[x.element_size()]
    assert torch.equal(got.view(same_width), want.view(same_width))  # bit for bit


# --- JAX: eager and under jit, no host call ----------------------------------------------------------


def _jax_points():
    """(name, dtype, part): the default profile runs each name's sample in one dtype (float32 and
    float64 alternate across the names, E8M0 in float32, where the router widens); the other
    dtype and the rest under -m slow."""
    names = ["float8_e4m3fn", "float4_e2m1fn", "float8_e5m2fnuz", "float8_e8m0fnu", "bf16", "[3, -4, 5]"]
    for k, name in enumerate(names):
        for d, dtype in enumerate([np.float32, np.float64]):
            for part in ("sample", "rest"):
                default = part == "sample" and d == (k + 1) % 2
                yield pytest.param(name, dtype, part, marks=[] if default else [pytest.mark.slow],
                                   id=f"{name}-{np.dtype(dtype).name}-{part}")


@pytest.mark.parametrize("name, dtype, part", list(_jax_points()))
def test_jax_eager_and_jit_stay_on_the_device(monkeypatch, name, dtype, part):
    """The JAX wrapper of the namespace kernel (checked in full on NumPy above): the default profile
    runs every mode and every switch setting, a third of their pairs (each a compilation); the
    other pairs under -m slow."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    from pychop_compat.rounding import round_to_format

    from pychop_compat.engines import jax_engine

    def host_call(*args, **kwargs):
        raise AssertionError("a JAX array was copied to the host")

    monkeypatch.setattr(jax_engine, "to_host", host_call)
    fmt = FORMATS[name]
    x = edge_values(fmt, dtype)
    xj = jnp.asarray(x)
    failures = []
    for k, mode in enumerate((-1, 1, 2, 3, 7, 8)):
        for j, switches in enumerate(((1, 1, 0, 1), (0, 1, 1, 0), (1, 0, 0, 1))):
            if ((k + j) % 3 == 0) != (part == "sample"):
                continue
            spec = spec_of(fmt, mode, *switches)
            if fmt.encoding == "e8m0" and dtype == np.float32 and switches[1]:
                # E8M0's smallest number 2^-127 is below float32's normal range: the router rounds
                # float32 in float64 (on every library; CHANGELOG 0.3.0), the rule on float64 values
                want = round_cpfloat(x.astype(np.float64), fmt, mode, *map(bool, switches),
                                     MATLAB_STREAM).astype(np.float32)
            else:
                want = round_cpfloat(x, fmt, mode, *map(bool, switches), MATLAB_STREAM)
            eager = round_to_format(xj, spec)
            assert isinstance(eager, jax.Array) and eager.dtype == dtype
            if not same_bits(np.asarray(eager), want).all():
                failures.append(("eager", mode, switches))
            if mode in ((-1, 1) if dtype == np.float64 else (7, 8)):  # compiling is slow: a few under jit
                jitted = jax.jit(lambda v, spec=spec: round_to_format(v, spec))(xj)
                if not same_bits(np.asarray(jitted), want).all():
                    failures.append(("jit", mode, switches))
    assert not failures, failures[:5]


# --- random formats (property test) --------------------------------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@st.composite
def random_settings(draw):
    """A custom [t, emin, emax] inside the storage's range, a mode (stochastic ones included),
    the four switches and a storage dtype."""
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    p, emin_s, emax_s = (24, -126, 127) if dtype == np.float32 else (53, -1022, 1023)
    t = draw(st.integers(1, p))
    emin = draw(st.integers(emin_s, emax_s - 1))
    emax = draw(st.integers(max(emin, 1 - emin if emin < 0 else emin), emax_s))
    mode = draw(st.sampled_from([-1, 0, 1, 2, 3, 4, 5, 6, 7]))
    switches = tuple(draw(st.integers(0, 1)) for _ in range(4))
    return dtype, Format(t, emax, ("c",), emin=emin), mode, switches


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_settings(), st.integers(0, 2**32 - 1))
def test_random_formats_are_the_reference(setting, seed):
    """Random bit patterns (every exponent field, random significands, zeros, Inf, NaN) and values
    around the format's range through a random custom format, mode and switches: the elementwise
    code gives the reference's bits (stochastic modes with the reference's numbers)."""
    dtype, fmt, mode, switches = setting
    rng = np.random.default_rng(seed)
    unsigned = np.uint32 if dtype == np.float32 else np.uint64
    width = 8 * np.dtype(dtype).itemsize
    patterns = rng.integers(0, 1 << 62, 3000, dtype=np.uint64) >> np.uint64(64 - width)
    x = patterns.astype(unsigned).view(dtype)
    with np.errstate(all="ignore"):
        near = (rng.standard_normal(3000) * np.exp2(rng.integers(fmt.emin - fmt.t - 3, fmt.emax + 3, 3000))
                ).astype(dtype)
    x = np.concatenate([x, -x, near, np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0], dtype)]).reshape(-1, 2)
    spec = spec_of(fmt, mode, *switches)
    if mode in (5, 6):
        want, numbers = stochastic_reference(x, fmt, mode, switches, seed=seed)
        got = stochastic_elementwise(library_namespace("numpy"), x, spec, numbers)
    else:
        want = round_cpfloat(x.ravel(), fmt, mode, *map(bool, switches), MATLAB_STREAM).reshape(x.shape)
        got = round_cpfloat_elementwise(library_namespace("numpy"), x, spec)
    bad = ~same_bits(got, want)
    assert not bad.any(), (fmt.t, fmt.emin, fmt.emax, mode, switches, x[bad][:3], got[bad][:3], want[bad][:3])
