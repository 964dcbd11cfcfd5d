"""The OCP/ML formats on JAX arrays: on the device and under ``jax.jit``, no host round trip.

chop's rules on a signed format of the catalogue (``float8_e4m3fn``,
``float4_e2m1fn``, the ``fnuz`` and float6 formats, ...) are computed by the
elementwise rounding (``engines/elementwise.py``) with the format's encoding
applied on bit patterns (``encode_bits``).  Oracles: ml_dtypes' cast with
chop.m's underflow rule stated in the test (round to nearest), and the NumPy
engine bit for bit in every mode (itself checked against ml_dtypes and
chop.m's rules in ``test_format_edges.py``); stochastic rounding with
``Chop(rng=<int>)``'s counter numbers, the same on both engines.
"""

from __future__ import annotations

import numpy as np
import pytest

from bits import assert_bits_equal

jax = pytest.importorskip("jax")
pytest.importorskip("ml_dtypes")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

from pychop_compat import Chop, chop  # noqa: E402
from pychop_compat.engines import dispatch  # noqa: E402
from pychop_compat.kernels.compiled import cpu_engine  # noqa: E402
from pychop_compat import chop_jax  # noqa: E402
from pychop_compat.random.sources import MATLAB_STREAM  # noqa: E402


def supports(spec) -> bool:
    """Whether the router rounds a JAX array by ``spec`` on the device (the namespace kernel)."""
    return dispatch.route(jnp.zeros(3), spec, MATLAB_STREAM).kernel.name == "namespace"
from pychop_compat.formats import catalogue_format  # noqa: E402
from pychop_compat.matlab.options import resolve  # noqa: E402

from test_format_edges import NAMES, cast, embedded  # noqa: E402

#: Elements per test array (the edge values are the first ones of embedded()'s positions).
SIZE = 40000


def sample(name, dtype) -> np.ndarray:
    """Edge values of ``name`` among ordinary ones (a part of test_format_edges.embedded)."""
    x, positions = embedded(name, dtype)
    keep = np.zeros(x.size, bool)
    keep[:SIZE] = True
    keep[positions] = True
    return x[keep]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", NAMES)
def test_round_to_nearest_under_jit_is_the_cast_with_chops_underflow_rule(name, dtype):
    """ml_dtypes' cast (one correct rounding, the format's overflow), except chop.m's
    underflow rule: (xmins/2, xmins/2 (1 + 2^-t)] gives +0, and zero results are +0."""
    fmt = catalogue_format(name)
    x = sample(name, dtype)
    a = np.abs(x.astype(np.float64))
    half = fmt.xmins / 2
    want = cast(x, name)
    want = np.where((a > half) & (a <= half * (1 + 2.0 ** -fmt.t)), 0.0, want)
    want = np.where(want == 0, 0.0, want)
    got = np.asarray(jax.jit(lambda v: chop_jax(v, {"rules": "chop", "format": name}))(jnp.asarray(x)))
    assert got.dtype == dtype and not np.signbit(got[got == 0]).any()
    g = got.astype(np.float64)
    ok = (g == want) | (np.isnan(g) & np.isnan(want))
    assert ok.all(), list(zip(x[~ok][:5], g[~ok][:5], want[~ok][:5]))


def _deterministic_points():
    """Every (name, dtype, mode, subnormal); each option set is an XLA compilation, so the default
    profile runs one per name (across the names every mode appears with each dtype, and both
    subnormal settings with each), the rest under -m slow."""
    for k, name in enumerate(NAMES):
        for d, dtype in enumerate([np.float32, np.float64]):
            for mode in (1, 2, 3, 4):
                for subnormal in (0, 1):
                    sampled = mode - 1 == k % 4 and d == (k // 4) % 2 and subnormal == (k // 2) % 2
                    marks = [] if sampled else [pytest.mark.slow]
                    yield pytest.param(name, dtype, mode, subnormal, marks=marks,
                                       id=f"{name}-{np.dtype(dtype).name}-{mode}-{subnormal}")


@pytest.mark.parametrize("name, dtype, mode, subnormal", list(_deterministic_points()))
def test_deterministic_modes_stay_on_the_device(monkeypatch, name, dtype, mode, subnormal):
    """chop on a JAX array never calls the NumPy engine for these specs and gives its bits,
    eagerly and under jit."""
    options = {"rules": "chop", "format": name, "round": mode, "subnormal": subnormal}
    x = sample(name, dtype)
    with cpu_engine("numpy"):
        want = chop(x, options)
    assert supports(resolve(options, None, "single" if dtype == np.float32 else "double").spec)
    spec = resolve(options, None, "single" if dtype == np.float32 else "double").spec
    assert dispatch.route(jnp.asarray(x), spec, MATLAB_STREAM).kernel.name == "namespace"  # not the host
    eager = chop(jnp.asarray(x), options)
    jitted = jax.jit(lambda v: chop(v, options))(jnp.asarray(x))
    assert isinstance(eager, jax.Array) and eager.dtype == dtype
    assert_bits_equal(eager, want, "eager")
    assert_bits_equal(jitted, want, "jitted")


def _stochastic_points():
    """(name, dtype, mode): each an XLA compilation, so the default profile runs one dtype per name
    and mode (alternating: every name meets both dtypes and both modes), the other under -m slow."""
    for k, name in enumerate(["float8_e4m3fn", "float4_e2m1fn", "float8_e5m2fnuz", "float6_e2m3fn"]):
        for d, dtype in enumerate([np.float32, np.float64]):
            for mode in (5, 6):
                yield pytest.param(name, dtype, mode, marks=[] if d == (k + mode) % 2 else [pytest.mark.slow],
                                   id=f"{name}-{np.dtype(dtype).name}-{mode}")


@pytest.mark.parametrize("name, dtype, mode", list(_stochastic_points()))
def test_stochastic_modes_with_counter_numbers_equal_the_numpy_engine(name, dtype, mode):
    """``Chop(options, rng=seed)`` gives every element the same counter number on both
    engines: the same bits (on the device for JAX)."""
    options = {"rules": "chop", "format": name, "round": mode}
    x = sample(name, dtype)
    with cpu_engine("numpy"):
        want = Chop(options, rng=11)(x)
    got = np.asarray(Chop(options, rng=11)(jnp.asarray(x)))
    assert_bits_equal(got, want)


def test_what_still_goes_to_the_host():
    """E8M0 (unsigned), bit flips on an OCP format and CPFloat's rules: not elementwise."""
    assert not supports(resolve({"rules": "chop", "format": "float8_e8m0fnu"}, None, "double").spec)
    assert not supports(resolve({"rules": "chop", "format": "float8_e4m3fn", "flip": 1}, None, "double").spec)
    x = np.array([0.3, 1000.0, -7.0])
    with cpu_engine("numpy"):
        want = chop(x, {"rules": "chop", "format": "float8_e8m0fnu"})
    assert_bits_equal(chop(jnp.asarray(x), {"rules": "chop", "format": "float8_e8m0fnu"}), want)
    with pytest.raises(ValueError, match="only supported by the NumPy engine"):
        chop_jax(jnp.asarray(x), {"rules": "chop", "format": "float8_e8m0fnu"})


def test_e8m0_of_float32_is_rounded_in_float64_on_the_device():
    """E8M0's smallest number 2^-127 is a float32 subnormal: a float32 JAX array is rounded in
    float64 (its subnormals rebuilt from their bits: XLA's conversions flush them) and written
    back bit for bit, eagerly, under jit and through chop_jax.  Oracle: ml_dtypes' cast, with the
    correct rounding below 2^-126 stated in test_format_names.reference_cast.  Without 64-bit
    types a concrete array goes through the host and a traced one is refused."""
    from test_format_names import reference_cast, spanning_values

    name = "float8_e8m0fnu"
    x = spanning_values(name, 20000)
    tiny = np.ldexp(np.arange(1, 4097, dtype=np.float64), -149 - 11).astype(np.float32)  # 2^-160 .. 2^-148
    x = np.concatenate([x, tiny, np.float32(2.0 ** -127) * np.float32([0.5, 0.75, 1, 1.25, 1.5, 1.75, 2])])
    want = reference_cast(x, name)
    for got in (chop(jnp.asarray(x), name), jax.jit(lambda v: chop(v, name))(jnp.asarray(x)),
                chop_jax(jnp.asarray(x), name)):
        got = np.asarray(got)
        assert got.dtype == np.float32
        assert_bits_equal(got.astype(np.float64), want)
    jax.config.update("jax_enable_x64", False)
    try:
        assert_bits_equal(np.asarray(chop(jnp.asarray(x), name)).astype(np.float64), want)
        with pytest.raises(TypeError, match="jax_enable_x64"):
            jax.jit(lambda v: chop(v, name))(jnp.asarray(x))
    finally:
        jax.config.update("jax_enable_x64", True)
