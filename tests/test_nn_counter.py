"""The fast CPU paths of pychop_compat.nn: ``Rounder(rng=<int seed>)`` (the counter-based
generator, eager and under torch.compile), the eager stochastic rounding with given numbers
(the host kernels) at the edges of its comparison against the namespace kernel, and chop on
CPU tensors through the compiled CPU engine.

Oracles: the definition of the counter-based generator (``device_random.counter_uniform``,
Python integers), and chop on NumPy arrays by the NumPy engine with the same numbers."""

from __future__ import annotations

import numpy as np
import pytest

from bits import assert_bits_equal

torch = pytest.importorskip("torch")

from pychop_compat import Chop  # noqa: E402
from pychop_compat.random import counter as device_random  # noqa: E402
from pychop_compat.kernels.compiled import cpu_engine  # noqa: E402
from pychop_compat.random.counter import CounterRng  # noqa: E402
from pychop_compat.engines.dispatch import round_array  # noqa: E402
from pychop_compat.kernels.elementwise import ElementDraws, chop_elementwise  # noqa: E402
from pychop_compat.kernels.xp import library_namespace  # noqa: E402
from pychop_compat.random.sources import given_sources  # noqa: E402
from pychop_compat.nn import Rounder  # noqa: E402
from pychop_compat.matlab.options import resolve  # noqa: E402


def _samples(dtype, n, seed):
    """Normal, subnormal, huge, tiny and special values, both signs."""
    g = np.random.default_rng(seed)
    span = (-160, 140) if dtype == np.float32 else (-1080, 1030)
    with np.errstate(over="ignore"):
        a = (g.standard_normal(n) * np.exp2(g.integers(*span, n).astype(float))).astype(dtype)
    special = np.array([0.0, np.inf, np.nan, 65504, 65520, 2**-24, 2**-25, 3 * 2**-26, 1e-45, 1.0, 1 / 3,
                        2**-14 * 1.5, 3.0e38], dtype=dtype)
    return np.concatenate([a, special, -special])


# --- the counter-based numbers as torch operations ---------------------------------------------

def test_counter_uniform_is_the_definition():
    """Element i gets ((mix(key + (offset + i) G) >> 12) + 1/2) 2^-52, modulo 2^64 arithmetic:
    an int offset, a tensor offset, an offset that wraps past 2^64, eager and compiled."""
    key = CounterRng(2024).keys[0]
    xp = library_namespace("torch").xp

    def counter_uniform(key, offset, counters):
        return device_random.uniform(xp, key, offset, counters)

    counters = torch.tensor([0, 1, 2, 7, 1000, 123456789], dtype=torch.int64)
    for offset in (0, 5, 2**40 + 3, 2**64 - 2):
        want = [device_random.counter_uniform(key, offset + int(i)) for i in counters]
        as_int64 = offset - 2**64 if offset >= 2**63 else offset
        got = counter_uniform(key, as_int64, counters)
        assert got.dtype == torch.float64 and got.tolist() == want
        got_tensor = counter_uniform(key, torch.tensor(as_int64), counters)
        assert got_tensor.tolist() == want
    compiled = torch.compile(lambda off, c: counter_uniform(key, off, c), fullgraph=True)
    for offset in (3, 2**64 - 4):
        as_int64 = offset - 2**64 if offset >= 2**63 else offset
        want = [device_random.counter_uniform(key, offset + int(i)) for i in counters]
        assert compiled(torch.tensor(as_int64), counters).tolist() == want


# --- Rounder(rng=<int seed>) is Chop(options, rng=seed), call after call ----------------------

RNG_OPTIONS = [{"format": "h", "round": 5}, {"format": "q43", "round": 5, "subnormal": 1},
               {"format": "q52", "round": 6, "subnormal": 0}]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_seeded_rounder_is_chop_with_that_seed_eager_and_compiled(dtype):
    """A sequence of calls, eager and compiled mixed, of different sizes: each result is that
    of the same call of Chop(options, rng=seed) on a NumPy array (the NumPy engine)."""
    torch._dynamo.reset()
    rounders = [Rounder(options, rng=11 + k) for k, options in enumerate(RNG_OPTIONS)]
    compiled = torch.compile(lambda v: [r(v) for r in rounders], fullgraph=True, dynamic=True)
    references = [Chop(options, rng=11 + k) for k, options in enumerate(RNG_OPTIONS)]
    sizes = [700, 31, 2000, 700, 5]
    for k, n in enumerate(sizes):
        x = _samples(dtype, n, seed=k)
        with cpu_engine("numpy"):
            wants = [reference(x) for reference in references]
        tensor = torch.from_numpy(x.copy())
        gots = compiled(tensor) if k % 2 == 0 else [r(tensor) for r in rounders]
        for options, got, want in zip(RNG_OPTIONS, gots, wants):
            assert_bits_equal(got, want, f"call {k}, {options}")
        assert_bits_equal(tensor, x)  # the input is not modified
    for rounder in rounders:
        assert int(rounder._counter_offset) == sum(n + 26 for n in sizes)  # one counter per element


def test_seeded_rounder_keeps_half_dtypes_and_shapes():
    rounder = Rounder("h", "stochastic", rng=3)
    reference = Chop({"format": "h", "round": 5}, rng=3)
    x = torch.randn(4, 5, 6).to(torch.bfloat16)
    compiled = torch.compile(lambda v: rounder(v), fullgraph=True)
    got = compiled(x)
    want = reference(x.float().numpy())  # chop rounds bfloat16 in single (row-major counters)
    assert got.dtype == torch.bfloat16 and got.shape == x.shape
    assert torch.equal(got, torch.from_numpy(want).to(torch.bfloat16))


def test_seeded_rounder_copies_continue_its_sequence_and_compile_inside_a_quantizer():
    import copy
    import pickle

    from pychop_compat.nn import Quantizer

    rounder = Rounder("h", "stochastic", rng=5)
    reference = Chop({"format": "h", "round": 5}, rng=5)
    x = torch.randn(1000)
    assert_bits_equal(rounder(x), reference(x.numpy()))
    want = reference(x.numpy())  # the second call
    for twin in (copy.deepcopy(rounder), pickle.loads(pickle.dumps(rounder))):
        assert_bits_equal(twin(x), want)
    quantizer = Quantizer("h", None, "stochastic", forward_rng=9)
    leaf = torch.randn(300, requires_grad=True)
    y = torch.compile(quantizer, fullgraph=True)(leaf)
    y.sum().backward()
    want = Chop({"format": "h", "round": 5}, rng=9)(leaf.detach().numpy())
    assert_bits_equal(y, want)
    assert torch.equal(leaf.grad, torch.ones(300))  # the straight-through estimator


def test_seeded_rounder_refuses_given_numbers():
    rounder = Rounder("h", "stochastic", rng=3)
    with pytest.raises(ValueError, match="uniforms"):
        rounder(torch.ones(3), torch.full((3,), 0.5))


# --- the eager stochastic rounding with given numbers at the edges of its comparison -----------

def _namespace_kernel(x, spec, u):
    return chop_elementwise(library_namespace("torch"), x, spec, ElementDraws(u))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mode", [5, 6])
def test_eager_stochastic_rounding_at_ties_and_odd_numbers(dtype, mode):
    """Mode 5 rounds up when u <= fraction (and the fraction is not 0), mode 6 when u <= 1/2:
    numbers equal to each element's fraction, one step either side of it, 1/2 and its
    neighbours, 0, 1, NaN, above 1 and below 0; the eager path of a CPU tensor (the host
    kernels with the numbers given per element) against the namespace kernel (which compares
    floats as chop.m does)."""
    x = torch.from_numpy(_samples(dtype, 3000, seed=21))
    mant = 52 if dtype == np.float64 else 23
    for fmt in ("h", "b", "q43"):
        spec = resolve({"format": fmt, "round": mode}, None, "double" if dtype == np.float64 else "single").spec
        shift = mant - spec.fmt.t + 1
        bits = x.view(torch.int64 if dtype == np.float64 else torch.int32)
        fraction = (bits & ((1 << shift) - 1)).to(x.dtype) * 2.0**-shift  # exact: below 2^(mant+1)
        down = torch.nextafter(fraction, torch.zeros_like(fraction))
        above = torch.nextafter(fraction, torch.ones_like(fraction))
        half = torch.full_like(x, 0.5)
        odd = torch.tensor([0.0, 1.0, float("nan"), 1.5, -0.25, 2.0**-60, 1e30, -1e30], dtype=x.dtype)
        for u in (fraction, down, above, half, torch.nextafter(half, torch.ones_like(half)),
                  torch.nextafter(half, torch.zeros_like(half)), odd.repeat(x.numel() // 8 + 1)[:x.numel()]):
            assert_bits_equal(round_array(x, spec, given_sources(u)), _namespace_kernel(x, spec, u), f"{fmt} mode {mode}")


# --- chop on CPU tensors through the compiled CPU engine ------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_chop_on_cpu_tensors_through_the_compiled_engine_is_the_numpy_engine(dtype):
    """Modes 1 to 6 (MATLAB's stream and a seed), bit flips, a non-contiguous view: the
    tensor's values are those of the NumPy engine on the same array."""
    pytest.importorskip("numba")
    from pychop_compat import rng

    base = _samples(dtype, 3974, seed=3).reshape(80, -1)
    for options in ({"format": "h"}, {"format": "b", "round": 2}, {"format": "q43", "round": 4, "subnormal": 0},
                    {"format": "h", "round": 5}, {"format": "b", "round": 6},
                    {"format": "h", "round": 1, "flip": 1, "p": 0.2}):
        for array in (base, base[:, ::3].T):
            for seed in (None, 8):
                rng(1)
                with cpu_engine("numpy"):
                    want = Chop(options, rng=seed)(array)
                rng(1)
                with cpu_engine("numba"):
                    got = Chop(options, rng=seed)(torch.from_numpy(array))
                assert got.shape == array.shape and got.dtype == torch.from_numpy(array).dtype
                assert_bits_equal(got, want, f"{options}, seed {seed}")


# --- stochastic rounding: the namespace kernel against the host kernels, at every threshold -----

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_stochastic_rounding_of_the_namespace_kernel_equals_the_host_kernels(dtype):
    """The namespace kernel's stochastic rounding (the compiled and GPU path of nn) against the
    NumPy engine given the same numbers, on values around every threshold of each format (the
    subnormal block, xmins/2, xmin, xmax, xboundary, the carrier's subnormals), with numbers
    equal to each element's fraction, multiples of 2^-k (ties with the subnormal block's
    fractions), 0, 1/2 and random ones."""
    from test_nn_quantize import BIT_FORMATS, _around_thresholds

    mant = 52 if dtype == np.float64 else 23
    g = torch.Generator().manual_seed(1)
    for options in BIT_FORMATS + [{"format": "c", "params": [11, 5]}]:
        x = torch.from_numpy(np.concatenate([_samples(dtype, 1500, seed=3), _around_thresholds(dtype, options)]))
        for mode in (5, 6):
            spec = resolve(dict(options, round=mode), None, "double" if dtype == np.float64 else "single").spec
            shift = mant - spec.fmt.t + 1
            bits = x.view(torch.int64 if dtype == np.float64 else torch.int32)
            numbers = [torch.rand(x.shape, dtype=x.dtype, generator=g), torch.zeros_like(x), torch.full_like(x, 0.5),
                       (bits & ((1 << shift) - 1)).to(x.dtype) * 2.0**-shift]
            numbers += [torch.randint(0, 2**k, x.shape, generator=g).to(x.dtype) * 2.0**-k for k in (1, 3, 8)]
            for u in numbers:
                with cpu_engine("numpy"):
                    want = round_array(x.numpy(), spec, given_sources(u.numpy()))
                assert_bits_equal(_namespace_kernel(x, spec, u), want, f"{options}, mode {mode}")


@pytest.mark.slow  # five rounders through Inductor (about 20 s): CI's slow step
def test_compiled_with_dynamic_true_on_float64_equals_eager():
    """torch.compile(dynamic=True) traces the plan's integers as symbols; a shift of them
    (1 << 52 for float64) overflowed in Inductor's C++ before the plan carried the shifted
    constants.  Compiled results must equal eager ones (themselves chop's) on float64 and float32."""
    rounders = [Rounder("h"), Rounder("q43", "up"), Rounder({"format": "h", "round": 5, "explim": 0}),
                Rounder("b", "stochastic", subnormal=True), Rounder("q52", "stochastic_equal")]
    compiled = torch.compile(lambda v, u: [r(v, u) for r in rounders], fullgraph=True, dynamic=True)
    for dtype in (np.float64, np.float32):
        x = torch.from_numpy(_samples(dtype, 700, seed=4))
        u = torch.rand(x.shape, dtype=x.dtype)
        for rounder, got in zip(rounders, compiled(x, u)):
            assert_bits_equal(got, rounder(x, u), f"{rounder} {dtype}")
