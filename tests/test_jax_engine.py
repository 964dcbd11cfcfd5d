"""The JAX engine: types, devices, jit/vmap, subnormals under XLA, and random numbers.

The engine matrix and the MATLAB corpus run on JAX through the ``engine``
fixture (``tests/conftest.py``).  Here: what only JAX has.  Oracles: NumPy's
float16 cast, the NumPy engine (itself checked against MATLAB's corpus), and
for the random numbers, the NumPy engine element by element fed the same
numbers through ``randfunc``, and the counter generator's definition.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)  # float64 arrays (JAX's default is 32-bit)
import jax.numpy as jnp  # noqa: E402

from engine_matrix import assert_bits_equal, make_input  # noqa: E402
from pychop_compat import Chop, chop  # noqa: E402
from pychop_compat.random import counter as device_random  # noqa: E402
from pychop_compat import chop_jax  # noqa: E402
from pychop_compat.formats import lookup_format  # noqa: E402

OPTIONS = [{"format": "h"}, {"format": "b", "round": 2}, {"format": "q43", "round": 3, "subnormal": 1},
           {"format": "s", "round": 4}, {"format": "d", "subnormal": 1}, {"format": "h", "explim": 0}]


def _input(dtype, fmt="h", seed=1):
    return make_input(lookup_format(fmt), dtype, seed)


def _jit_points():
    """(options, dtype): each option set is three XLA compilations, so the default profile runs each
    in one dtype (alternating), the other dtype under -m slow."""
    for k, options in enumerate(OPTIONS):
        for d, dtype in enumerate(["float64", "float32"]):
            yield pytest.param(options, dtype, marks=[] if d == k % 2 else [pytest.mark.slow],
                               id="-".join(f"{key}{value}" for key, value in options.items()) + f"-{dtype}")


@pytest.mark.parametrize("options, dtype", list(_jit_points()))
def test_jit_and_vmap_equal_numpy(options, dtype):
    x = _input(dtype, options["format"])
    expected = chop(x.copy(), options)
    xj = jnp.asarray(x)
    jitted = jax.jit(lambda a: chop_jax(a, options))(xj)
    assert isinstance(jitted, jax.Array) and jitted.dtype == xj.dtype and jitted.shape == xj.shape
    assert_bits_equal(np.asarray(jitted), expected, f"jit {options}")
    mapped = jax.vmap(lambda row: chop_jax(row, options))(xj)
    assert_bits_equal(np.asarray(mapped), expected, f"vmap {options}")
    # chop itself (the persistent facade) traces too for deterministic modes
    assert_bits_equal(np.asarray(jax.jit(lambda a: chop(a, options))(xj)), expected, f"chop in jit {options}")


def test_xla_flushes_subnormals_and_chop_does_not():
    """XLA on the CPU treats subnormal operands and results as zero; chop's result keeps them."""
    tiny = np.array([1e-45, 3e-39, -2.5e-40, 1.1754942e-38], np.float32)
    flushed = np.asarray(jax.jit(lambda a: a * 2.0)(jnp.asarray(tiny)))
    cpu = jax.devices()[0].platform == "cpu"
    if cpu:
        assert (flushed == 0).all(), "XLA kept subnormals: the workaround is no longer needed"
    for options in ({"format": "s", "subnormal": 1}, {"format": "d"}, {"format": "s", "explim": 0}):
        out = np.asarray(jax.jit(lambda a: chop_jax(a, options))(jnp.asarray(tiny)))
        assert_bits_equal(out, tiny, f"float32 subnormals kept by {options}")  # single keeps them: exact
    tiny64 = np.array([5e-324, -1e-310, 2.2250738585072e-308])
    out = np.asarray(jax.jit(lambda a: chop_jax(a, {"format": "d", "subnormal": 1}))(jnp.asarray(tiny64)))
    assert_bits_equal(out, tiny64, "float64 subnormals")
    # chop's own subnormal range of half precision: multiples of 2^-24, from float16's cast
    halves = np.array([3e-8, 6.1e-5, -4.5e-6, 2.9802322387695312e-08])
    out = np.asarray(jax.jit(lambda a: chop_jax(a, {"format": "h", "subnormal": 1}))(jnp.asarray(halves)))
    np.testing.assert_array_equal(out, halves.astype(np.float16).astype(np.float64))


def test_dtypes_device_and_sharding_are_kept():
    x = jnp.asarray(np.array([[0.1, 1 / 3], [2.5, -7.1]]))
    for dtype in (jnp.float64, jnp.float32, jnp.float16, jnp.bfloat16):
        xd = x.astype(dtype)
        out = chop(xd, {"format": "h"})
        assert out.dtype == dtype and out.shape == xd.shape
        assert out.devices() == xd.devices() and out.sharding == xd.sharding
    ints = chop(jnp.arange(4), {"format": "h"})
    assert ints.dtype == jnp.float64
    device = jax.devices()[-1]
    placed = jax.device_put(x, device)
    assert chop(placed, {"format": "b", "round": 5}).devices() == {device}  # the host path puts it back


def test_explicit_key_numbers_equal_numpy_fed_the_same_numbers():
    """chop_jax(key=k): element i uses uniform(fold_in(k, 1))[i]; the NumPy engine given that number
    (one element at a time through randfunc) rounds it the same way."""
    x = _input("float64", "h", seed=5)[:40]
    key = jax.random.key(7)
    for mode in (5, 6):
        options = {"format": "h", "round": mode, "subnormal": 1}
        out = np.asarray(jax.jit(lambda a, k: chop_jax(a, options, key=k))(jnp.asarray(x), key))
        numbers = np.asarray(jax.random.uniform(jax.random.fold_in(key, 1), x.shape, jnp.float64))
        expected = np.array([chop(np.array([v]), {**options, "randfunc": lambda n, u=u: np.full(n, u)})[0]
                             for v, u in zip(x.ravel(), numbers.ravel())]).reshape(x.shape)
        ok = (out == expected) | (np.isnan(out) & np.isnan(expected))  # zeros: sign may differ (documented)
        assert ok.all(), np.flatnonzero(~ok)[:5]
        again = np.asarray(chop_jax(jnp.asarray(x), options, key=key))
        assert_bits_equal(again, out, "the same key gives the same result")


def test_counter_numbers_match_the_definition_and_the_torch_device_path():
    """chop_jax(seed=s, offset=o): element i uses u_s(o + i) of device_random; equal bit for bit to the
    torch engine's device path with the same counter (seed_device(s), first call)."""
    torch = pytest.importorskip("torch")
    from pychop_compat.engines.dispatch import device_paths_on_cpu

    for dtype in ("float64", "float32"):
        x = _input(dtype, "b", seed=3)
        for options in ({"format": "b", "round": 5, "subnormal": 1}, {"format": "b", "round": 6},
                        {"format": "b", "round": 1, "flip": 1, "p": 0.3}, {"format": "b", "round": 5, "flip": 1}):
            out = jax.jit(lambda a, o: chop_jax(a, options, seed=11, offset=o))(jnp.asarray(x), 0)
            device_random.seed_device(11)
            with device_paths_on_cpu():
                expected = chop(torch.from_numpy(x.copy()), options).numpy()
            assert_bits_equal(np.asarray(out), expected, f"{dtype} {options}")
    # the numbers themselves: the definition, in Python integers
    keys = (device_random.mix64(5 + device_random.GOLDEN),)
    got = np.asarray(device_random.uniform(jnp, keys[0], 2**64 - 3, jnp.arange(6, dtype=jnp.int64)))
    want = [device_random.counter_uniform(keys[0], (2**64 - 3 + i) % 2**64) for i in range(6)]
    assert got.tolist() == want


def test_random_modes_inside_jit_need_explicit_numbers():
    x = jnp.asarray(np.linspace(0, 1, 7))
    with pytest.raises(TypeError, match="key="):
        jax.jit(lambda a: chop(a, {"format": "h", "round": 5}))(x)
    with pytest.raises(ValueError, match="key=<jax.random key>"):
        chop_jax(x, {"format": "h", "round": 5})
    with pytest.raises(ValueError, match="randfunc"):
        chop_jax(x, {"format": "h", "round": 5, "randfunc": np.random.rand})
    with pytest.raises(TypeError, match="jax.Array"):
        chop_jax(np.ones(3))


def test_eager_random_modes_use_the_facade_numbers():
    """Outside jit, chop draws MATLAB's stream (chop.m's order) like NumPy; Chop(rng=Generator) likewise."""
    from pychop_compat import rng

    x = _input("float64", "h", seed=9)
    options = {"format": "h", "round": 5, "flip": 1}
    rng(3)
    expected = chop(x.copy(), options)
    rng(3)
    assert_bits_equal(np.asarray(chop(jnp.asarray(x), options)), expected, "MATLAB stream")
    gen_expected = Chop(options, rng=np.random.default_rng(4))(x.copy())
    got = Chop(options, rng=np.random.default_rng(4))(jnp.asarray(x))
    assert_bits_equal(np.asarray(got), gen_expected, "Generator")


def test_float32_without_x64():
    """JAX's default (no x64): float32 arrays work, integers are refused, keys give float32 numbers."""
    code = textwrap.dedent("""
        import numpy as np, jax, jax.numpy as jnp
        from pychop_compat import chop
        from pychop_compat import chop_jax
        x = np.array([0.1, -1/3, 1e-45, 3e-39, 7e4, 2.0**-25], np.float32)
        for o in ({'format': 'h'}, {'format': 's', 'subnormal': 1}, {'format': 'b', 'round': 3}, {'format': 'd'}):
            assert np.array_equal(np.asarray(chop(jnp.asarray(x), o)), chop(x, o)), o
        out = jax.jit(lambda a, k: chop_jax(a, {'format': 'h', 'round': 5}, key=k))(jnp.asarray(x), jax.random.key(0))
        assert out.dtype == jnp.float32
        try:
            chop(jnp.arange(3), {'format': 'h'})
        except TypeError as e:
            assert 'jax_enable_x64' in str(e)
        else:
            raise AssertionError('integers accepted without x64')
        try:  # t > 24 under jit: the x64 reason, not the host stream's (0.6.0 spoke of key=)
            jax.jit(lambda a: chop(a, {'format': 'd'}))(jnp.asarray(x))
        except TypeError as e:
            assert 'jax_enable_x64' in str(e) and 'key=' not in str(e), str(e)
        else:
            raise AssertionError('t > 24 accepted under jit without x64')
        print('ok')
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_chop_rng_seed_on_jax_equals_numpy():
    """Chop(options, rng=seed): the counter-based numbers, computed on the device for JAX arrays,
    equal to the NumPy engine's counter path (issue 21) call after call; chop_jax(seed=, offset=) too."""
    from pychop_compat.random import sources as randomness

    if not hasattr(randomness, "counter_sources"):
        pytest.skip("Chop(rng=<int>) is not counter-based in this build")
    for dtype in ("float64", "float32"):
        x = _input(dtype, "b", seed=12)
        for options in ({"format": "b", "round": 5, "subnormal": 1}, {"format": "h", "round": 6, "flip": 1}):
            on_numpy, on_jax = Chop(options, rng=9), Chop(options, rng=9)
            for call in range(2):
                expected = on_numpy(x.copy())
                got = on_jax(jnp.asarray(x))
                assert isinstance(got, jax.Array)
                ok = (np.asarray(got) == expected) | (np.isnan(expected) & np.isnan(np.asarray(got)))
                assert ok.all(), (dtype, options, call)
                traced = jax.jit(lambda a, o: chop_jax(a, options, seed=9, offset=o))(jnp.asarray(x), call * x.size)
                assert_bits_equal(np.asarray(traced), np.asarray(got), f"chop_jax {options} call {call}")


def test_the_old_spelling_of_chop_jax_warns_and_works():
    """``pychop_compat.engines.jax_engine.chop_jax`` (before 0.2.0) is the facade's ``chop_jax``,
    with a DeprecationWarning, for one release."""
    import importlib

    import pychop_compat

    jax_engine = importlib.import_module("pychop_compat.engines.jax_engine")
    with pytest.warns(DeprecationWarning, match="moved to pychop_compat.matlab.api.chop_jax"):
        old = jax_engine.chop_jax
    assert old is pychop_compat.chop_jax
    x = jnp.asarray(np.linspace(-2, 2, 9))
    assert_bits_equal(np.asarray(old(x, {"format": "h"})), np.asarray(chop_jax(x, {"format": "h"})), "old spelling")
    with pytest.raises(AttributeError):
        jax_engine.no_such_name


def test_numbers_given_per_element_reach_the_jax_kernel():
    """Stochastic rounding with the numbers given per element (what ``nn`` passes for torch) uses
    them on a JAX array as on NumPy's: the same bits, and other numbers give other bits (it raised
    "need the elements' numbers" before)."""
    from pychop_compat.engines.dispatch import round_array
    from pychop_compat.matlab.options import resolve
    from pychop_compat.random.sources import given_sources

    spec = resolve({"format": "h", "round": 5}, None).spec
    rng = np.random.default_rng(7)
    x, u = rng.standard_normal(64), rng.random(64)
    want = round_array(x, spec, given_sources(u))
    got = round_array(jnp.asarray(x), spec, given_sources(jnp.asarray(u)))
    assert isinstance(got, jax.Array)
    assert_bits_equal(np.asarray(got), want, "given numbers on JAX")
    assert (want != round_array(x, spec, given_sources(1 - u))).any()


def test_chop_jax_checks_seed_and_offset():
    x, options = jnp.array([0.1, 0.7]), {"format": "h", "round": 5}
    for bad in ({"seed": 3.0}, {"seed": True}, {"seed": jnp.int32(3)}, {"seed": 1, "offset": 1.5}):
        with pytest.raises(TypeError):
            chop_jax(x, options, **bad)
    for bad_seed in (-1, 2**64):  # as Chop(rng=<int>): one stream per seed, so no wrap modulo 2**64
        with pytest.raises(ValueError, match=r"\[0, 2\*\*64\)"):
            chop_jax(x, options, seed=bad_seed)
    assert_bits_equal(np.asarray(chop_jax(x, options, seed=np.int64(1), offset=np.int64(0))),
                      np.asarray(Chop(options, rng=1)(np.asarray(x))), "NumPy integers as seed and offset")


@pytest.mark.parametrize("options", [{"format": "bf16"}, {"format": "float8_e4m3fn"}, {"format": "binary16"},
                                     {"format": "h", "rules": "correct"}])
def test_stochastic_rounding_of_float64_subnormals_without_exponent_limit(options):
    """explim=0, subnormal=0: a float64 subnormal x rounds to sign(x) xmin (2^-1022) when the number
    u <= |x| / xmin, else to a signed 0 (mathematics; |x| 2^1022 is exact).  JAX rounded them all to
    0 before (XLA flushed the subnormal in the fraction |x| / xmin), and equals the NumPy engine's
    Chop(rng=seed) bit for bit."""
    from pychop_compat.engines.dispatch import round_array
    from pychop_compat.matlab.options import resolve
    from pychop_compat.random.sources import given_sources

    options = dict(options, round=5, explim=0, subnormal=0)
    rng = np.random.default_rng(3)
    tiny = np.finfo(np.float64).tiny
    x = rng.random(2000) * tiny * np.where(rng.random(2000) < 0.5, -1.0, 1.0)
    x[:3] = [1.5e-308, -5e-324, 0.0]
    u = rng.random(x.size)
    want = np.copysign(np.where(u <= np.abs(x) * 2.0**1022, tiny, 0.0), x)
    spec = resolve(options, None).spec
    got = np.asarray(round_array(jnp.asarray(x), spec, given_sources(jnp.asarray(u))))
    assert_bits_equal(got, want, f"given numbers {options}")
    assert 0 < np.count_nonzero(got) < x.size
    assert_bits_equal(np.asarray(Chop(options, rng=0)(jnp.asarray(x))), Chop(options, rng=0)(x), f"rng=0 {options}")


@pytest.mark.parametrize("options", [{"format": "float8_e4m3fn", "round": 5}, {"format": "bf16", "round": 6},
                                     {"format": "h", "round": 5, "rules": "correct"}])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_chop_jax_rounds_correct_rounding_stochastically_as_chop_with_a_seed(options, dtype):
    # Names beyond chop.m's round correctly; their random modes take each element's counter numbers,
    # which chop_jax(seed=) states as Chop(options, rng=seed) on NumPy (it refused them before).
    x = (np.random.default_rng(0).standard_normal((37, 5)) * np.logspace(-12, 3, 5)).astype(dtype)
    first, second = Chop(options, rng=5), np.asarray(chop_jax(jnp.asarray(x), options, seed=5, offset=x.size))
    assert_bits_equal(np.asarray(chop_jax(jnp.asarray(x), options, seed=5)), first(x))
    assert_bits_equal(second, first(x))  # the object's second call: counters from x.size
    jitted = jax.jit(lambda v: chop_jax(v, options, seed=5))
    assert_bits_equal(np.asarray(jitted(jnp.asarray(x))), Chop(options, rng=5)(x))
