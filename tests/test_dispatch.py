"""The router (``pychop_compat.engines.dispatch``) and ``pychop_compat.explain``.

Routes are data: each test states which kernel of the registry a call gets and why the
kernels before it passed, so a GPU route is checked on the CPU (a described call, or a
CPU tensor in the device-paths mode).  That every route gives the same bits is checked
elsewhere (test_gpu_paths.py, test_engines.py, the snapshot of the engine matrix); here
a few results confirm that the route taken is the route stated.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import pychop_compat
from pychop_compat import Chop, chop, explain
from pychop_compat.engines import dispatch
from pychop_compat.engines.dispatch import Call, cuda_route, device_paths_on_cpu, route, route_call
from pychop_compat.kernels import compiled, numpy_fast
from pychop_compat.matlab.options import resolve
from pychop_compat.random.sources import (MATLAB_STREAM, Source, counter_sources, generator_sources,
                                          matlab_stream_on_device, sources_for)
from pychop_compat.rounding import make_spec

needs_numba = pytest.mark.skipif(not compiled.available(), reason="numba not installed")


def _spec(options, x_class="double"):
    return resolve(options, None, x_class).spec


def _cuda_call(spec, numbers="none"):
    """A float32 CUDA tensor of 1000 elements, as the router sees it."""
    return Call("torch", "cuda:0", False, "float32", 1000, numbers)


# --- host memory -----------------------------------------------------------------------------------

@needs_numba
def test_numpy_arrays_take_the_compiled_engine_unless_told_otherwise():
    x = np.linspace(-3, 3, 100)
    spec = _spec({"format": "h"})
    found = route(x, spec, MATLAB_STREAM)
    assert found.kernel.name == "numba" and found.passed_over == (("scalar", "not a Python float"),)
    with compiled.cpu_engine("numpy"):
        found = route(x, spec, MATLAB_STREAM)
        assert found.kernel.name == "numpy"
        assert dict(found.passed_over)["numba"] == "cpu_engine('numpy') is in force"
    # stochastic rounding from a NumPy Generator streams through the NumPy engine under 'auto'
    stochastic = _spec({"format": "h", "round": 5})
    found = route(x, stochastic, generator_sources(np.random.default_rng(1)))
    assert found.kernel.name == "numpy" and "streams faster" in dict(found.passed_over)["numba"]
    assert route(x, stochastic, MATLAB_STREAM).kernel.name == "numba"


def test_scalars_and_single_elements():
    spec = _spec({"format": "h"})
    assert route(1 / 3, spec, MATLAB_STREAM).kernel.name == "scalar"
    flips = _spec({"format": "h", "flip": 1})
    found = route(1 / 3, flips, MATLAB_STREAM)
    assert found.kernel.name == "numpy" and dict(found.passed_over)["scalar"] == "bit flips need an array"
    assert route(np.array([0.5]), spec, MATLAB_STREAM).kernel.name == "numpy"  # one element: not compiled


def test_cpfloat_rules_on_the_host():
    x = np.linspace(-500, 500, 64)
    deterministic, stochastic = make_spec("float8_e4m3fn", 1), make_spec("float8_e4m3fn", 5)
    with compiled.cpu_engine("numpy"):
        assert route(x, deterministic, MATLAB_STREAM).kernel.name == "numpy-cpfloat"
        found = route(x, stochastic, MATLAB_STREAM)
        assert found.kernel.name == "reference"  # CPFloat's random modes: compiled, or the specification
        assert "column-major" in dict(found.passed_over)["numpy-cpfloat"]
    if compiled.available():
        assert route(x, deterministic, MATLAB_STREAM).kernel.name == "numba-cpfloat"
        assert route(x, stochastic, MATLAB_STREAM).kernel.name == "numba-cpfloat"
        assert route(x, make_spec("float8_e4m3fn", 1, flip=2), MATLAB_STREAM).kernel.name == "numba-cpfloat"


def test_the_reference_kernel_on_request_is_the_executable_specification():
    from pychop_compat.rules.chop import chop_vector

    x = np.random.default_rng(2).standard_normal((30, 7))
    spec = _spec({"format": "q43", "round": 5})
    pychop_compat.rng(3)
    got = dispatch.round_array(x, spec, MATLAB_STREAM, kernel="reference")
    pychop_compat.rng(3)
    want = chop_vector(x.ravel(order="F"), spec, MATLAB_STREAM).reshape(x.shape, order="F")
    assert np.array_equal(got, want)


def test_cpu_tensors_take_the_host_kernels_through_their_memory():
    torch = pytest.importorskip("torch")
    t = torch.linspace(-3, 3, 100)
    found = route(t, _spec({"format": "h"}, "single"), MATLAB_STREAM)
    assert found.call.host and found.kernel.name in ("numba", "numpy")
    with device_paths_on_cpu():
        assert not route(t, _spec({"format": "h"}, "single"), MATLAB_STREAM).call.host
    assert route(t, _spec({"format": "h"}, "single"), MATLAB_STREAM).call.host  # scoped


# --- the routes of a CUDA tensor, on the CPU --------------------------------------------------------

def test_a_cuda_tensor_without_cupy_goes_to_triton_for_modes_1_to_4_and_to_the_namespace_kernel_for_flips(
        monkeypatch):
    """The issue's example: a CUDA-tensor-like call with CuPy absent."""
    monkeypatch.setattr(dispatch, "cupy_for", lambda call: None)
    monkeypatch.setattr(dispatch, "triton_for", lambda call: object())  # Triton installed
    for mode in (1, 2, 3, 4):
        found = route_call(_cuda_call(None), _spec({"format": "h", "round": mode}, "single"), MATLAB_STREAM)
        assert found.kernel.name == "triton", mode
        assert dict(found.passed_over)["cuda"] == "CuPy is not installed or sees no GPU"
    flips = _spec({"format": "h", "flip": 1}, "single")
    found = route_call(_cuda_call(None), flips, MATLAB_STREAM)
    assert found.kernel.name == "namespace" and dict(found.passed_over)["triton"] == "bit flips"
    # stochastic rounding: Triton with numbers made on the device, the namespace kernel with the host's
    stochastic = _spec({"format": "h", "round": 5}, "single")
    assert route_call(_cuda_call(None, "device"), stochastic, MATLAB_STREAM).kernel.name == "triton"
    found = route_call(_cuda_call(None, "host"), stochastic, MATLAB_STREAM)
    assert found.kernel.name == "namespace" and "host" in dict(found.passed_over)["triton"]
    # beyond chop.m: the namespace kernel, or the host where it does not cover the spec
    assert route_call(_cuda_call(None), _spec({"format": "float8_e4m3fn"}, "single"),
                      MATLAB_STREAM).kernel.name == "namespace"
    assert route_call(_cuda_call(None), _spec({"format": "float8_e4m3fn", "flip": 1}, "single"),
                      MATLAB_STREAM).kernel.name == "host"


def test_cuda_route_setting(monkeypatch):
    spec = _spec({"format": "h"}, "single")
    monkeypatch.setattr(dispatch, "triton_for", lambda call: object())
    monkeypatch.setattr(dispatch, "cupy_for", lambda call: object())
    assert route_call(_cuda_call(None), spec, MATLAB_STREAM).kernel.name == "cuda"
    with cuda_route("triton"):
        assert route_call(_cuda_call(None), spec, MATLAB_STREAM).kernel.name == "triton"
    with cuda_route("torch"):
        found = route_call(_cuda_call(None), spec, MATLAB_STREAM)
        assert found.kernel.name == "namespace"
        assert dict(found.passed_over)["cuda"] == "cuda_route('torch') is in force"
    monkeypatch.setattr(dispatch, "cupy_for", lambda call: None)
    with cuda_route("cupy"), pytest.raises(RuntimeError, match="CuPy is not installed"):
        route_call(_cuda_call(None), spec, MATLAB_STREAM)
    monkeypatch.setattr(dispatch, "triton_for", lambda call: None)
    with cuda_route("triton"), pytest.raises(RuntimeError, match="Triton is not installed"):
        route_call(_cuda_call(None), spec, MATLAB_STREAM)
    with pytest.raises(ValueError, match="route must be one of"):
        with cuda_route("opencl"):
            pass


def test_cpu_tensors_in_the_device_paths_mode(monkeypatch):
    """The device-paths mode sends CPU tensors down a CUDA tensor's routes: Triton only under its
    interpreter, the device's counter for the device generator's numbers."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    t = torch.linspace(-3, 3, 100)
    spec = _spec({"format": "h"}, "single")
    with device_paths_on_cpu():
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
        found = route(t, spec, MATLAB_STREAM)
        assert found.kernel.name == "namespace" and "interpreter" in dict(found.passed_over)["triton"]
        monkeypatch.setenv("TRITON_INTERPRET", "1")
        assert route(t, spec, MATLAB_STREAM).kernel.name == "triton"
        stochastic = _spec({"format": "h", "round": 5}, "single")
        assert route(t, stochastic, MATLAB_STREAM).call.numbers == "device"
        with matlab_stream_on_device():
            assert route(t, stochastic, MATLAB_STREAM).call.numbers == "host"
        assert route(t, stochastic, counter_sources(3)).call.numbers == "counter"


# --- settings are scoped --------------------------------------------------------------------------

@needs_numba
def test_cpu_engine_is_scoped_to_the_thread_and_set_cpu_engine_sets_the_default():
    seen = []
    with compiled.cpu_engine("numpy"):
        worker = threading.Thread(target=lambda: seen.append(compiled.get_cpu_engine()))
        worker.start()
        worker.join()
        assert compiled.get_cpu_engine() == "numpy"
    assert seen == ["auto"] and compiled.get_cpu_engine() == "auto"
    compiled.set_cpu_engine("numpy")
    try:
        assert compiled.get_cpu_engine() == "numpy" and not compiled.wanted()
        with compiled.cpu_engine("numba"):
            assert compiled.wanted()
    finally:
        compiled.set_cpu_engine("auto")


def test_a_dask_array_takes_the_cpu_engine_in_force_when_chop_is_called(monkeypatch):
    da = pytest.importorskip("dask.array")
    calls = []
    original = compiled.chop_array
    monkeypatch.setattr(compiled, "chop_array", lambda *a, **k: calls.append(1) or original(*a, **k))
    x = da.from_array(np.linspace(-3, 3, 400).reshape(20, 20), chunks=(10, 10))
    with compiled.cpu_engine("numpy"):
        lazy = chop(x, {"format": "h"})
    out = lazy.compute(scheduler="threads")
    assert calls == [] and np.array_equal(out, chop(np.linspace(-3, 3, 400).reshape(20, 20), {"format": "h"}))


# --- explain ------------------------------------------------------------------------------------

def test_explain_a_numpy_call():
    x = np.ones(1000)
    e = explain(x, {"format": "h", "round": 5})
    assert e.engine == "numpy" and e.source is Source.MATLAB_STREAM and e.order == "column-major"
    assert e.kernel == dispatch.route(x, _spec({"format": "h", "round": 5}), MATLAB_STREAM).kernel.name
    text = str(e)
    assert f"kernel: {e.kernel}" in text and "matlab_stream, column-major order" in text
    assert explain(x, {"format": "h"}).source is None and "none (deterministic" in str(explain(x, {"format": "h"}))
    assert explain(1 / 3, {"format": "h"}).kernel == "scalar"


def test_explain_of_a_device_tensor_rounded_on_the_host_names_the_hosts_numbers():
    # chop's rules on an OCP format with flips: the host kernel (a copy), drawing MATLAB's stream in
    # chop.m's order (docs/randomness.rst); 0.6.0's explain said the device counter
    torch = pytest.importorskip("torch")
    from pychop_compat.engines.dispatch import device_paths_on_cpu

    t = torch.linspace(0.1, 3, 8, dtype=torch.float64)
    with device_paths_on_cpu():
        found = explain(t, {"format": "float8_e4m3fn", "rules": "chop", "flip": 1})
        pychop_compat.rng(1)
        first = chop(t, {"format": "float8_e4m3fn", "rules": "chop", "flip": 1})
        pychop_compat.rng(1)
        again = chop(t, {"format": "float8_e4m3fn", "rules": "chop", "flip": 1})
    assert found.kernel == "host" and found.source.name == "MATLAB_STREAM" and found.order == "column-major"
    assert torch.equal(first, again)  # the numbers follow rng(), as the explanation says


def test_explain_a_python_float_beyond_chop_m_under_the_compiled_engine():
    # 0.6.0: AttributeError (the CPFloat kernel's test read x.dtype of a float)
    from pychop_compat.kernels.compiled import available, cpu_engine

    if not available():
        pytest.skip("Numba is not installed")
    with cpu_engine("numba"):
        for options in ({"format": "float8_e4m3fn"}, "bf16", {"format": "h", "rules": "correct"}):
            assert explain(1 / 3, options).kernel in ("numba-cpfloat", "numpy-cpfloat", "reference")


def test_explain_a_dask_call_refuses_what_chop_refuses_and_speaks_of_a_block():
    da = pytest.importorskip("dask.array")
    x = da.ones(10, chunks=5)
    with pytest.raises(ValueError, match="rng=<int seed>"):  # as chop(x, ...) (0.6.0: "no kernel rounds")
        explain(x, {"format": "h", "round": 5})
    with pytest.raises(ValueError, match="rng=<int seed>"):
        pychop_compat.chop(x, {"format": "h", "round": 5})
    assert "5 element(s) in a block" in str(explain(x, {"format": "h"}))


def test_explain_a_dask_array_of_unknown_chunk_sizes():
    # Boolean indexing leaves Dask's chunk sizes unknown (NaN): chop rounds such an array, and explain
    # describes its route (it raised TypeError); where the call needs the sizes, both say so.
    da = pytest.importorskip("dask.array")
    x = da.from_array(np.arange(10.0) / 3, chunks=3)
    unknown = x[x > 1]
    assert any(np.isnan(c) for c in unknown.chunks[0])
    e = explain(unknown, {"format": "h"})
    known = explain(x, {"format": "h"})
    assert (e.engine, e.kernel, e.source, e.call.library, e.call.dtype) == ("dask", known.kernel, None, "dask",
                                                                              "float64")
    options = {"format": "h", "round": 5}
    for call in (lambda: explain(unknown, options, rng=1), lambda: Chop(options, rng=1)(unknown)):
        with pytest.raises(ValueError, match="known chunk sizes"):
            call()


def test_explain_names_the_random_source_of_chop_and_chop_objects():
    x = np.ones(10)
    options = {"format": "b", "round": 5}
    assert explain(x, options, rng=7).source is Source.SEEDED_COUNTER
    assert explain(x, options, rng=7).order == "row-major index"
    assert explain(x, options, rng=np.random.default_rng(1)).source is Source.GENERATOR
    randfunc = {"format": "b", "round": 5, "randfunc": lambda n: np.full(n, 0.5)}
    assert explain(x, randfunc).source is Source.RANDFUNC
    flips = {"format": "b", "flip": 1}
    assert explain(x, flips).source is Source.MATLAB_STREAM
    generator = np.random.default_rng(4)
    state = generator.bit_generator.state
    explain(x, options, rng=generator)
    assert generator.bit_generator.state == state  # nothing drawn
    counter = Chop(options, rng=9)
    explain(x, options, rng=9)
    assert np.array_equal(counter(x), Chop(options, rng=9)(x))


def test_explain_reads_the_stored_options_and_stores_nothing():
    pychop_compat.chop(None, {"format": "b", "round": 5})
    assert explain(np.ones(5)).source is Source.MATLAB_STREAM
    explain(np.ones(5), {"format": "h"})
    assert pychop_compat.chop_options().format == "b"  # explain stored nothing


def test_explain_other_array_types():
    torch = pytest.importorskip("torch")
    e = explain(torch.ones(100, dtype=torch.float16), {"format": "h"})
    assert e.engine == "torch" and e.call.dtype == "float32" and e.call.host
    with device_paths_on_cpu():
        e = explain(torch.ones(100), {"format": "h", "round": 5})
        assert e.source is Source.DEVICE_COUNTER and e.kernel in ("namespace", "triton")
        assert "cuda" in dict(e.passed_over)
    jnp = pytest.importorskip("jax.numpy")
    e = explain(jnp.ones(4, dtype=jnp.float32), {"format": "h"})
    assert e.engine == "jax" and e.kernel == "namespace"
    assert explain(jnp.ones(4, dtype=jnp.float32), {"format": "h", "round": 5}).kernel == "host"
    da = pytest.importorskip("dask.array")
    e = explain(da.ones((10, 10), chunks=5), {"format": "h"})
    assert e.engine == "dask" and e.call.library == "dask"
    assert explain(da.ones((10, 10), chunks=5), {"format": "h", "round": 5}, rng=3).kernel == "namespace"
    with pytest.raises(TypeError, match="does not support"):
        explain({"a": 1})


def test_explain_is_exported_and_documented():
    assert pychop_compat.explain is explain and "explain" in pychop_compat.__all__
    assert explain.__doc__ and "passed over" in explain.__doc__
    sources = sources_for(lambda n: np.full(n, 0.25))
    assert dispatch.explain(np.ones(3), _spec({"format": "h", "round": 5}), sources).source is Source.RANDFUNC


# --- explain's reasons and refusals match what runs ---------------------------------------------------

def test_flips_drawn_from_a_chops_seeded_counter_are_named_so():
    # docs/randomness.rst: with a randfunc, Chop(rng=<int>) draws "the flip numbers from the same
    # generator [the counter], taken call by call" -- not MATLAB's stream, not a NumPy Generator
    x = np.linspace(-3, 3, 100)
    options = {"format": "h", "flip": 1, "p": 0.5, "randfunc": lambda n: np.full(n, 0.5)}
    found = explain(x, options, rng=7)
    assert found.source is Source.SEEDED_COUNTER and found.order == "column-major"
    pychop_compat.rng(1)
    before = pychop_compat.rand()
    pychop_compat.rng(1)
    seven, eight = Chop(options, rng=7)(x), Chop(options, rng=8)(x)
    assert pychop_compat.rand() == before  # MATLAB's stream untouched
    assert not np.array_equal(seven, eight) and np.array_equal(seven, Chop(options, rng=7)(x))  # the seed's


def test_the_compiled_engines_reason_for_one_element_is_its_own():
    # compiled.chop_array rounds arrays of "more than one element"; a float with flips was refused by
    # the scalar path, so "the scalar path is faster" was no reason
    found = route(1 / 3, _spec({"format": "h", "flip": 1}), MATLAB_STREAM)
    assert found.kernel.name == "numpy"
    assert dict(found.passed_over)["numba"] == "one element (the compiled engine takes arrays of more than one)"


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_an_empty_array_runs_no_kernel_and_explain_says_so(library, monkeypatch):
    x = np.zeros(0) if library == "numpy" else pytest.importorskip("torch").zeros(0, dtype=float)
    ran = []
    for module in (numpy_fast, compiled):  # spies on the host kernels: round_array copies an empty array
        original = module.chop_array
        monkeypatch.setattr(module, "chop_array", lambda *a, _original=original, **k: ran.append(1) or _original(
            *a, **k))
    chop(x, {"format": "h"})
    found = explain(x, {"format": "h"})
    assert ran == [] and found.kernel == "none" and found.passed_over == () and "nothing is rounded" in found.where


def test_a_triton_failure_is_given_as_the_reason(monkeypatch):
    # _run_triton: "where Triton cannot run, a warning and the namespace kernel from then on"; the reason
    # is that failure, not a missing installation
    monkeypatch.setattr(dispatch, "_TRITON_FAILED", [RuntimeError("ptxas failed")])
    spec = _spec({"format": "h"}, "single")
    found = route_call(_cuda_call(None), spec, MATLAB_STREAM)
    reason = dict(found.passed_over)["triton"]
    assert found.kernel.name in ("cuda", "namespace") and "ptxas failed" in reason and "not installed" not in reason
    with cuda_route("triton"), pytest.raises(RuntimeError, match="failed in this process earlier"):
        route_call(_cuda_call(None), spec, MATLAB_STREAM)


def test_a_cpu_tensor_on_the_device_paths_has_no_cupy_route(monkeypatch):
    # cuda_route: "'cupy' ... insist[s] on that kernel (an error when it is missing)"; CuPy reads CUDA
    # memory only, so with CuPy present the reason is the tensor's place, not CuPy's absence
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(dispatch, "_cupy_module", lambda: object())  # CuPy installed, seeing a GPU
    t = torch.ones(100, dtype=torch.float64)
    with device_paths_on_cpu():
        assert "on the CPU" in dict(explain(t, {"format": "h"}).passed_over)["cuda"]
        with cuda_route("cupy"), pytest.raises(RuntimeError, match="on the CPU"):
            chop(t, {"format": "h"})
        with cuda_route("cupy"), pytest.raises(RuntimeError, match="on the CPU"):
            explain(t, {"format": "h"})


def test_device_paths_on_cpu_takes_a_bool():
    with pytest.raises(TypeError, match="must be a bool"):
        with device_paths_on_cpu("no"):  # (bool('no') is True)
            pass
    with device_paths_on_cpu(False), device_paths_on_cpu(np.True_):  # (NumPy's bool too)
        pass


def test_explain_raises_what_chop_raises():
    # explain's docstring: "A call that round_array refuses raises its error here"
    x = np.linspace(-3, 3, 100)
    options = {"format": "float8_e8m0fnu", "flip": 1}  # t = 1
    with pytest.raises(ValueError, match="precision t >= 2") as refused:
        chop(x, options)
    with pytest.raises(ValueError, match="precision t >= 2") as explained:
        explain(x, options)
    assert str(explained.value) == str(refused.value)


@needs_numba
def test_e8m0_of_float32_is_explained_in_float64_where_it_runs(monkeypatch):
    # _e8m0_widens: E8M0 under correct rounding "is rounded in float64 when the input is float32"
    from pychop_compat.kernels import numba_cpfloat

    seen = []
    original = numba_cpfloat.round_array
    monkeypatch.setattr(numba_cpfloat, "round_array", lambda a, spec: seen.append(a.dtype.name) or original(a, spec))
    x = np.linspace(1, 3, 100, dtype=np.float32)
    chop(x, {"format": "float8_e8m0fnu"})
    found = explain(x, {"format": "float8_e8m0fnu"})
    assert seen == ["float64"] and found.kernel == "numba-cpfloat" and found.call.dtype == "float64"


def test_e8m0_of_float32_in_jit_without_x64_is_refused_by_explain_as_by_chop():
    jax = pytest.importorskip("jax")
    from pychop_compat.engines import jax_engine

    if jax_engine.x64_enabled():
        pytest.skip("JAX's 64-bit types are on in this process")
    errors = {}

    def both(v):
        for name, call in (("chop", chop), ("explain", explain)):
            try:
                call(v, {"format": "float8_e8m0fnu"})
            except TypeError as exc:
                errors[name] = str(exc)
        return v

    jax.jit(both)(jax.numpy.ones(8, jax.numpy.float32))
    assert errors.get("explain") == errors.get("chop") and "jax_enable_x64" in errors["chop"]


def test_the_environments_numba_setting_without_numba_fails_clearly():
    # set_cpu_engine('numba') without Numba: an ImportError with the install command; the environment
    # variable gives the same at the first call that would use the engine (docs/engines.rst)
    code = """
import sys
sys.modules['numba'] = None  # an installation without Numba
import json
import numpy as np
import pychop_compat as pc
out = {}
for name in ('explain', 'chop'):
    try:
        getattr(pc, name)(np.linspace(-3, 3, 100), {'format': 'h'})
        out[name] = 'ran'
    except ImportError as exc:
        out[name] = str(exc)
print(json.dumps(out))
"""
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root), "PYCHOP_COMPAT_CPU_ENGINE": "numba"})
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert all("python -m pip install numba" in out[name] for name in ("explain", "chop")), out
