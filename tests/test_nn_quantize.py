"""pychop_compat.nn.quantize, Rounder and Quantizer: forward equals chop bit for bit; the
backward pass follows the straight-through estimator's mathematics."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from bits import assert_bits_equal

torch = pytest.importorskip("torch")

from pychop_compat import Chop, chop, rng  # noqa: E402
from pychop_compat.nn import GradientRule, Quantizer, Rounder, apply_quantizer, quantize  # noqa: E402

FORMATS = ["q43", "q52", "b", "h", "s", "d", {"format": "c", "params": [5, 6]}]


def _samples(dtype, n=3000, seed=0):
    """Normal, subnormal, huge, tiny and special values of a float dtype, with both signs."""
    g = np.random.default_rng(seed)
    span = (-160, 140) if dtype == np.float32 else (-1080, 1030)
    with np.errstate(over="ignore"):
        a = (g.standard_normal(n) * np.exp2(g.integers(*span, n).astype(float))).astype(dtype)
    special = np.array([0.0, np.inf, np.nan, 65504, 65520, 65519.99, 2**-24, 2**-25, 3 * 2**-26,
                        2**-15, 1e-45, 448, 480, 240, 248, 232, 1.0, 3.0, 2**-14 * 1.5, 5e-324], dtype=dtype)
    return torch.from_numpy(np.concatenate([a, special, -special]))


def _x_class(x):
    return "double" if x.dtype == torch.float64 else "single"


def _values(t):
    """The values with -0 read as +0 (compared bit for bit): hardware casts keep the sign of an
    underflow, chop gives +0."""
    return t.detach() + 0.0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fmt", FORMATS, ids=str)
def test_forward_equals_chop_deterministic(dtype, fmt):
    """Modes 1-4, subnormals on/off, explim on/off: bit for bit chop's (sign of zero included)."""
    x = _samples(dtype)
    base = {"format": fmt} if isinstance(fmt, str) else fmt
    for mode in (1, 2, 3, 4):
        for subnormal in (0, 1):
            for explim in (0, 1):
                options = dict(base, round=mode, subnormal=subnormal, explim=explim)
                want = chop(x, options)
                got = quantize(x, options)
                assert_bits_equal(got, want, str(options))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mode", [5, 6])
@pytest.mark.parametrize("explim", [0, 1])
def test_forward_equals_chop_stochastic_given_uniforms(dtype, mode, explim):
    """Stochastic rounding with the same number per element as chop's randfunc gives."""
    x = _samples(dtype, n=400, seed=1)
    u = torch.from_numpy(np.random.default_rng(2).random(x.numel()))
    u[:8] = torch.tensor([0.5, 0.25, 2.0**-53, 1 - 2.0**-53] * 2, dtype=torch.float64)  # edges of the comparison
    current = [0.0]
    for fmt in ("q43", "b", "h"):
        for subnormal in (0, 1):
            options = {"format": fmt, "round": mode, "subnormal": subnormal, "explim": explim}
            # chop on one element at a time, its randfunc returning that element's number.
            one = Chop(dict(options, randfunc=lambda n: np.full(n, current[0])))
            want = torch.empty_like(x)
            for i in range(x.numel()):
                current[0] = float(u[i])
                want[i] = one(x[i:i + 1])[0]
            got = quantize(x, options, uniforms=u)
            if explim == 0:
                # chop keeps -0 when its block draws nothing (a whole-array property; documented).
                zero = (want == 0) & (got == 0)
                want[zero], got[zero] = 0.0, 0.0
            assert_bits_equal(got, want, str(options))


def test_rng_chop_is_chop_with_matlab_stream():
    x = _samples(np.float64, n=500)
    for mode in (5, 6):
        rng(7)
        want = chop(x, {"format": "b", "round": mode})
        rng(7)
        got = quantize(x, "b", mode, rng="chop")
        assert_bits_equal(got, want)
    got = quantize(x, "h", "stochastic", rng=3)  # Chop(options, rng=3)'s numbers
    want = Chop({"format": "h", "round": 5}, rng=3)(x)
    assert_bits_equal(got, want)


def test_hardware_casts_are_round_to_nearest():
    """An independent oracle: torch's float32 -> float16 / bfloat16 casts round to nearest even."""
    g = np.random.default_rng(3)
    x = torch.from_numpy((g.standard_normal(20000) * np.exp2(g.integers(-30, 18, 20000))).astype(np.float32))
    assert_bits_equal(_values(quantize(x, "h")), _values(x.half().float()))
    y = torch.from_numpy((g.standard_normal(20000) * np.exp2(g.integers(-140, 126, 20000))).astype(np.float32))
    assert_bits_equal(_values(quantize(y, "b", subnormal=True)), _values(y.bfloat16().float()))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_dtypes_keep_their_dtype(dtype):
    x = torch.cat([torch.linspace(-3, 3, 1001), torch.tensor([1e-7, -3e-8, 6e-5, 70000.0])]).to(dtype)
    for options in ({"format": "q43"}, {"format": "h"}, {"format": "b"}, {"format": "b", "subnormal": 1},
                    {"format": "q52", "round": 2}):
        got = quantize(x, options)
        assert got.dtype == dtype and got.shape == x.shape
        assert_bits_equal(got, chop(x, options), str(options))


def test_stochastic_rounding_is_unbiased_with_torchs_generator():
    """E[SR(x)] = x: 1/3 lies 1/3 of the way between bfloat16 neighbours a < b (mathematics)."""
    torch.manual_seed(0)
    x = torch.full((200000,), 1 / 3, dtype=torch.float64)
    got = quantize(x, "b", "stochastic")
    a, b = 170 * 2.0**-9, 171 * 2.0**-9  # bfloat16 neighbours of 1/3 (8 bits: spacing 2^-9 in [1/4, 1/2))
    assert set(np.unique(got.numpy())) == {a, b}
    p_up = (1 / 3 - a) / (b - a)
    frac_up = float((got == b).double().mean())
    assert abs(frac_up - p_up) < 4 * np.sqrt(p_up * (1 - p_up) / x.numel())
    torch.manual_seed(0)
    assert torch.equal(quantize(x, "b", "stochastic"), got)  # reproducible from torch's seed
    generator = torch.Generator().manual_seed(5)
    first = quantize(x[:100], "b", "stochastic", rng=generator)
    assert torch.equal(first, quantize(x[:100], "b", "stochastic", rng=torch.Generator().manual_seed(5)))


def test_straight_through_gradient():
    """d quantize(x) / dx = 1 (the estimator): the incoming gradient comes back unchanged."""
    x = _samples(np.float64, n=200).clone().requires_grad_(True)
    upstream = torch.from_numpy(np.random.default_rng(4).standard_normal(x.numel()))
    quantize(x, "q43").backward(upstream)
    assert torch.equal(x.grad, upstream)


def test_clipped_gradient_is_zero_outside_the_range():
    """clip=True: gradient 1 on [-xmax, xmax] (xmax of q43 = 240), 0 outside (NaN/Inf included)."""
    values = [-1e9, -241.0, -240.0, -1.0, 0.0, 239.9, 240.0, 240.5, 1e4, float("inf"), float("nan")]
    x = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    quantize(x, "q43", clip=True).backward(torch.full_like(x, 2.0))
    expected = [2.0 if abs(v) <= 240 else 0.0 for v in values]
    assert x.grad.tolist() == expected


def test_gradient_rounded_to_its_own_format():
    """grad_format: the gradient is the incoming one rounded (RN to fp16 = torch's half cast)."""
    x = torch.randn(5000, dtype=torch.float32, requires_grad=True)
    upstream = torch.randn(5000) * 1e-5
    quantize(x, "b", grad_format="h").backward(upstream)
    assert torch.equal(x.grad, upstream.half().float())


def test_stochastic_gradient_rounding_values():
    x = torch.zeros(20000, requires_grad=True)
    quantize(x, "s", grad_format="h", grad_round="stochastic").backward(torch.full((20000,), 1 / 3))
    low, high = 0.333251953125, 0.33349609375  # fp16 neighbours of 1/3 (spacing 2^-12)
    assert set(np.unique(x.grad.numpy()).tolist()) == {np.float32(low), np.float32(high)}


def test_quantizer_module_forward_and_backward_formats():
    q = Quantizer("b", "h", forward_round="nearest", backward_round="up")
    x = torch.tensor([1 / 3, -1 / 3], requires_grad=True)
    y = q(x)
    assert y.tolist() == [0.333984375, -0.333984375]  # bfloat16 RN of +-1/3 (8 bits)
    y.backward(torch.tensor([1 / 3, -1 / 3]))
    assert x.grad.tolist() == [0.33349609375, -0.333251953125]  # fp16 towards +inf
    identity = Quantizer(None, None)
    assert identity(x) is x


def test_errors_are_clear():
    with pytest.raises(ValueError, match="rounding"):
        quantize(torch.ones(2), "h", "sideways")
    with pytest.raises(ValueError, match="format"):
        quantize(torch.ones(2), "no-such-format")
    with pytest.raises(TypeError, match="floating"):
        quantize(torch.ones(2, dtype=torch.int32), "h")
    with pytest.raises(ValueError, match="uniforms"):
        quantize(torch.ones(2), "h", "stochastic", rng="chop", uniforms=torch.rand(2))
    with pytest.raises(TypeError, match="rng"):
        Rounder("h", rng="mersenne")
    with pytest.raises(ValueError, match="grad_format"):
        quantize(torch.ones(2), "h", grad_round="stochastic")


def test_non_tensor_input_is_refused_with_a_clear_type_error():
    # nn rounds torch tensors only: NumPy arrays, lists and numbers got an AttributeError from inside
    # the rounding; the error names the type and the way out (chop rounds arrays)
    a = np.array([0.1, 0.2])
    calls = [(lambda v: quantize(v, "h")), Rounder("h"), Quantizer("h"), Quantizer(None, "h")]
    for value, kind in ((a, "numpy.ndarray"), ([0.1], "list"), (0.1, "float")):
        for call in calls:
            with pytest.raises(TypeError, match=rf"needs a torch\.Tensor, got {kind}\b.*pychop_compat\.chop"):
                call(value)
    assert a.tolist() == [0.1, 0.2]


def test_input_is_not_modified_and_flips_go_through_chop():
    x = torch.linspace(-2, 2, 101, dtype=torch.float64)
    before = x.clone()
    rng(1)
    want = chop(x, {"format": "h", "flip": 1, "p": 0.3})
    rng(1)
    got = quantize(x, {"format": "h", "flip": 1, "p": 0.3}, rng="chop")  # chop's numbers (not torch's)
    assert torch.equal(x, before)
    assert_bits_equal(got, want)


def test_no_graph_breaks_in_quantizers():
    """Dynamo traces forward and backward quantizers into one graph (fullgraph=True raises otherwise)."""
    q = Quantizer("q43", "b", backward_round="stochastic", clip=True)
    weight_rounder = Rounder("h", "stochastic")  # built outside: option parsing is not traced

    @torch.compile(fullgraph=True, backend="aot_eager")
    def step(x, w):
        return (q(x) * quantize(w, weight_rounder)).sum()

    x = torch.randn(64, requires_grad=True)
    w = torch.randn(64, requires_grad=True)
    step(x, w).backward()
    assert x.grad is not None and w.grad is not None
    explanation = torch._dynamo.explain(lambda v: q(v) + 1)(torch.randn(8))
    assert explanation.graph_break_count == 0


def test_inductor_equals_eager_bit_for_bit_across_subnormals():
    """Inductor (C++ on the CPU) must not flush subnormals or fuse multiply-adds on the rounding path."""
    rounders = [Rounder("h"), Rounder("q43", subnormal=True), Rounder("h", "up"), Rounder("q52", "stochastic"),
                Rounder("b", "stochastic_equal")]

    def all_rounded(x, u, x64, u64):
        return torch.stack([r(x, u) for r in rounders]), torch.stack([r(x64, u64) for r in rounders64])

    rounders64 = [Rounder("d"), Rounder("s", "down", subnormal=False), Rounder("h", "stochastic")]
    compiled = torch.compile(all_rounded, fullgraph=True)
    g = np.random.default_rng(5)
    # float32 values from its subnormals (2^-149) up to fp16/bf16 overflow
    x = torch.from_numpy((g.standard_normal(4096) * np.exp2(g.integers(-150, 20, 4096))).astype(np.float32))
    x[:4] = torch.tensor([1e-45, -3e-45, 2.0**-126, 2.0**-127])
    # float64 values from its subnormals (2^-1074) to beyond float32's range
    x64 = torch.from_numpy(g.standard_normal(4096) * np.exp2(g.integers(-1075, 140, 4096)))
    x64[:3] = torch.tensor([5e-324, -1e-320, 2.0**-149], dtype=torch.float64)
    u, u64 = torch.rand(4096), torch.rand(4096, dtype=torch.float64)
    eager, fast = all_rounded(x, u, x64, u64), compiled(x, u, x64, u64)
    for e, f in zip(eager, fast):
        assert_bits_equal(f, e)
    assert bool(((x64.abs() < 2.0**-1022) & (x64 != 0)).any())
    assert bool(((x.abs() < 2.0**-126) & (x != 0)).any())  # float32 subnormals were among the inputs
    # The same through the autograd function (forward of a compiled training step).
    rule = GradientRule(None, rounders[0])
    step = torch.compile(lambda v: apply_quantizer(v, rounders[1], rule), fullgraph=True)
    assert_bits_equal(step(x), rounders[1](x))  # through the autograd function


def test_autocast_and_reduced_precision_models():
    layer = torch.nn.Linear(8, 4)
    q = Quantizer("q43", "h")
    x = torch.randn(3, 8, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = q(layer(q(x)))
    assert y.dtype == torch.bfloat16
    assert_bits_equal(y.float(), chop(y.float(), {"format": "q43"}))  # on q43's grid
    y.float().sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_eager_stochastic_path_equals_elementwise(dtype):
    """The eager path of stochastic rounding on a CPU tensor (the host kernels, the numbers given
    per element) against the namespace kernel (the compiled and GPU path), on the same numbers,
    over every kind of value."""
    from pychop_compat.engines.dispatch import round_array
    from pychop_compat.kernels.elementwise import ElementDraws, chop_elementwise
    from pychop_compat.kernels.xp import library_namespace
    from pychop_compat.matlab.options import resolve
    from pychop_compat.random.sources import given_sources

    x = _samples(dtype, n=20000, seed=9)
    u = torch.rand(x.shape, dtype=x.dtype)
    u[:4] = 0.0  # torch.rand can give 0: no step where the fraction is 0
    for fmt in ("q43", "q52", "b", "h", "s", "d"):
        for subnormal in (0, 1):
            for explim in (0, 1):
                for mode in (5, 6):
                    options = {"format": fmt, "round": mode, "subnormal": subnormal, "explim": explim}
                    spec = resolve(options, None, _x_class(x)).spec
                    kernel = chop_elementwise(library_namespace("torch"), x, spec, ElementDraws(u))
                    assert_bits_equal(round_array(x, spec, given_sources(u)), kernel, str(options))


# Round to nearest by the namespace kernel, the path that torch.compile and GPU tensors take:
# chop (the host kernels) and hardware casts are the oracles, on values packed around every
# threshold of each format.
BIT_FORMATS = [{"format": "h"}, {"format": "b", "subnormal": 1}, {"format": "q43"}, {"format": "q52"},
               {"format": "t", "rules": "chop"}, {"format": "c", "params": [5, 6]}, {"format": "c", "params": [3, 2]},
               {"format": "b"}, {"format": "h", "subnormal": 0}, {"format": "q43", "subnormal": 0},
               {"format": "c", "params": [3, 2], "subnormal": 0}]


def _around_thresholds(dtype, options, width=6):
    """Carrier numbers within ``width`` steps of each threshold of the format: xmins/2,
    xmins/2 * (1 + 2^-t) (chop.m's double rounding below xmins), xmins, 2^emin, xmin/2 and
    xmin/2 - xmins/2 (without subnormals), the
    midpoints of the binades, xmax, xboundary; the carrier's smallest numbers; both signs."""
    from pychop_compat.formats import float_params

    params = float_params(options["format"]) if "params" not in options else None
    t, emax = (int(v) for v in (options["params"] if params is None else (params[4], params[7])))
    emin = 1 - emax
    xmins = 2.0 ** (emin - t + 1)
    xmax = 2.0 ** emax * (2 - 2.0 ** (1 - t))
    centres = [xmins / 2, xmins / 2 * (1 + 2.0 ** -t), xmins, 1.5 * xmins, 2.0 ** emin, 2.0 ** emin * (1 - 2.0 ** -t),
               2.0 ** (emin - 1), 2.0 ** (emin - 1) * (1 - 2.0 ** (1 - t)), 2.0 ** emin * (1 - 2.0 ** -(t + 1)),
               xmax, 2.0 ** emax * (2 - 2.0 ** -t), 2.0 ** (emax + 1), 1.0, 1 + 2.0 ** -t, 1 + 3 * 2.0 ** -t,
               float(np.finfo(dtype).smallest_subnormal), float(np.finfo(dtype).tiny)]
    centres += [2.0 ** k * (1 + 2.0 ** -t) for k in range(emin - t - 2, emax + 2, 3)]  # ties, every 3rd binade
    out = []
    with np.errstate(over="ignore"):
        for c in centres:
            v = np.array([c], dtype=dtype)
            up, down = v.copy(), v.copy()
            for _ in range(width):
                out += [up.copy(), down.copy()]
                up, down = np.nextafter(up, dtype(np.inf)), np.nextafter(down, dtype(0))
    a = np.concatenate(out + [np.array([0.0, np.inf, np.nan], dtype=dtype)])
    return np.concatenate([a, -a])


def _namespace_nearest(x, options):
    """The namespace kernel's round to nearest of the tensor ``x`` by chop's ``options``."""
    from pychop_compat.kernels.elementwise import chop_elementwise
    from pychop_compat.kernels.xp import library_namespace
    from pychop_compat.matlab.options import resolve

    spec = resolve(options, None, "single" if x.dtype == torch.float32 else "double").spec
    return chop_elementwise(library_namespace("torch"), x, spec)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("options", BIT_FORMATS, ids=str)
def test_nearest_on_bits_equals_chop(dtype, options):
    g = np.random.default_rng(11)
    if dtype == np.float32:  # a strided sweep of all positive float32 bit patterns, and random ones
        patterns = np.concatenate([np.arange(0, 2**31, 4099, dtype=np.int64), g.integers(0, 2**31, 50000)])
        sweep = patterns.astype(np.int32).view(np.float32)
    else:
        sweep = _samples(np.float64, n=100000, seed=12).numpy()
    x = torch.from_numpy(np.concatenate([sweep, -sweep, _around_thresholds(dtype, options)]).astype(dtype))
    assert_bits_equal(_namespace_nearest(x, options), chop(x, options), str(options))


@pytest.mark.parametrize("eager", [False, True])
def test_nearest_equals_hardware_casts_outside_chops_double_rounding_band(eager):
    """float32 -> float16 / bfloat16 -> float32 is one correct rounding (an independent oracle;
    zeros compared as +0, chop's), on a strided sweep of every float32 bit pattern, except in
    chop.m's double-rounding band xmins/2 < |x| <= xmins/2 * (1 + 2^-t), where chop.m gives 0
    and the cast xmins (see test_hardware_oracle.py).  Both the namespace kernel and the
    quantizer's eager path on a CPU tensor are checked."""
    patterns = np.arange(-2**31, 2**31, 1021, dtype=np.int64).astype(np.int32)
    g = np.random.default_rng(14)
    for options, dtype, t, xmins in (({"format": "h"}, torch.float16, 11, 2.0**-24),
                                     ({"format": "b", "subnormal": 1}, torch.bfloat16, 8, 2.0**-133)):
        band = np.float32(xmins / 2) * (1 + g.random(500).astype(np.float32) * np.float32(2.0**-t))
        band = np.concatenate([band, [np.float32(xmins / 2 * (1 + 2.0**-t))], [np.nextafter(np.float32(xmins / 2), 1)]])
        x = torch.from_numpy(np.concatenate([patterns.view(np.float32), band, -band]).astype(np.float32))
        got = Rounder(options)(x) if eager else _namespace_nearest(x, options)
        want = x.to(dtype).float()
        in_band = (x.abs() > xmins / 2) & (x.abs() <= xmins / 2 * (1 + 2.0**-t))
        assert int(in_band.sum()) >= 1000 and bool((want[in_band].abs() == xmins).all())
        want[in_band] = 0.0  # chop.m's double rounding
        assert_bits_equal(got, _values(want), str(options))
        assert not bool(((got == 0) & (got.view(torch.int32) != 0)).any())  # zeros are +0


def test_nearest_on_bits_compiled_equals_chop():
    """Under Inductor, round to nearest takes the namespace kernel: chop's values, float32 and float64."""
    options32 = [{"format": "h"}, {"format": "b", "subnormal": 1}, {"format": "q43"}]
    options64 = [{"format": "h"}, {"format": "c", "params": [3, 2]}, {"format": "b"}]
    r32, r64 = [Rounder(o) for o in options32], [Rounder(o) for o in options64]
    compiled = torch.compile(lambda a, b: ([r(a) for r in r32], [r(b) for r in r64]), fullgraph=True)
    x = torch.from_numpy(np.concatenate([_around_thresholds(np.float32, o) for o in options32]))
    x64 = torch.from_numpy(np.concatenate([_samples(np.float64, n=2000, seed=13).numpy()]
                                          + [_around_thresholds(np.float64, o) for o in options64]))
    got32, got64 = compiled(x, x64)
    for o, got in zip(options32, got32):
        assert_bits_equal(got, chop(x, o), str(o))
    for o, got in zip(options64, got64):
        assert_bits_equal(got, chop(x64, o), str(o))


def test_compiled_stochastic_rounding_with_dynamic_shapes():
    """A second size makes Dynamo trace with a symbolic shape: the numbers must still be drawn
    (torch.rand with a symbolic size failed); each result lies on fp16's grid next to x."""
    sr = Rounder("h", "stochastic")
    compiled = torch.compile(lambda v: sr(v), fullgraph=True)
    for n in (64, 300, 1000):
        x = torch.randn(n)
        got = compiled(x)
        down, up = chop(x, {"format": "h", "round": 3}), chop(x, {"format": "h", "round": 2})
        assert got.shape == x.shape and bool(((got == down) | (got == up)).all())
    torch.manual_seed(4)
    eager = sr(torch.ones(8) / 3)
    torch.manual_seed(4)
    assert torch.equal(eager, sr(torch.ones(8) / 3))  # torch's seed, as before


def test_old_keyword_spellings_warn_and_mean_the_same():
    """``rounding=`` (Rounder, quantize), ``grad_rounding=``, ``forward_rounding=``/``backward_rounding=``
    and ``nn.ROUNDING_NAMES`` still work for one release, with a DeprecationWarning; ``rng='torch'``
    is the explicit spelling of torch's generator (the default)."""
    import pychop_compat.nn as nn

    x = torch.linspace(-2, 2, 101, dtype=torch.float64)
    with pytest.warns(DeprecationWarning, match="rounding= is deprecated"):
        old = Rounder("b", rounding="down")(x)
    assert torch.equal(old, Rounder("b", round="down")(x))
    assert torch.equal(old, torch.from_numpy(chop(x.numpy(), {"format": "b", "round": 3})))
    with pytest.warns(DeprecationWarning, match="grad_rounding= is deprecated"):
        quantize(x.clone().requires_grad_(), "h", grad_format="h", grad_rounding="up")
    with pytest.warns(DeprecationWarning, match="backward_rounding= is deprecated"):
        q = Quantizer("b", "h", backward_rounding="up")
    assert q.rule.rounder.mode == 2
    with pytest.raises(TypeError, match="give one of them"):
        Rounder("b", round="up", rounding="up")
    with pytest.warns(DeprecationWarning, match="ROUNDING_NAMES is deprecated"):
        assert nn.ROUNDING_NAMES["stochastic"] == 5
    torch.manual_seed(3)
    a = Rounder("h", round="stochastic", rng="torch")(x)
    torch.manual_seed(3)
    assert torch.equal(a, Rounder("h", round="stochastic")(x))


def _stochastic_by_definition(x, seed):
    """fp16 stochastic rounding of ``x`` (in [1, 2) in magnitude) from its definition (training.rst):
    one ``torch.rand`` number ``u`` per element; ``|x|`` rounds up when ``u <= frac``, else down."""
    torch.manual_seed(seed)
    u = torch.rand(x.shape, dtype=x.dtype)
    y = x.abs() * 2.0 ** 10  # an integer grid: t = 11 bits, exponent 0
    frac = y - y.floor()
    return torch.sign(x) * torch.where(u <= frac, y.ceil(), y.floor()) / 2.0 ** 10


def test_rng_torch_is_the_default_and_none_is_chops_sources():
    """nn's default is ``rng='torch'`` (torch.rand, as before); ``rng=None`` means chop's sources, as
    in Chop (since 0.4, as 0.3's FutureWarning announced): the result is chop's, MATLAB's stream moved
    as chop moves it."""
    from pychop_compat.nn.quantize import rounder_for

    g = torch.Generator().manual_seed(1)
    x = (1 + torch.rand(2000, dtype=torch.float64, generator=g)) * torch.where(
        torch.rand(2000, dtype=torch.float64, generator=g) < 0.5, -1.0, 1.0)
    want = _stochastic_by_definition(x, 8)
    down = torch.sign(x) * (x.abs() * 2.0 ** 10).floor() / 2.0 ** 10
    assert (want == down).any() and (want != down).any()  # both directions taken

    def seeded(make):
        torch.manual_seed(8)
        return make()

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        results = [seeded(lambda: Rounder("h", "stochastic")(x)),
                   seeded(lambda: Rounder("h", "stochastic", rng="torch")(x)),
                   seeded(lambda: quantize(x, "h", "stochastic")),
                   seeded(lambda: quantize(x, "h", "stochastic", rng="torch", grad_format="h")),
                   seeded(lambda: Quantizer("h", "h", "stochastic", "stochastic")(x)),
                   seeded(lambda: rounder_for("h", "stochastic")(x))]
        assert repr(Rounder("h")) == "Rounder({'format': 'h'}, rng='torch')"
        nn_module = torch.nn.Sequential(torch.nn.Linear(3, 2))
        from pychop_compat.nn import OptimLP, lower

        lower(nn_module, "h", "h", ("h", "stochastic"))
        OptimLP(torch.optim.SGD(nn_module.parameters(), lr=0.1), weight=("b", "stochastic"), grad="h")
    for got in results:
        assert_bits_equal(got.detach(), want)
    def after_rng_5(make):
        rng(5)
        return make()

    chops = after_rng_5(lambda: chop(x.numpy(), {"format": "h", "round": 5}))
    state = rng().State
    assert not np.array_equal(chops, want.numpy())  # MATLAB's numbers, not torch's
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for make in (lambda: Rounder("h", "stochastic", rng=None)(x),
                     lambda: quantize(x, "h", "stochastic", rng=None),
                     lambda: Quantizer("h", None, "stochastic", forward_rng=None)(x),
                     lambda: rounder_for("h", "stochastic", rng=None)(x)):
            got = after_rng_5(make)
            assert_bits_equal(got.detach(), chops)
            assert np.array_equal(rng().State, state)  # the stream moved as chop moves it
        quantize(x, "h", grad_format="h", grad_rng=None)
    assert repr(Rounder("h", rng=None)) == "Rounder({'format': 'h'}, rng='chop')"


def test_torch_generator_numbers_follow_the_index_not_the_memory_order():
    # rng='torch' draws torch.rand(shape) from the global generator, as a Generator given
    # explicitly draws it: the same numbers at the same indices for a transposed view.
    x = torch.randn(6, 4, dtype=torch.float64).t()
    torch.manual_seed(0)
    from_global = quantize(x, "b", "stochastic")
    explicit = quantize(x, "b", "stochastic", rng=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    contiguous = quantize(x.contiguous(), "b", "stochastic")
    assert torch.equal(from_global, explicit) and torch.equal(from_global, contiguous)


def test_a_seeded_rounder_keeps_its_seed_when_a_mode_is_given_with_it():
    from pychop_compat.nn import QuantizedLinear

    seeded = Rounder("h", rng=5)
    assert Quantizer(seeded, forward_round="stochastic").forward_rounder.rng == 5  # 0.6.0: 'torch'
    assert QuantizedLinear(3, 2, weight=(seeded, "stochastic")).weight_quantizer.forward_rounder.rng == 5


@pytest.mark.parametrize("format", ["h", "b", "float8_e4m3fn", "q43"])
def test_chopped_tensors_are_refused_with_a_clear_error(format):
    # a chopped tensor rounds each operation to its own arithmetic; rounding it again here would
    # mix two simulations, so nn names the way out instead of failing inside torch or chop
    from pychop_compat import chopped
    from pychop_compat.nn import simulate

    t = chopped(torch.tensor([0.1, -0.2], dtype=torch.float64), "h")
    for call in (lambda: quantize(t, format), lambda: Rounder(format)(t), lambda: Quantizer(format)(t)):
        with pytest.raises(TypeError, match=r"not a chopped tensor .*x\.values"):
            call()
    layer = torch.nn.Linear(2, 2).double()
    with pytest.raises(TypeError, match=r"not a chopped tensor .*x\.values"):
        with simulate(format):
            layer(t)
    assert quantize(t.values, format).dtype == torch.float64  # the way out works


def test_torch_generators_give_every_number_of_formats_rounded_through_chop():
    # rng='torch' (the default) and a torch.Generator were ignored for E8M0 and options with bit flips:
    # MATLAB's stream drew the numbers (two calls with one seed differed; the stream moved).
    x = torch.rand(1000, dtype=torch.float64, generator=torch.Generator().manual_seed(3)) * 3 + 0.1

    def numbers(seed):
        """chop's randfunc: float64 torch.rand numbers of a generator with this seed, in chop's order."""
        g = torch.Generator().manual_seed(seed)
        return lambda n: torch.rand(n, dtype=torch.float64, generator=g).numpy()

    def seeded(seed, make):
        torch.manual_seed(seed)
        return make()

    rng(1)
    stream = rng().State
    e8m0 = [Rounder("float8_e8m0fnu", "stochastic", rng=torch.Generator().manual_seed(42))(x) for _ in range(2)]
    assert_bits_equal(e8m0[0], e8m0[1])
    assert_bits_equal(e8m0[0], chop(x.numpy(), {"format": "float8_e8m0fnu", "round": 5, "randfunc": numbers(42)}))
    # With p = 0 nothing flips: the stochastic numbers come first, as randfunc's in chop.
    no_flip = [seeded(0, lambda: quantize(x, {"format": "h", "flip": 1, "p": 0.0}, "stochastic")) for _ in range(2)]
    assert_bits_equal(no_flip[0], no_flip[1])
    flipped = [seeded(seed, lambda: quantize(x, {"format": "h", "flip": 1, "p": 1.0})) for seed in (0, 0, 1)]
    assert np.array_equal(rng().State, stream)  # MATLAB's stream untouched
    assert_bits_equal(no_flip[0], chop(x.numpy(), {"format": "h", "flip": 1, "p": 0.0, "round": 5,
                                                   "randfunc": numbers(0)}))
    assert_bits_equal(flipped[0], flipped[1])
    assert not torch.equal(flipped[0], flipped[2]) and not torch.equal(flipped[0], quantize(x, "h"))


def test_flips_without_a_bit_below_the_leading_one_are_refused_alike_by_every_generator():
    # E8M0 (t = 1) has no fraction bit to flip: chop's own refusal, whichever generator draws
    x = torch.rand(10)
    for rng in ("torch", "chop", 3, torch.Generator()):
        with pytest.raises(ValueError, match=r"precision t >= 2"):
            Rounder({"format": "float8_e8m0fnu", "flip": 1, "p": 0.5}, "stochastic", rng=rng)(x)


def test_a_randfunc_or_a_seeded_chop_is_honoured_by_rng_chop_and_refused_otherwise():
    # Rounder ignored the options' randfunc (and a seeded Chop's rng) and rounded with torch's numbers, so
    # Rounder(opts) != Chop(opts). Oracle: mathematics: 1 + 2**-12 lies a quarter of the way from 1 to the
    # next fp16 number 1 + 2**-10: with every number 0.999 stochastic rounding never rounds it up
    options = {"format": "h", "round": 5, "randfunc": lambda n: np.full(n, 0.999)}
    x = torch.full((1000,), 1 + 2.0**-12)
    assert torch.equal(Rounder(options, rng="chop")(x), torch.ones(1000))
    assert torch.equal(Rounder(Chop(options, rng=1), rng="chop")(x), torch.ones(1000))
    for source in ("torch", 1, torch.Generator()):
        with pytest.raises(ValueError, match="randfunc"):
            Rounder(options, rng=source)
        with pytest.raises(ValueError, match="randfunc"):
            quantize(x, options, rng=source)
    with pytest.raises(ValueError, match="own rng"):
        Rounder(Chop({"format": "h", "round": 5}, rng=3))
    Rounder(dict(options, round=1))  # nearest draws no numbers: nothing ignored


def test_grad_format_keeps_the_graph_for_a_second_derivative():
    # the rounding of the gradient (grad_format) dropped the graph: the second derivative was refused
    # ("does not require grad"). Oracle: mathematics, straight-through: d/dx sum(q(x w)^2) = 2 q(x w) w (the
    # factor 2 q(x w) rounded to the gradient's format), and its derivative 2 w^2
    x, w = torch.tensor([0.25, 0.5], requires_grad=True), torch.tensor([2.0, 3.0])
    for grad_format in ("d", "h"):
        g, = torch.autograd.grad((quantize(x * w, "h", grad_format=grad_format) ** 2).sum(), x, create_graph=True)
        assert torch.equal(g, torch.tensor([2.0, 9.0]))
        assert torch.equal(torch.autograd.grad(g.sum(), x)[0], 2 * w ** 2)
