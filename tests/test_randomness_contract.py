"""The randomness contract (docs/randomness.rst, pychop_compat.random.sources): one test per promise.

Expected values: fp16 neighbours computed here (values in [0.25, 0.5) have fp16
spacing 2^-12), MATLAB's stream after ``rng(seed)`` (itself checked against
MathWorks' published numbers in test_matlab_random.py), NumPy Generators with
known seeds, and the reference algorithm fed those numbers.

The promises of ``Chop(rng=<int seed>)`` (the counter-based generator on every
engine) are tested by the work that implements them (issue 21).
"""

from __future__ import annotations

import numpy as np
import pytest

from pychop_compat import Chop, chop, rand, rng
from pychop_compat.random import counter as device_random
from pychop_compat.engines.dispatch import round_array
from pychop_compat.matlab.options import resolve
from pychop_compat.random.sources import (ELEMENT_ORDER, INT_SEED_SOURCE, RandomSources, Source,
                                      SourcePlan, default_source, generator_sources, source_for)

# Six values in [0.25, 0.5): none is an fp16 number, each lies between k/2^12 and (k+1)/2^12.
X = np.array([[0.30, 0.32, 0.34], [0.31, 0.33, 0.35]])
DOWN = np.floor(X * 2.0**12) / 2.0**12
UP = DOWN + 2.0**-12


# --- the table ------------------------------------------------------------------------------------------

def test_default_sources():
    assert default_source("numpy") is Source.MATLAB_STREAM
    assert default_source("torch", "cpu") is Source.MATLAB_STREAM
    assert default_source("torch", "cuda") is Source.DEVICE_COUNTER
    assert default_source("cupy", "cuda") is Source.DEVICE_COUNTER
    assert default_source("jax") is Source.MATLAB_STREAM  # concrete JAX arrays draw on the host
    with pytest.raises(ValueError, match="Unknown array library"):
        default_source("mxnet")


def test_matlab_stream_on_device_switches_gpu_arrays_to_the_stream():
    from pychop_compat.random.sources import matlab_stream_on_device

    with matlab_stream_on_device():
        assert default_source("torch", "cuda") is Source.MATLAB_STREAM
    assert default_source("torch", "cuda") is Source.DEVICE_COUNTER


def test_source_for_a_call():
    assert source_for(X) == SourcePlan(Source.MATLAB_STREAM, Source.MATLAB_STREAM)
    assert source_for(X, rng=np.random.default_rng(1)) == SourcePlan(Source.GENERATOR, Source.GENERATOR)
    assert source_for(X, rng=5) == SourcePlan(INT_SEED_SOURCE, INT_SEED_SOURCE)
    assert source_for(X, randfunc=lambda n: np.zeros(n)) == SourcePlan(Source.RANDFUNC, Source.MATLAB_STREAM)
    torch = pytest.importorskip("torch")
    assert source_for(torch.zeros(3)).stochastic is Source.MATLAB_STREAM


def test_element_orders():
    assert {ELEMENT_ORDER[s] for s in (Source.MATLAB_STREAM, Source.GENERATOR, Source.RANDFUNC)} == {"column-major"}
    assert ELEMENT_ORDER[Source.DEVICE_COUNTER] == "row-major index"
    assert set(ELEMENT_ORDER) == set(Source)


# --- NumPy arrays and CPU tensors: MATLAB's stream, chop.m's order ------------------------------------

def test_numpy_default_is_matlab_stream_in_column_major_order():
    # Mode 6 rounds up exactly when its number is <= 1/2.  The k-th number of the stream after
    # rng(3) goes to the k-th element in column-major order, X[k % 2, k // 2].
    rng(3)
    u = rand(6, 1).ravel()
    rng(3)
    c = chop(X, {"format": "h", "round": 6})
    expected = np.where((u <= 0.5).reshape(X.shape, order="F"), UP, DOWN)
    assert np.array_equal(c, expected)
    assert rand() == _nth_after(3, 6)


def _nth_after(seed, skipped):
    rng(seed)
    rand(skipped, 1)
    return rand()


def test_memory_layout_does_not_change_the_order():
    for y in (X, np.asfortranarray(X), np.ascontiguousarray(X), X[:, ::-1][:, ::-1]):
        rng(4)
        c = chop(y, {"format": "h", "round": 5})
        rng(4)
        assert np.array_equal(c, chop(np.array(X), {"format": "h", "round": 5}))


def test_randfunc_is_called_as_chop_m_calls_it():
    # One call for the normal block (elements needing a number, column-major), then one for the
    # elements in fp16's subnormal range (below 2^-14), in the same order.
    calls = []

    def randfunc(n):
        calls.append(n)
        return np.full(n, 0.25)

    x = np.array([[0.3, 2.0**-20 * 1.3], [1.0, 0.31]])  # 1.0 is exact: no number
    chop(x, {"format": "h", "round": 5, "randfunc": randfunc})
    assert calls == [2, 1]


def test_cpu_tensors_get_the_numpy_numbers():
    torch = pytest.importorskip("torch")
    rng(8)
    expected = chop(X, {"format": "b", "round": 5, "flip": 1})
    rng(8)
    got = chop(torch.from_numpy(X.copy()), {"format": "b", "round": 5, "flip": 1})
    assert np.array_equal(got.numpy(), expected)


def test_chunks_in_column_major_order_reproduce_the_whole_call():
    # A sequential stream, column-major order, no element in the subnormal block: chopping the
    # columns one call at a time consumes the same numbers in the same order as one call.
    big = np.random.default_rng(5).uniform(0.1, 10.0, (7, 9))
    rng(9)
    whole = chop(big, {"format": "q43", "round": 5})
    rng(9)
    parts = np.column_stack([chop(big[:, j], {"format": "q43", "round": 5}) for j in range(big.shape[1])])
    assert np.array_equal(parts, whole)


# --- a Chop's own Generator --------------------------------------------------------------------------

def test_generator_draws_sequentially_in_chop_m_order():
    x = np.random.default_rng(2).uniform(-3, 3, (6, 5))
    spec = resolve({"format": "b", "round": 5, "flip": 1, "p": 0.3}, None).spec
    ch = Chop({"format": "b", "round": 5, "flip": 1, "p": 0.3}, rng=np.random.default_rng(99))
    first, second = ch(x), ch(x)
    twin = generator_sources(np.random.default_rng(99))
    assert np.array_equal(first, round_array(x, spec, twin, kernel="reference"))
    assert np.array_equal(second, round_array(x, spec, twin, kernel="reference"))  # continues the generator
    assert not np.array_equal(first, second)


def test_generator_does_not_touch_matlab_stream():
    rng(6)
    Chop({"format": "h", "round": 5, "flip": 1}, rng=np.random.default_rng(1))(X)
    assert rand() == _nth_after(6, 0)


def test_randfunc_with_generator_for_flips():
    # randfunc supplies the rounding numbers; the flips come from the Chop's generator.
    settings = resolve({"format": "h", "round": 5, "flip": 1, "p": 1.0, "randfunc": lambda n: np.full(n, 0.5)}, None)
    spec = settings.spec
    got = Chop(settings.to_options(), rng=np.random.default_rng(7))(X)
    g = np.random.default_rng(7)
    feed = RandomSources(lambda n: np.full(n, 0.5), g.random, generator_sources(g).flip_randi)
    assert np.array_equal(got, round_array(X, spec, feed, kernel="reference"))


# --- GPU numbers: the counter-based generator ----------------------------------------------------------

def test_counter_numbers_are_the_stated_function():
    # u(j) = ((mix64(key + j*G) >> 12) + 1/2) * 2^-52, SplitMix64's finaliser (engines/device_random.py).
    G, M1, M2, MASK = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB, 2**64 - 1

    def mix(z):
        z &= MASK
        z = ((z ^ (z >> 30)) * M1) & MASK
        z = ((z ^ (z >> 27)) * M2) & MASK
        return z ^ (z >> 31)

    key = mix(5 + 1 * G)
    for j in (0, 1, 2**40):
        u = ((mix(key + j * G) >> 12) + 0.5) * 2.0**-52
        assert device_random.counter_uniform(key, j) == u and 0 < u < 1


def test_seed_device_and_rng_are_independent():
    rng(10)
    device_random.seed_device(123)
    assert rand() == _nth_after(10, 0)
    device_random.seed_device(5)
    before = device_random.take("contract-test", 0)
    rng(11)
    rand(10, 1)
    assert device_random.take("contract-test", 0) == before  # rng moved no device counter
    assert before.keys == tuple(device_random.mix64(5 + s * device_random.GOLDEN) for s in (1, 2, 3))
    device_random.seed_device(0)


def test_device_counter_advances_by_elements():
    device_random.seed_device(2)
    assert device_random.take("contract-test", 10).offset == 0
    assert device_random.take("contract-test", 5).offset == 10
    assert device_random.take("other-device", 1).offset == 0  # one counter per device
    device_random.seed_device(0)


def test_device_counter_chunks_in_row_major_order_reproduce_the_whole_call(device_paths_on_cpu):
    # Element i (row-major) of a call has counter offset + i, and each call advances the counter
    # by its size: rows chopped one call at a time, in order, get the single call's numbers.
    # Run on the GPU code path with CPU tensors (the router's test hook).
    torch = pytest.importorskip("torch")

    x = torch.from_numpy(np.random.default_rng(6).uniform(0.1, 10.0, (5, 8)))
    options = {"format": "b", "round": 5, "flip": 1, "p": 0.25}
    device_random.seed_device(41)
    whole = chop(x, options)
    device_random.seed_device(41)
    rows = torch.stack([chop(x[i], options) for i in range(x.shape[0])])
    device_random.seed_device(0)
    assert torch.equal(rows, whole)


def test_counter_offsets_at_and_beyond_2_63_on_the_compiled_small_path():
    # The counter is defined modulo 2**64: an Arithmetic sharing a CounterRng at 2**63 + 5 rounds its
    # call with the numbers u(2**63 + 5 + i), here stated through the definition on Python ints.  The
    # compiled small path once passed the offset as a Python int, which Numba refused
    # (OverflowError) after it had compiled the int64 case for an ordinary call.
    from pychop_compat.arithmetic import Arithmetic, chopped

    x = np.linspace(1, 2, 100) * (1 + 2**-30)
    Chop({"format": "h", "round": 5}, rng=3)(x)  # an ordinary offset first (the int64 compilation)
    for start in (2**63 + 5, 2**64 - 40):
        got = np.asarray(chopped(x, Arithmetic({"format": "h", "round": 5}, rng=device_random.CounterRng(3, start))))
        key = device_random.stream_keys(3)[0]
        u = np.array([device_random.counter_uniform(key, (start + i) % 2**64) for i in range(x.size)])
        assert np.array_equal(got, Chop({"format": "h", "round": 5, "randfunc": lambda n: u[:n]})(x))


@pytest.mark.parametrize("options", [{"format": "float8_e4m3fn", "round": 5},
                                     {"format": "h", "round": 5, "rules": "correct"}])
def test_counter_numbers_of_a_0d_call_raise_no_overflow_warning(options, recwarn):
    # The counter's arithmetic wraps modulo 2**64 by definition; a 0-d call on the host's path of
    # formats beyond chop.m warned twice of an overflow (NumPy's scalar arithmetic) where a call on
    # one element did not.  The value must be that of the one-element call.
    for x in (1.3, np.array(1.3)):
        got = Chop(options, rng=7)(x)
        assert float(got) == float(Chop(options, rng=7)(np.array([1.3]))[0])
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]
