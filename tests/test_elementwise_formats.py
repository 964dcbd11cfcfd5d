"""chop.m's rules on the OCP/ML formats as elementwise torch operations (the namespace kernel).

``pychop_compat.nn``'s quantizers, ``torch.compile``d code and CUDA tensors round
the formats of the catalogue (``float8_e4m3fn``, ``float4_e2m1fn``, the ``fnuz``
formats, ...) with :func:`chop_elementwise`: chop's algorithm on the format's
``t``, ``emin`` and ``emax``, then the format's encoding.  Checked here:

* against ml_dtypes' cast (one correct rounding) with chop.m's underflow rule
  stated in the test (round to nearest, the formats' default overflow);
* bit for bit against the NumPy engine in every mode, with and without
  subnormals (the NumPy engine is itself checked against ml_dtypes and chop.m's
  stated rules in ``test_format_edges.py``), stochastic modes with given numbers;
* under ``torch.compile(fullgraph=True)`` (no graph break; Inductor's code gives
  the same bits), through ``nn.quantize``;
* the path a CUDA tensor takes (run on CPU tensors): no round trip through the host.
"""

from __future__ import annotations

import numpy as np
import pytest

from bits import same_bits

torch = pytest.importorskip("torch")
pytest.importorskip("ml_dtypes")

from pychop_compat import chop  # noqa: E402
from pychop_compat.engines import dispatch  # noqa: E402
from pychop_compat.kernels.compiled import cpu_engine  # noqa: E402
from pychop_compat.kernels.device_plan import elementwise_covers  # noqa: E402
from pychop_compat.kernels.elementwise import ElementDraws, ElementwisePlan, chop_elementwise  # noqa: E402
from pychop_compat.kernels.elementwise import plan_for as cached_plan  # noqa: E402
from pychop_compat.kernels.xp import library_namespace  # noqa: E402
from pychop_compat.random.sources import MATLAB_STREAM, given_sources  # noqa: E402
from pychop_compat.formats import catalogue_format  # noqa: E402
from pychop_compat.matlab.options import resolve  # noqa: E402

from test_format_edges import NAMES, cast, embedded  # noqa: E402

#: The number every element gets in the stochastic modes (chop's randfunc gives the same).
U = 0.37
CARRIER = {np.float32: "float32", np.float64: "float64"}
CLASS = {np.float32: "single", np.float64: "double"}


bits_equal = same_bits  # elementwise: the same bit pattern (the sign of zero included), or both NaN (bits.py)


TORCH = library_namespace("torch")


def plan_for(name, dtype, **options) -> tuple:
    spec = resolve({"rules": "chop", "format": name, **options}, None, CLASS[dtype]).spec
    return spec, cached_plan(spec, CARRIER[dtype])


def round_elementwise(x, plan, u=None):
    """The namespace kernel on a tensor, every element's number ``u`` in the stochastic modes."""
    return chop_elementwise(TORCH, x, plan, ElementDraws(u) if plan.stochastic else None)


def supports(spec) -> bool:
    """Whether nn's quantizers round ``spec`` with the namespace kernel (no flips, covered)."""
    return not spec.flips and elementwise_covers(spec)


def numpy_chop(x: np.ndarray, options: dict) -> np.ndarray:
    with cpu_engine("numpy"):
        if options.get("round", 1) >= 5:
            options = {**options, "randfunc": lambda n: np.full(n, U)}
        return chop(x, options)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", NAMES)
def test_round_to_nearest_is_the_cast_with_chops_underflow_rule(name, dtype):
    """Round to nearest with the format's defaults is ml_dtypes' cast (NaN stays NaN;
    overflow: Inf, NaN or +-xmax as the format and ml_dtypes both define it), except chop.m's
    underflow rule: inputs in (xmins/2, xmins/2 (1 + 2^-t)] give +0 (chop.m rounds to t bits
    first, then compares with xmins/2), and every zero result is +0."""
    fmt = catalogue_format(name)
    x, positions = embedded(name, dtype)
    a = np.abs(x.astype(np.float64))
    half = fmt.xmins / 2
    want = cast(x, name)
    want = np.where((a > half) & (a <= half * (1 + 2.0 ** -fmt.t)), 0.0, want)
    want = np.where(want == 0, 0.0, want)
    _, plan = plan_for(name, dtype)
    got = round_elementwise(torch.from_numpy(x.copy()), plan).numpy()
    assert not np.signbit(got[got == 0]).any()
    g = got.astype(np.float64)
    ok = (g == want) | (np.isnan(g) & np.isnan(want))
    assert ok[positions].all() and ok.all(), list(zip(x[~ok][:5], g[~ok][:5], want[~ok][:5]))


@pytest.mark.parametrize("subnormal", [0, 1])
@pytest.mark.parametrize("mode", [1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", NAMES)
def test_every_mode_equals_the_numpy_engine(name, dtype, mode, subnormal):
    """Every mode, with and without subnormals: the NumPy engine's bits, on the edge values
    among ordinary ones (stochastic modes: every element's number is U)."""
    options = {"rules": "chop", "format": name, "round": mode, "subnormal": subnormal}
    x, positions = embedded(name, dtype)
    want = numpy_chop(x, options)
    spec, plan = plan_for(name, dtype, round=mode, subnormal=subnormal)
    assert supports(spec)
    xt = torch.from_numpy(x.copy())
    u = torch.full((1,), U, dtype=xt.dtype) if mode >= 5 else None
    results = [round_elementwise(xt, plan, u)]
    if mode >= 5:  # nn's eager path on the CPU: the host kernels, the numbers given per element
        results.append(dispatch.round_array(xt, spec, given_sources(u)))
    for got in results:
        ok = bits_equal(got.numpy(), want)
        assert ok[positions].all() and ok.all(), list(zip(x[~ok][:5], got.numpy()[~ok][:5], want[~ok][:5]))


@pytest.mark.parametrize("subnormal", [False, True])
@pytest.mark.parametrize("mode", [5, 6])
def test_stochastic_rounding_of_float32_subnormals_below_a_coarser_grid(mode, subnormal):
    """Float32 subnormals far below xmins (t = 11, emax = 100) round up on the bit pattern to
    nothing beyond the subnormals: 0, as chop.m (a carry once made them 2^-63)."""
    from pychop_compat.formats import Format
    from pychop_compat.rounding import make_spec

    x = np.array([-1.0395608e-38, 1.0387377e-38, 4.602425e-41, 1.624803e-39], np.float32)
    spec = make_spec(Format(11, 100), mode, subnormal=subnormal, rules="chop")
    got = chop_elementwise(library_namespace("numpy"), x, spec, ElementDraws(np.zeros(x.size)))  # all round up
    assert same_bits(got, np.zeros(x.size, np.float32)).all()


@pytest.mark.parametrize("name, saturation, infinity", [
    ("float8_e5m2", True, True), ("float8_e5m2", False, False),
    ("float4_e2m1fn", False, False), ("float8_e4m3fn", True, False)])
@pytest.mark.parametrize("mode", [1, 2, 4])
def test_saturation_and_infinity_switches_equal_the_numpy_engine(name, saturation, infinity, mode):
    """The switches, set against the format's default: the NumPy engine's bits."""
    x, _ = embedded(name, np.float64)
    spec = resolve({"rules": "chop", "format": name, "round": mode}, None, "double").spec
    spec = type(spec)(**{**{f: getattr(spec, f) for f in spec.__dataclass_fields__},
                         "saturation": saturation, "infinity": infinity})
    with cpu_engine("numpy"):
        want = dispatch.round_array(x, spec, MATLAB_STREAM)
    got = round_elementwise(torch.from_numpy(x.copy()), ElementwisePlan.from_spec(spec, "float64")).numpy()
    assert bits_equal(got, want).all()
    assert not np.isinf(got).any() if not infinity or saturation else np.isinf(got).any()


def test_what_stays_with_chop():
    """Bit flips, CPFloat's rules, limited random bits and the unsigned E8M0 are not elementwise."""
    assert not supports(resolve({"rules": "chop", "format": "float8_e4m3fn", "flip": 1}, None, "double").spec)
    assert not supports(resolve({"rules": "chop", "format": "float8_e8m0fnu"}, None, "double").spec)
    spec = resolve({"rules": "chop", "format": "float8_e4m3fn", "round": 5}, None, "double").spec
    for change in ({"range_rules": "cpfloat"}, {"random_bits": 8}):
        fields = {f: getattr(spec, f) for f in spec.__dataclass_fields__}
        assert not supports(type(spec)(**{**fields, **change}))
    with pytest.raises(ValueError, match="extended"):
        ElementwisePlan.from_spec(resolve({"rules": "chop", "format": "float8_e8m0fnu"}, None, "double").spec, "float64")


# Each name is a torch.compile (seconds): the default profile compiles one, the others under -m slow.
@pytest.mark.parametrize("name", ["float8_e4m3fn", pytest.param("float4_e2m1fn", marks=pytest.mark.slow),
                                  pytest.param("float8_e5m2fnuz", marks=pytest.mark.slow)])
def test_quantize_compiles_without_graph_breaks(name):
    """``nn.quantize`` on an OCP format (with a prebuilt Rounder, as its docstring asks under
    torch.compile) traces into one graph (fullgraph=True raises on a break) and Inductor's code
    gives the NumPy engine's bits, nearest and stochastic."""
    from pychop_compat.nn import Rounder, quantize

    x, _ = embedded(name, np.float32)
    x = x[:20000]
    xt = torch.from_numpy(x.copy())
    u = torch.full_like(xt, U)
    for options in ({"format": name}, {"format": name, "rules": "chop"}):  # correct rounding, chop's rules
        rounder = Rounder(options)
        nearest = torch.compile(lambda v: quantize(v, rounder), fullgraph=True)
        assert bits_equal(nearest(xt).numpy(), numpy_chop(x, options)).all(), options
        torch._dynamo.reset()
    _, plan = plan_for(name, np.float32, round=5)
    stochastic = torch.compile(lambda v, w: round_elementwise(v, plan, w), fullgraph=True)
    assert bits_equal(stochastic(xt, u).numpy(), numpy_chop(x, {"rules": "chop", "format": name, "round": 5})).all()


@pytest.mark.parametrize("mode", [1, 3])
@pytest.mark.parametrize("name", ["float8_e4m3fn", "float6_e3m2fn", "float8_e4m3fnuz"])
def test_the_cuda_path_stays_on_the_device(device_paths_on_cpu, name, mode):
    """The route of a CUDA tensor (taken here by a CPU tensor): chop's deterministic modes on
    an OCP format are the namespace kernel (no copy to the host), with the NumPy engine's bits;
    bit flips go to the host."""
    x, _ = embedded(name, np.float32)
    want = numpy_chop(x, {"rules": "chop", "format": name, "round": mode})
    xt = torch.from_numpy(x.copy())
    spec, _ = plan_for(name, np.float32, round=mode)
    assert dispatch.route(xt, spec, MATLAB_STREAM).kernel.name == "namespace"
    got = chop(xt, {"rules": "chop", "format": name, "round": mode}).numpy()
    assert bits_equal(got, want).all()
    flips = resolve({"rules": "chop", "format": name, "round": 1, "flip": 1}, None, "single").spec
    assert dispatch.route(xt, flips, MATLAB_STREAM).kernel.name == "host"  # bit flips: on the host


@pytest.mark.parametrize("mode", [5, 6])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["float8_e4m3fn", "float4_e2m1fn", "float8_e5m2fnuz", "float6_e2m3fn"])
def test_the_cuda_path_rounds_stochastically_on_the_device(device_paths_on_cpu, name, dtype, mode):
    """Stochastic rounding on an OCP format on the route of a CUDA tensor: the namespace kernel.
    With numbers made on the device (``Chop(rng=seed)``'s counter, or the device generator after
    ``seed_device(seed)``, whose first call gets the same numbers) the bits are the NumPy
    engine's for ``Chop(rng=seed)``.  With MATLAB's stream (``matlab_stream_on_device``) the host
    draws in chop.m's order: the NumPy engine's bits, and the stream left where it leaves it."""
    from pychop_compat import Chop, rand, rng
    from pychop_compat.random.counter import seed_device
    from pychop_compat.random.sources import counter_sources, matlab_stream_on_device

    options = {"rules": "chop", "format": name, "round": mode}
    x, _ = embedded(name, dtype)
    x = x[:20000].reshape(100, 200).T  # not C-contiguous: numbers go by row-major position
    with cpu_engine("numpy"):
        want = Chop(options, rng=17)(x)
    spec = resolve(options, None, CLASS[dtype]).spec
    xt = torch.from_numpy(x.copy()).T.contiguous().T
    for sources in (counter_sources(17), MATLAB_STREAM):  # Chop(rng=17); the device generator
        assert dispatch.route(xt, spec, sources).kernel.name == "namespace"
    counter = Chop(options, rng=17)(xt).numpy()
    seed_device(17)
    device = chop(torch.from_numpy(np.ascontiguousarray(x)), options).numpy()
    assert bits_equal(counter, want).all() and bits_equal(device, want).all()

    with matlab_stream_on_device():
        assert dispatch.route(xt, spec, MATLAB_STREAM).kernel.name == "namespace"
        rng(5)
        got = chop(torch.from_numpy(x.copy()).T.contiguous().T, options).numpy()
        after = rand(1, 3)
    with cpu_engine("numpy"):
        rng(5)
        want = chop(x, options)
        assert bits_equal(got, want).all()
        assert np.array_equal(after, rand(1, 3))
