"""One router for every array: an ordered registry of kernels, and the calls that use it.

Every facade rounds with :func:`round_array`: the array's adapter prepares it,
:class:`Call` describes it, and the first kernel of :data:`REGISTRY` that takes
it rounds it.  :func:`route` is that choice as a pure function and
:func:`explain` says why.  The registry and the settings that steer it
(:func:`cpu_engine`, :func:`cuda_route`, :func:`device_paths_on_cpu`) are
described in ``docs/engines.rst`` ("How a call is routed").
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import importlib.util
import math
import os
import sys
import time
from typing import Any, Callable, Iterator, NamedTuple, Optional, cast

import numpy as np

from ..kernels import compiled, numpy_cpfloat, numpy_fast
from ..kernels.compiled import cpu_engine, get_cpu_engine, set_cpu_engine
from ..kernels.device_plan import CARRIERS, elementwise_covers, regular_range
from ..kernels.elementwise import (ElementDraws, carrier_name, chop_elementwise, counter_draws, host_draws,
                                   flip_mask, plan_for)
from ..kernels.elementwise_cpfloat import (cpfloat_covers, cpfloat_inexact, host_numbers,
                                           round_cpfloat_elementwise)
from ..kernels.xp import Namespace, exact_float32, exact_float64, library_namespace, namespace_of
from ..libraries import array_library, unsupported_type_error
from ..random import counter as device_counter
from ..random.counter import CounterRng
from ..random.matlab_stream import exclusive_stream, stream_uniform
from ..random.sources import (CheckedRandfunc, RandomSources, Source, draws_on_device, given_sources)
from ..rules.chop import chop_vector
from ..rules.cpfloat import (ROUND_MODES, apply_encoding, block_numbers, chop_blocks, correct_spec, effective_format,
                             flip_bits, limited_bit_sources, round_correct, round_cpfloat)
from ..spec import FLIP_PRECISION_ERROR, RoundingSpec
from . import cupy_engine, dask_engine, jax_engine, labelled, numpy_engine, torch_engine

__all__ = ["round_array", "PreparedRounding", "round_jax", "route", "route_call", "explain", "Call", "Kernel", "Route",
           "Explanation", "REGISTRY", "cpu_engine", "set_cpu_engine", "get_cpu_engine", "cuda_route", "get_cuda_route",
           "device_paths_on_cpu", "cupy_for", "triton_for", "CUDA_ROUTES"]


# --- the settings -----------------------------------------------------------------------------

#: The routes of a CUDA tensor (see :func:`cuda_route`).
CUDA_ROUTES = ("auto", "cupy", "triton", "torch")
_CUDA_ROUTE: contextvars.ContextVar = contextvars.ContextVar("pychop_compat_cuda_route", default="auto")
_DEVICE_PATHS: contextvars.ContextVar = contextvars.ContextVar("pychop_compat_device_paths_on_cpu", default=False)


@contextlib.contextmanager
def cuda_route(route: str) -> Iterator[None]:
    """Pick how CUDA tensors are rounded within ``with`` (for checks and benchmarks).

    Parameters
    ----------
    route : {'auto', 'cupy', 'triton', 'torch'}
        ``'auto'`` (the default): CuPy's kernel if CuPy can use the GPU, else
        Triton's where it applies, else the namespace kernel.  ``'cupy'`` and
        ``'triton'`` insist on that kernel (an error when it is missing; Triton
        leaves what it does not cover to the namespace kernel); ``'torch'``:
        the namespace kernel.  Every route gives the same bits.  Under
        :func:`device_paths_on_cpu` a CPU tensor takes a CUDA tensor's routes but has no
        CuPy kernel (CuPy reads CUDA memory only): ``'cupy'`` is an error there too.

    Raises
    ------
    ValueError
        For another ``route``.
    """
    if route not in CUDA_ROUTES:
        raise ValueError(f"cuda_route: route must be one of {', '.join(map(repr, CUDA_ROUTES))}, not {route!r}.")
    token = _CUDA_ROUTE.set(route)
    try:
        yield
    finally:
        _CUDA_ROUTE.reset(token)


def get_cuda_route() -> str:
    """The :func:`cuda_route` in force here."""
    return _CUDA_ROUTE.get()


@contextlib.contextmanager
def device_paths_on_cpu(enabled: bool = True) -> Iterator[None]:
    """Within ``with``, CPU tensors take the routes of a CUDA tensor (a test hook).

    Their numbers are then made on the device (the counter of ``'cpu:0'``)
    where a GPU tensor's are: the tests check those routes without a GPU.

    Raises
    ------
    TypeError
        For an ``enabled`` that is not a bool (``'no'`` would be true).
    """
    if not isinstance(enabled, (bool, np.bool_)):
        raise TypeError(f"device_paths_on_cpu: enabled must be a bool, not {enabled!r}.")
    token = _DEVICE_PATHS.set(bool(enabled))
    try:
        yield
    finally:
        _DEVICE_PATHS.reset(token)


# --- what can run here (cached; tests of other machines patch these functions) -------------------

@functools.lru_cache(maxsize=1)
def _cupy_module() -> Any:
    if importlib.util.find_spec("cupy") is None:
        return None
    try:
        import cupy

        return cupy if cupy.cuda.runtime.getDeviceCount() > 0 else None
    except Exception:  # a CuPy without a usable CUDA runtime
        return None


def cupy_for(call: "Call") -> Any:
    """The CuPy module that can run CUDA's kernel on the call's memory, or None: the array's own
    for a CuPy array; for a torch tensor on a CUDA device, CuPy when it is installed and sees a GPU."""
    if call.library == "cupy":
        return sys.modules.get("cupy")
    if call.library == "torch" and call.device.startswith("cuda"):
        return _cupy_module()
    return None


_TRITON_FAILED: list = []  # Triton could not compile or launch here (a warning was given)


def triton_for(call: "Call") -> Any:
    """The Triton kernel module for a torch tensor it can run on, or None: a CUDA tensor, or a
    CPU tensor under Triton's interpreter (``TRITON_INTERPRET=1``), with Triton installed."""
    if call.library != "torch" or _TRITON_FAILED:
        return None
    if not (call.device.startswith("cuda") or os.environ.get("TRITON_INTERPRET") == "1"):
        return None
    from ..kernels import triton_kernel

    return triton_kernel if triton_kernel.available() else None


# --- calls and routes -------------------------------------------------------------------------

class Call(NamedTuple):
    """What the router knows of a call (a named tuple: cheap to make on every call).

    Attributes
    ----------
    library : str
        ``'float'``, ``'numpy'``, ``'torch'``, ``'cupy'``, ``'jax'`` or ``'dask'`` (a block).
    device : str
        ``'cpu'``, or the device of a GPU array (``'cuda:0'``).
    host : bool
        The host kernels read the memory in place.
    dtype : str
        The dtype rounded in (float32 or float64).
    size : int
        The number of elements.
    numbers : str
        ``'none'``, ``'host'`` (drawn in chop.m's order), ``'counter'`` (``Chop(rng=<int>)``),
        ``'device'`` (the device's counter) or ``'given'`` (per element, by the caller).
    traced : bool
        A JAX array inside ``jax.jit``/``jax.vmap``.
    block : bool
        A Dask block: counter numbers at the elements' global indices.
    """

    library: str
    device: str
    host: bool
    dtype: str
    size: int
    numbers: str
    traced: bool = False
    block: bool = False


@dataclasses.dataclass(frozen=True)
class Kernel:
    """An entry of the registry: ``takes(call, spec, sources, x)`` is None when the kernel
    rounds the call, else why it passes; ``run(x, call, spec, sources, stream)`` rounds."""

    name: str
    where: str
    takes: Callable[..., Optional[str]]
    run: Callable[..., Any]


@dataclasses.dataclass(frozen=True)
class Route:
    """A kernel for a call, and why each kernel before it passed (``(name, reason)`` pairs)."""

    call: Call
    kernel: Kernel
    passed_over: tuple


def _numbers(spec: RoundingSpec, sources: RandomSources, host: bool, library: str) -> str:
    if not spec.draws:
        return "none"
    if sources.given is not None and spec.stochastic and not spec.flips:
        return "given"
    if sources.counter is not None:
        return "counter"
    if not host and library in ("torch", "cupy") and draws_on_device(sources):
        return "device"
    return "host"


def _tensor_call(t: Any, spec: RoundingSpec, sources: RandomSources) -> Call:
    device = f"{t.device.type}:{t.device.index or 0}" if t.device.type != "cpu" else "cpu"
    host = t.device.type == "cpu" and not _DEVICE_PATHS.get()
    return Call("torch", device, host, carrier_name(t), t.numel(), _numbers(spec, sources, host, "torch"))


def _cupy_call(a: Any, spec: RoundingSpec, sources: RandomSources) -> Call:
    return Call("cupy", f"cuda:{a.device.id}", False, a.dtype.name, a.size, _numbers(spec, sources, False, "cupy"))


def _jax_call(a: Any, spec: RoundingSpec, sources: RandomSources) -> Call:
    numbers = _numbers(spec, sources, False, "jax")
    return Call("jax", "jax", False, str(a.dtype), a.size, numbers, traced=jax_engine.is_traced(a))


#: dtype character -> name (NumPy's ``dtype.name`` is a slow Python property on the hot path).
_NAMES = {"d": "float64", "f": "float32"}


def _host_call(a: np.ndarray, spec: RoundingSpec, sources: RandomSources, library: str = "numpy") -> Call:
    name = _NAMES.get(a.dtype.char) or a.dtype.name
    return Call(library, "cpu", True, name, a.size, _numbers(spec, sources, True, library))


def route(x: Any, spec: RoundingSpec, sources: RandomSources, *, library: Optional[str] = None) -> Route:
    """The kernel that :func:`round_array` would run for ``x`` (pure: nothing is drawn or rounded).

    ``x`` is anything :func:`round_array` takes (``library`` as there); a Dask array or a
    labelled array is described by its first block or by the values it holds (a block length
    that Dask does not know yet, after boolean indexing, as 2).  E8M0 that
    :func:`round_array` rounds in float64 for float32 input (see :func:`_e8m0_widens`) is
    described in float64 (``call.dtype``), where it runs.

    Raises
    ------
    TypeError
        For unsupported input, and for E8M0 of a float32 JAX array inside ``jax.jit`` without
        64-bit types (as :func:`round_array`).
    ValueError
        For a call that :func:`round_array` refuses (a Dask array's stochastic rounding
        without ``Chop(rng=<int>)``, or with unknown chunk sizes; bit flips with a precision
        ``t < 2`` under chop's rules or correct rounding).
    RuntimeError
        When :func:`cuda_route` asks for a kernel that cannot run here.
    """
    if spec.flips and spec.fmt.t < 2 and spec.range_rules != "cpfloat":
        raise ValueError(FLIP_PRECISION_ERROR)  # (every kernel refuses it, some only once they run)
    work, call = _prepared(x, spec, sources, library)
    if _e8m0_widens(spec) and call.dtype == "float32":
        work, call = _widened(work, call, spec, sources)
    return route_call(call, spec, sources, work)


def _widened(work: Any, call: Call, spec: RoundingSpec, sources: RandomSources) -> tuple:
    """``(working array, Call)`` of float32 E8M0 that :func:`round_array` rounds in float64
    (:func:`_e8m0_in_float64`, :func:`_round_host`); only host kernels read the array."""
    if call.library == "jax" and not jax_engine.x64_enabled():
        if call.traced:
            raise TypeError(_E8M0_JAX_FLOAT32)
        host = np.asarray(work, dtype=np.float64)  # (a concrete array: rounded on the host)
        return host, _host_call(host, spec, sources, "jax")
    return (np.asarray(work, dtype=np.float64) if call.host else work), call._replace(dtype="float64")


def _prepared(x: Any, spec: RoundingSpec, sources: RandomSources, library: Optional[str] = None) -> tuple:
    """``(working array, Call)`` without rounding anything (for :func:`route`)."""
    library = library or array_library(x)
    if type(x) is float:
        return x, Call("float", "cpu", True, "float64", 1, _numbers(spec, sources, True, "numpy"))
    if library == "numpy":
        arr, _ = numpy_engine.as_float_array(np.asarray(x) if isinstance(x, np.ndarray) else x)
        return arr, _host_call(arr, spec, sources)
    if library == "torch":
        work, _ = torch_engine.working_tensor(x.detach())
        call = _tensor_call(work, spec, sources)
        return (torch_engine.host_view(work) if call.host else work), call
    if library == "cupy":
        work, _ = cupy_engine.working_array(x)
        return work, _cupy_call(work, spec, sources)
    if library == "jax":
        work, _ = jax_engine.working_array(x)
        return work, _jax_call(work, spec, sources)
    if library == "dask":
        _check_dask_numbers(spec, sources)
        if spec.draws:  # (as the call: numbers by global position need the chunk sizes)
            dask_engine.check_chunks(x)
        dtype, _ = dask_engine.working_dtypes(x.dtype)
        # The first block; a length Dask does not know yet (NaN) is described as 2, a block of more
        # than one element (each block is routed when it is computed)
        block = np.empty(tuple((2 if math.isnan(c[0]) else c[0]) if c else 0 for c in x.chunks), dtype)
        call = _host_call(block, spec, sources, "dask")._replace(block=spec.draws)
        return block, call
    if library in ("pandas", "xarray"):
        return _prepared(x.to_numpy() if library == "pandas" else x.data, spec, sources)
    raise unsupported_type_error(x)


def _check_cuda_route(call: Call, spec: RoundingSpec) -> None:
    """The errors of a :func:`cuda_route` that cannot run a CUDA tensor's call here (or a CPU
    tensor's on a CUDA tensor's routes, :func:`device_paths_on_cpu`)."""
    if call.library == "torch" and not call.host and not spec.extended:
        setting = _CUDA_ROUTE.get()
        if setting == "cupy" and cupy_for(call) is None:
            reason = "CuPy is not installed or cannot use this GPU" if call.device.startswith("cuda") else _CPU_TENSOR
            raise RuntimeError(f"cuda_route('cupy'): {reason}.")
        if setting == "triton" and call.device.startswith("cuda") and _triton_applies(call, spec) \
                and triton_for(call) is None:
            raise RuntimeError(f"cuda_route('triton'): {_no_triton(call)}.")


def route_call(call: Call, spec: RoundingSpec, sources: RandomSources, x: Any = None) -> Route:
    """The route of a described call (also of one that cannot be made here, such as a CUDA
    tensor's on a machine without a GPU): the first kernel of :data:`REGISTRY` that takes it.

    Raises
    ------
    RuntimeError
        When :func:`cuda_route` asks for a kernel that cannot run the call.
    """
    spec = _e8m0_spec(spec, call)
    _check_cuda_route(call, spec)
    passed: list[tuple[str, str]] = []
    for kernel in REGISTRY:
        reason = kernel.takes(call, spec, sources, x)
        if reason is None:
            return Route(call, kernel, tuple(passed))
        passed.append((kernel.name, reason))
    raise TypeError(f"no kernel rounds this call: {call}")  # pragma: no cover - the host kernels take all


# --- the registry: when each kernel takes a call ----------------------------------------------

def _not_host(call: Call) -> Optional[str]:
    """Why a host kernel does not take the call (None: it may)."""
    if call.host and not call.block:
        return None
    if not call.host:
        return "the array is not in host memory that NumPy reads in place"
    return "a block of a Dask array takes the counter's numbers at its global indices"


def _takes_scalar(call: Call, spec: RoundingSpec, sources: RandomSources, x: Any) -> Optional[str]:
    if call.library != "float":
        return "not a Python float"
    if spec.flips:
        return "bit flips need an array"
    if spec.extended:
        return "a spec beyond chop.m's semantics"
    return None


def _no_numba() -> str:
    return "cpu_engine('numpy') is in force" if get_cpu_engine() == "numpy" else "Numba is not installed"


# --- loading the compiled engine under 'auto' ---------------------------------------------------
# A new process pays about a second to load the compiled kernels (Numba's import, then its first
# dispatch initialises Numba's target), while a small call gains some 25 us from them.  Under
# 'auto' the calls the compiled engine would take run on the NumPy engine (the same bits) until
# they have taken about as long as the load would (rent until the rent would have bought it), or
# the load happens at once for an array that alone would pay for it.  cpu_engine('numba') and
# warm_up() load at once.

#: Seconds of NumPy engine time, on calls the compiled engine would take, after which it loads
#: (loading costs 0.6 to 1 s on the 2-core reference machine, Numba's cache warm:
#: benchmarks/bench_first_call.py).
_LOAD_SECONDS = 0.5
#: The compiled engine's gain per element, in seconds, on the same machine: deterministic modes,
#: numbers drawn (stochastic rounding, flips), and CPFloat's kernel's stochastic modes (whose
#: other route is the executable specification).
_GAIN_PER_ELEMENT, _GAIN_PER_DRAWN_ELEMENT, _GAIN_PER_SPECIFIED_ELEMENT = 3e-9, 40e-9, 1e-6
#: The NumPy engine's seconds on calls that the compiled engine would have taken.
_spent_waiting = 0.0
#: Set once the compiled engine is loaded or due to load: from then on no call waits.
_load_due = False

_LOADING_LATER = ("the compiled kernels are not loaded yet: under 'auto' calls run on the NumPy engine (the same "
                  "bits) until they have taken about as long as loading Numba")


def _compiled_ready(size: int, gain_per_element: float) -> bool:
    """Whether a call that a compiled kernel takes runs there now (loading it if need be): under
    ``'numba'``, once loaded, or when the time so far and this call's gain pay for the load.
    It only reads (route() and explain() are pure): a load sets ``_load_due`` (:func:`_loaded`)."""
    return _load_due or get_cpu_engine() == "numba" or _spent_waiting + size * gain_per_element >= _LOAD_SECONDS


def _loaded() -> None:
    """The compiled kernels have loaded, however it happened (warm_up(), cpu_engine('numba'), a
    small call's plan, 'auto''s own load): no call waits from now on, and the plans made while
    waiting are forgotten, so that the next small call is planned with the compiled kernel."""
    global _load_due
    _load_due = True
    _forget_plans()


def _while_loading(run: Callable[..., Any], *args: Any) -> Any:
    """``run(*args)``, a call run elsewhere while the compiled engine waits to load, timed; once
    the load is due the small calls' plans are made again (a load elsewhere, by an explicit
    request, forgets them at once: :func:`_loaded`)."""
    global _spent_waiting, _load_due
    if _load_due:
        _forget_plans()
        return run(*args)
    start = time.perf_counter()
    out = run(*args)
    _spent_waiting += time.perf_counter() - start
    if _spent_waiting >= _LOAD_SECONDS:
        _load_due = True
        _forget_plans()
    return out


def _timed_while_waiting(run: Callable[[np.ndarray], Any], call: Call, spec: RoundingSpec, sources: RandomSources,
                         x: np.ndarray) -> Callable[[np.ndarray], Any]:
    """A small call's plan ``run``, timed by :func:`_while_loading` when a compiled kernel passed
    the call over only to load later."""
    if not _load_due and (_takes_numba(call, spec, sources, x) is _LOADING_LATER
                          or _takes_numba_cpfloat(call, spec, sources, x) is _LOADING_LATER):
        return functools.partial(_while_loading, run)
    return run


def _takes_numba(call: Call, spec: RoundingSpec, sources: RandomSources, x: Any) -> Optional[str]:
    reason = _not_host(call)
    if reason:
        return reason
    if not compiled.wanted():
        return _no_numba()
    if spec.range_rules != "chop":
        return _NOT_CHOP_RULES[spec.range_rules]
    if not isinstance(x, np.ndarray) or not compiled.handles(x, spec):
        return ("one element (the compiled engine takes arrays of more than one)" if call.size <= 1
                else "a spec it does not cover (modes outside 1..6, flips of any bit, a format wider than "
                     "the carrier) or bit flips with t < 2")
    # Under 'auto' the NumPy engine draws a Generator's numbers block by block while it rounds; the
    # compiled engine would draw every number first, which measured slower (docs/performance.rst).
    if (get_cpu_engine() == "auto" and spec.stochastic and not spec.flips and sources.counter is None
            and sources.stochastic is not stream_uniform and numpy_fast.is_sequential_stream(sources.stochastic)):
        return "stochastic rounding from a NumPy Generator streams faster through the NumPy engine"
    gain = _GAIN_PER_DRAWN_ELEMENT if spec.draws else _GAIN_PER_ELEMENT
    return None if _compiled_ready(call.size, gain) else _LOADING_LATER


def _takes_numpy(call: Call, spec: RoundingSpec, sources: RandomSources, x: Any) -> Optional[str]:
    return _not_host(call) or (_NOT_CHOP_RULES[spec.range_rules] if spec.range_rules != "chop" else None)


_NOT_CHOP_RULES = {"cpfloat": "CPFloat's rules",
                   "correct": "correct rounding (a format name beyond chop.m's own)"}


def _deterministic_cpfloat(spec: RoundingSpec) -> Optional[str]:
    if not spec.cpfloat_rules:
        return ("chop's rules" if spec.range_rules == "chop" else
                "correct rounding with chop's draws, directed modes or flips (the specification runs it)")
    if spec.round in (5, 6) or spec.flips:
        return "CPFloat's random modes and bit flips draw in column-major order"
    return None


def _takes_numba_cpfloat(call: Call, spec: RoundingSpec, sources: RandomSources, x: Any) -> Optional[str]:
    if spec.round in (5, 6) and spec.range_rules == "correct":  # chop's stochastic modes, correct rounding
        reason = _not_host(call) or ("bit flips or limited random bits (the specification runs them)"
                                     if spec.flips or spec.random_bits else None)
    elif spec.range_rules == "cpfloat" and spec.draws:  # CPFloat's random modes and bit flips
        reason = _not_host(call)
    else:
        reason = _not_host(call) or _deterministic_cpfloat(spec)
    if reason:
        return reason
    if not compiled.wanted():
        return _no_numba()
    if not _compiled_ready(call.size, _GAIN_PER_SPECIFIED_ELEMENT if spec.stochastic else _GAIN_PER_ELEMENT):
        return _LOADING_LATER  # (asked first: importing the kernels' module imports Numba)
    if not _numba_cpfloat().handles(np.asarray(x) if type(x) is float else x, spec):  # (a float: a 0-d array)
        return "a call it does not cover (one element, a non-native dtype)"
    return None


def _takes_cuda(call: Call, spec: RoundingSpec, sources: RandomSources, x: Any) -> Optional[str]:
    if call.library not in ("cupy", "torch") or call.host:
        return "not a CuPy array or a CUDA tensor"
    if call.library == "torch" and _CUDA_ROUTE.get() not in ("auto", "cupy"):
        return f"cuda_route({_CUDA_ROUTE.get()!r}) is in force"
    if cupy_for(call) is None:
        return "CuPy is not installed or sees no GPU" if call.device.startswith("cuda") else _CPU_TENSOR
    if spec.extended:
        return "a spec beyond chop.m's semantics"
    if call.numbers == "given":
        return "it takes no numbers given per element"
    return None


def _triton_applies(call: Call, spec: RoundingSpec) -> bool:
    return not spec.extended and not spec.flips and (spec.round <= 4 or call.numbers in ("counter", "device"))


def _takes_triton(call: Call, spec: RoundingSpec, sources: RandomSources, x: Any) -> Optional[str]:
    if call.library != "torch" or call.host:
        return "not a CUDA tensor"
    if _CUDA_ROUTE.get() not in ("auto", "triton"):
        return f"cuda_route({_CUDA_ROUTE.get()!r}) is in force"
    if spec.extended:
        return "a spec beyond chop.m's semantics"
    if spec.flips:
        return "bit flips"
    if not _triton_applies(call, spec):
        return "stochastic rounding with numbers from the host or given per element"
    if triton_for(call) is None:
        return _no_triton(call)
    return None


#: Why CuPy's kernel passes a CPU tensor on a CUDA tensor's routes (:func:`device_paths_on_cpu`).
_CPU_TENSOR = "the tensor is on the CPU (device_paths_on_cpu()), and CuPy's kernel reads CUDA memory only"


def _no_triton(call: Call) -> str:
    """Why :func:`triton_for` gives no kernel for ``call`` (a torch tensor off the host)."""
    if _TRITON_FAILED:  # (installed, but it failed here: _run_triton warned and recorded why)
        failure = _TRITON_FAILED[0]
        return f"Triton failed in this process earlier ({type(failure).__name__}: {failure}), so it is not tried again"
    if importlib.util.find_spec("triton") is None or call.device.startswith("cuda"):
        return "Triton is not installed"
    return "Triton runs a CPU tensor only in its interpreter (TRITON_INTERPRET=1)"


def _takes_namespace(call: Call, spec: RoundingSpec, sources: RandomSources, x: Any) -> Optional[str]:
    if call.host and not call.block:
        return "the host kernels read this memory in place"
    host_numbers_here = call.library in ("torch", "cupy")
    if spec.range_rules == "correct" and spec.draws:
        if spec.flips or call.numbers not in ("counter", "device", "given"):
            return "correct rounding with bit flips or numbers drawn in chop.m's order (the host runs it)"
        reason = None
    elif cpfloat_covers(spec):
        reason = None
    elif cpfloat_covers(spec, stochastic=True):
        reason = None if host_numbers_here else "CPFloat's random modes draw on the host"
    elif not elementwise_covers(spec):
        return ("bit flips, limited random bits or E8M0 beyond chop.m's semantics"
                if spec.range_rules == "chop" else "CPFloat's rules with bit flips")
    elif spec.flips and spec.fmt.t < 2:
        return FLIP_PRECISION_ERROR
    elif call.numbers == "host" and not host_numbers_here:
        reason = "numbers drawn by the host in chop.m's order"
    else:
        reason = None
    if reason is None and call.library == "jax":
        if not (jax_engine.x64_enabled() or spec.fmt.t <= 24 or cpfloat_covers(spec)):
            reason = "a precision t > 24 needs JAX's 64-bit integers (jax_enable_x64)"
        elif call.numbers == "counter" and not jax_engine.x64_enabled():
            reason = "the counter-based numbers need JAX's 64-bit integers (jax_enable_x64)"
    return reason


# --- the registry: how each kernel runs ---------------------------------------------------------

def _run_numpy(x: np.ndarray, call: Call, spec: RoundingSpec, sources: RandomSources, stream: Any) -> Any:
    if not spec.extended:
        return numpy_fast.chop_array(x, spec, sources)
    encode = _chop_rules_checked(spec)
    sources = limited_bit_sources(sources, spec.random_bits) if spec.random_bits else sources
    if encode is None or spec.fmt.encoding != "e8m0":
        # The encoding changes only Inf, -0 and (with flips) results beyond xmax, which the
        # fast engine's regular elements never give: it is applied to its special elements.
        return numpy_fast.chop_array(x, spec, sources, finish_special=encode)
    out = numpy_fast.chop_array(x, spec, sources)
    encode(out, x)
    return out


def _chop_rules_checked(spec: RoundingSpec) -> Optional[Callable[[np.ndarray, np.ndarray], None]]:
    """The encoding step of chop's rules on an extended spec (None with ``explim = 0``, which
    ignores the format's range and its encoding), after checking what chop's rules can do."""
    if not 1 <= spec.round <= 6:
        raise ValueError(f"Rounding mode {spec.round} needs range_rules='cpfloat' (chop's rules know modes 1-6).")
    if spec.flip_scope != "fraction":
        raise ValueError("Flips of any encoding bit need range_rules='cpfloat'.")
    if not spec.limits_exponent:
        return None

    def encode(c: np.ndarray, xs: np.ndarray) -> None:
        with np.errstate(invalid="ignore"):
            apply_encoding(c, xs, spec.fmt, spec.round, spec.saturation, spec.infinity, spec.flips)

    return encode


def _run_numba_cpfloat(x: np.ndarray, call: Call, spec: RoundingSpec, sources: RandomSources, stream: Any) -> Any:
    kernels = _numba_cpfloat()
    if spec.range_rules == "cpfloat" and spec.draws:
        return kernels.round_drawn(x, spec, sources)
    if spec.round not in (5, 6):
        return kernels.round_array(x, spec)
    # Correct rounding in chop's stochastic modes: the numbers as rules.cpfloat.round_correct
    # takes them (per element, or drawn block by block in chop.m's order), the rounding compiled.
    xf = x.ravel(order="F")
    u = _per_element_numbers(call, x, spec, sources)
    if u is not None:
        u = u.astype(x.dtype).astype(np.float64)  # chop.m compares in the input's class
    else:
        truncate = dataclasses.replace(spec, round=4)
        u = np.empty(xf.size)
        for index in chop_blocks(xf, spec):
            if index.size:
                values = xf[index]
                u[index] = block_numbers(values, kernels.round_array(values, truncate), sources)
    return kernels.round_stochastic(xf, spec, u).reshape(x.shape, order="F")


@functools.lru_cache(maxsize=1)
def _numba_cpfloat() -> Any:
    """:mod:`pychop_compat.kernels.numba_cpfloat`, imported (with Numba) on first use."""
    from ..kernels import numba_cpfloat

    _loaded()  # (Numba's import paid: 'auto' takes the compiled kernels from now on)
    return numba_cpfloat


def _run_reference(x: np.ndarray, call: Call, spec: RoundingSpec, sources: RandomSources, stream: Any) -> Any:
    """The executable specification: chop.m's algorithm (the format's encoding after it), or
    CPFloat's rules, with the numbers in column-major order."""
    if spec.random_bits:
        sources = limited_bit_sources(sources, spec.random_bits)
    xf = x.ravel(order="F")
    if spec.range_rules == "correct":
        given = _per_element_numbers(call, x, spec, sources)
        return round_correct(xf, spec, sources, given).reshape(x.shape, order="F")
    if spec.range_rules == "chop":
        encode = _chop_rules_checked(spec) if spec.extended else None
        out = chop_vector(xf, spec, sources).reshape(x.shape, order="F")
        if encode is not None:
            encode(out, x)
        return out
    if spec.range_rules != "cpfloat":
        raise ValueError(f"Unknown range_rules {spec.range_rules!r}; allowed: 'chop', 'correct', 'cpfloat'.")
    c = round_cpfloat(xf, spec.fmt, spec.round, spec.keeps_subnormals, spec.limits_exponent,
                      spec.saturation, spec.infinity, sources)
    if spec.flips and spec.round in ROUND_MODES:
        c = flip_bits(c, effective_format(spec.fmt, x.dtype, spec.limits_exponent), spec.flip_scope,
                      spec.p, sources)
    return c.reshape(x.shape, order="F")


def _e8m0_widens(spec: RoundingSpec) -> bool:
    """E8M0 under CPFloat's rules (or correct rounding) is rounded in float64 when the input is
    float32: its smallest number 2^-127 lies below float32's normal range, to which CPFloat's
    rules clamp the exponent range (the casts to float64 and back are exact)."""
    return spec.fmt.encoding == "e8m0" and spec.range_rules != "chop" and spec.limits_exponent


def _e8m0_spec(spec: RoundingSpec, call: Call) -> RoundingSpec:
    """The spec every kernel rounds ``call``'s working array by: E8M0 under correct rounding with
    ``explim = 0`` as E8M0 widened to the array's exponent range (see
    :func:`~pychop_compat.rules.cpfloat.correct_spec`), so that each kernel applies its encoding."""
    return correct_spec(spec, call.dtype) if spec.fmt.encoding == "e8m0" else spec


_E8M0_JAX_FLOAT32 = ("E8M0 of a float32 JAX array is rounded in float64 (its smallest number 2^-127 is "
                     "below float32's normal range), which JAX has only with "
                     "jax.config.update('jax_enable_x64', True); or call chop outside jax.jit.")


def _e8m0_in_float64(x: Any, spec: RoundingSpec, sources: RandomSources, kernel: Optional[str],
                     library: Optional[str]) -> Any:
    """``x`` of float32 rounded to E8M0 in float64 (see :func:`_e8m0_widens`), on its own device;
    a concrete JAX array without 64-bit types through the host.  None for other inputs."""
    library = library or array_library(x)
    if library == "torch" and str(x.dtype) in ("torch.float32", "torch.bfloat16"):  # (bfloat16: computed as float32)
        import torch

        return round_array(x.to(torch.float64), spec, sources).to(x.dtype)
    if library == "jax" and str(x.dtype) == "bfloat16":  # (computed as float32, so widened as float32 is)
        wide = _e8m0_in_float64(x.astype("float32"), spec, sources, kernel, library)
        return None if wide is None else wide.astype(x.dtype)
    if library == "cupy" and getattr(x, "dtype", None) == np.float32:  # (host arrays: _round_host widens them)
        ns = namespace_of(x)
        if ns.name == "cupy":  # (CuPy's conversions flush float32 subnormals, 2**-127 too)
            return exact_float32(ns, round_array(exact_float64(ns, x), spec, sources, kernel=kernel, library=library))
        return round_array(x.astype(np.float64), spec, sources, kernel=kernel, library=library).astype(np.float32)
    if library == "jax" and str(x.dtype) == "float32":
        if jax_engine.x64_enabled():
            return jax_engine.narrow_to_float32(round_array(jax_engine.widen_float32(x), spec, sources))
        if jax_engine.is_traced(x):
            raise TypeError(_E8M0_JAX_FLOAT32)
        return jax_engine.from_host(round_array(jax_engine.to_host(x), spec, sources), x)
    return None


def _per_element_numbers(call: Call, x: np.ndarray, spec: RoundingSpec,
                         sources: RandomSources) -> Optional[np.ndarray]:
    """Stochastic rounding's numbers made per element (a seeded counter, or given by the caller),
    in column-major order, for the host's run of correct rounding; None: drawn in chop.m's order."""
    if not spec.stochastic or call.numbers not in ("counter", "given"):
        return None
    if call.numbers == "given":
        u = np.broadcast_to(np.asarray(sources.given, dtype=np.float64), x.shape)
    else:
        stream = cast(CounterRng, sources.counter).take(call.size)
        # (a 1-D index: on a 0-d one NumPy's scalar arithmetic warns of the wrap the definition intends)
        u = device_counter.uniform(np, stream.keys[0], stream.offset, np.arange(call.size)).reshape(x.shape)
    return np.asarray(u, dtype=np.float64).ravel(order="F")


def _run_cuda(x: Any, call: Call, spec: RoundingSpec, sources: RandomSources, stream: Any) -> Any:
    from ..kernels.cuda import chop_device_array

    cupy = cupy_for(call)
    if call.library == "torch":
        return torch_engine.on_cupy(cupy, x, lambda a: chop_device_array(a, spec, sources, stream))
    with x.device:
        return chop_device_array(x, spec, sources, stream)


def _run_triton(x: Any, call: Call, spec: RoundingSpec, sources: RandomSources, stream: Any) -> Any:
    """Regular elements in the Triton kernel, the others by the namespace kernel; where Triton
    cannot run, a warning and the namespace kernel from then on (an error under cuda_route('triton'))."""
    import torch
    carrier = CARRIERS[call.dtype]
    regular = regular_range(spec, carrier)
    flat = x.contiguous().view(-1)
    out = torch.empty_like(flat)
    try:
        specials = triton_for(call).chop_regular(flat, out, spec, regular, stream)
    except Exception as exc:  # Triton's compiler or driver, not the rounding
        if _CUDA_ROUTE.get() == "triton":
            raise
        import warnings

        warnings.warn(f"pychop_compat: Triton kernel unusable here ({type(exc).__name__}: {exc}); "
                      "CUDA tensors use the namespace kernel.", RuntimeWarning, stacklevel=4)
        _TRITON_FAILED.append(exc)
        return _run_namespace(x, call, spec, sources, stream)
    if specials:
        magnitude = flat.view(torch.int64 if carrier.mant == 52 else torch.int32) & carrier.abs_mask
        indices = torch_engine.flat_nonzero(triton_for(call).left_over(magnitude, spec, regular, carrier))
        ns = library_namespace("torch")
        plan = plan_for(spec, call.dtype)
        draws = counter_draws(ns, plan, stream, indices) if stream is not None else None
        out[indices] = chop_elementwise(ns, flat[indices], plan, draws)
    return out.view(x.shape)


def _column_major(xp: Any, x: Any) -> Any:
    """The elements of ``x`` in MATLAB's order, as a vector."""
    return xp.reshape(xp.permute_dims(x, tuple(reversed(range(x.ndim)))), (-1,))


def _from_column_major(xp: Any, v: Any, shape: tuple) -> Any:
    return xp.permute_dims(xp.reshape(v, tuple(reversed(shape))), tuple(reversed(range(len(shape)))))


def _run_namespace(x: Any, call: Call, spec: RoundingSpec, sources: Optional[RandomSources], stream: Any,
                   index: Any = None) -> Any:
    """The namespace kernels, with the numbers drawn by the host in column-major order (CPFloat's
    for the inexact elements, or chop.m's), or else each element's own (:func:`_element_kernel`).
    ``sources`` may be None where the numbers are ``stream``'s (a Dask block's)."""
    if call.library == "jax":
        given = sources.given if call.numbers == "given" and sources is not None else None
        return _run_jax(x, call, spec, stream, (given, None, None))
    import array_api_compat

    ns = namespace_of(x)
    xp = ns.xp
    device = array_api_compat.device(x)
    if spec.range_rules != "correct" and cpfloat_covers(spec, stochastic=True):
        inexact = _column_major(xp, cpfloat_inexact(ns, x, spec))
        u = xp.full((call.size,), 2.0, dtype=xp.float64, device=device)
        count = int(xp.sum(xp.astype(inexact, xp.int64)))
        if count:
            u[inexact] = xp.asarray(host_numbers(cast(RandomSources, sources), spec, count), device=device)
        out = round_cpfloat_elementwise(ns, x, spec, _from_column_major(xp, u, tuple(x.shape)))
    elif call.numbers == "host" and spec.range_rules != "correct" and not cpfloat_covers(spec):
        plan = plan_for(spec, call.dtype)
        v = _column_major(xp, x)
        draws = host_draws(ns, v, plan, spec, cast(RandomSources, sources))
        out = _from_column_major(xp, chop_elementwise(ns, v, plan, draws), tuple(x.shape))
    else:
        numbers: tuple = (None, None, None)
        if call.numbers == "given":
            numbers = (cast(RandomSources, sources).given, None, None)
        elif stream is not None:  # each element's counter: its row-major index
            if index is None:
                index = xp.reshape(xp.arange(call.size, dtype=xp.int64, device=device), tuple(x.shape))
            numbers = _counter_numbers(xp, spec, stream, index)
        out = _element_kernel(ns, spec, x, *numbers)
    return _adapter(call).contiguous(out) if call.library in ("torch", "cupy") else out


def _run_jax(x: Any, call: Call, spec: RoundingSpec, stream: Any, numbers: tuple = (None, None, None)) -> Any:
    """The namespace kernels on a JAX array, run by the adapter (traced, eager or jitted)."""
    if stream is not None:
        jnp = sys.modules["jax"].numpy
        index = jnp.arange(call.size, dtype=jnp.int64).reshape(x.shape)
        numbers = _counter_numbers(jnp, spec, stream, index)
    ns = library_namespace("jax")
    return jax_engine.run(functools.partial(_element_kernel, ns, spec), (spec, ns.wide), x, *numbers)


def _counter_numbers(xp: Any, spec: RoundingSpec, stream: Any, index: Any) -> tuple:
    keys, offset = stream.keys, stream.offset
    return (device_counter.uniform(xp, keys[0], offset, index) if spec.stochastic else None,
            device_counter.uniform(xp, keys[1], offset, index) if spec.flips else None,
            device_counter.uniform(xp, keys[2], offset, index) if spec.flips else None)


def _element_kernel(ns: Namespace, spec: RoundingSpec, x: Any, u_round: Any, u_choice: Any, u_bit: Any) -> Any:
    """The namespace kernel with each element's numbers (a pure function of arrays: JAX traces it)."""
    if cpfloat_covers(spec):
        return round_cpfloat_elementwise(ns, x, spec)
    if spec.range_rules == "correct":
        return round_cpfloat_elementwise(ns, x, spec, u_round)
    flip = None
    if spec.flips and u_choice is not None:
        flip = flip_mask(ns.xp, u_choice, u_bit, float(spec.p), int(spec.fmt.t),
                         ns.xp.int64 if ns.wide else ns.xp.int32)
    return chop_elementwise(ns, x, spec, ElementDraws(u_round, flip))


def _run_host(x: Any, call: Call, spec: RoundingSpec, sources: RandomSources, stream: Any) -> Any:
    adapter = _adapter(call)
    host = adapter.to_host(x)
    with np.errstate(over="ignore", invalid="ignore"):
        if call.library == "jax" and not (host.size or spec.flips):
            out = host
        else:
            out = _round_host(host, spec, sources)
    return adapter.from_host(out, x)


REGISTRY = (
    Kernel("scalar", "pychop_compat.kernels.numpy_fast.chop_scalar", _takes_scalar,
           lambda x, call, spec, sources, stream: numpy_fast.chop_scalar(x, spec, sources)),
    Kernel("numba", "pychop_compat.kernels.compiled", _takes_numba,
           lambda x, call, spec, sources, stream: compiled.chop_array(x, spec, sources)),
    Kernel("numpy", "pychop_compat.kernels.numpy_fast", _takes_numpy, _run_numpy),
    Kernel("numba-cpfloat", "pychop_compat.kernels.numba_cpfloat", _takes_numba_cpfloat, _run_numba_cpfloat),
    Kernel("numpy-cpfloat", "pychop_compat.kernels.numpy_cpfloat",
           lambda call, spec, sources, x: _not_host(call) or _deterministic_cpfloat(spec),
           lambda x, call, spec, sources, stream: numpy_cpfloat.round_array(x, spec)),
    Kernel("reference", "pychop_compat.rules", lambda call, spec, sources, x: _not_host(call), _run_reference),
    Kernel("cuda", "pychop_compat.kernels.cuda", _takes_cuda, _run_cuda),
    Kernel("triton", "pychop_compat.kernels.triton_kernel", _takes_triton, _run_triton),
    Kernel("namespace", "pychop_compat.kernels.elementwise", _takes_namespace, _run_namespace),
    Kernel("host", "a copy to the host and back",
           lambda call, spec, sources, x: "already in host memory" if call.host else None, _run_host),
)

_BY_NAME = {kernel.name: kernel for kernel in REGISTRY}


def _adapter(call: Call) -> Any:
    return {"torch": torch_engine, "cupy": cupy_engine, "jax": jax_engine}.get(call.library, numpy_engine)


# --- running a route ---------------------------------------------------------------------------

def _run(x: Any, call: Call, spec: RoundingSpec, sources: RandomSources, kernel: Optional[str] = None) -> Any:
    waiting = False  # a compiled kernel passed the call over to load later
    spec = _e8m0_spec(spec, call)
    if kernel is not None:
        chosen = _BY_NAME[kernel]
    else:  # route_call's choice, without collecting the reasons (the hot path)
        if not call.host:
            _check_cuda_route(call, spec)
        for chosen in REGISTRY:
            reason = chosen.takes(call, spec, sources, x)
            if reason is None:
                break
            waiting = waiting or reason is _LOADING_LATER
    if call.traced and chosen.name == "host":  # (traced values have no host copy: say why the device passed)
        reason = _takes_namespace(call, spec, sources, x)
        if reason is not None and "jax_enable_x64" in reason:
            raise TypeError(f"chop inside jax.jit/vmap: {reason}: jax.config.update('jax_enable_x64', True).")
    if call.traced and call.numbers == "counter":
        raise TypeError("Chop(rng=<int>) counts its calls in Python, which jax.jit would freeze; "
                        "inside jit use chop_jax(x, options, seed=seed, offset=offset) or key=.")
    stream = None  # the counter numbers of a call off the host (taken here: the counter advances)
    if chosen.name in ("cuda", "triton", "namespace") and call.numbers == "counter":
        if spec.flips and spec.fmt.t < 2:
            raise ValueError(FLIP_PRECISION_ERROR)
        stream = cast(CounterRng, sources.counter).take(call.size)  # set: _numbers chose 'counter'
    elif chosen.name in ("cuda", "triton", "namespace") and call.numbers == "device":
        stream = device_counter.take(_adapter(call).device_key(x), call.size)
    if waiting:
        return _while_loading(chosen.run, x, call, spec, sources, stream)
    return chosen.run(x, call, spec, sources, stream)


def _round_host(x: np.ndarray, spec: RoundingSpec, sources: RandomSources, kernel: Optional[str] = None,
                library: str = "numpy") -> np.ndarray:
    """A float32/float64 ndarray (native byte order) by the host kernels."""
    if spec.fmt.encoding == "e8m0" and x.dtype == np.float32 and _e8m0_widens(spec):
        # Every host array passes here (NumPy's kinds, byte-swapped ones, Dask blocks, host copies)
        return _round_host(x.astype(np.float64), spec, sources, kernel, library).astype(np.float32)
    return _run(x, _host_call(x, spec, sources, library), spec, sources, kernel)


def round_array(x: Any, spec: RoundingSpec, sources: RandomSources, *, kernel: Optional[str] = None,
                library: Optional[str] = None) -> Any:
    """Round ``x`` by ``spec``, its random numbers from ``sources``: the one entry of every facade.

    Parameters
    ----------
    x : array, scalar or list
        A Python float, anything NumPy converts (lists, NumPy scalars, ndarrays and
        their masked, matrix and memmap kinds), a torch tensor, a CuPy, JAX or Dask
        array, a pandas Series/DataFrame or an xarray DataArray.
    spec : RoundingSpec
    sources : RandomSources
        Where stochastic rounding and bit flips draw (see :mod:`pychop_compat.random.sources`).
    kernel : str, optional
        Run this kernel of :data:`REGISTRY` (e.g. ``'reference'`` for the executable
        specification) instead of the router's choice (NumPy inputs).
    library : str, optional
        Treat ``x`` as an array of this library (``'cupy'``, ...) instead of asking
        :func:`~pychop_compat.libraries.array_library`: for a stand-in of another
        library's arrays (the tests run CuPy's route on NumPy arrays).

    Returns
    -------
    same type as ``x``
        A new object (``x`` is never modified) of ``x``'s type, shape, dtype and device
        (float64 for integer input); a tensor that requires grad gives a result in the
        autograd graph (the straight-through estimator).
    """
    if type(x) is np.ndarray and kernel is None and library is None:  # the hot path: small NumPy arrays
        planned = _planned(x, spec, sources)
        if planned is not None:
            return planned(x)
    if spec.fmt.encoding == "e8m0" and _e8m0_widens(spec):  # (the encoding first: the hot path)
        wide = _e8m0_in_float64(x, spec, sources, kernel, library)
        if wide is not None:
            return wide
    if library is None:
        if type(x) is np.ndarray and (x.dtype == np.float64 or x.dtype == np.float32) and x.dtype.isnative:
            if x.size or kernel is not None:  # the hot path
                return _round_host(x, spec, sources, kernel)
            return x.copy()
        if type(x) is float and kernel is None and _takes_scalar(_SCALAR_CALL, spec, sources, x) is None:
            return numpy_fast.chop_scalar(x, spec, sources)
        library = array_library(x)
    if library == "numpy":
        if isinstance(x, np.ndarray) and type(x) is not np.ndarray:
            # (Chop(rng=<int>): a masked array's numbers by position in the whole array, as on every engine)
            return numpy_engine.on_array_kind(x, lambda a: round_array(a, spec, sources, kernel=kernel),
                                              by_position=spec.draws and sources.counter is not None)
        arr, restore = numpy_engine.as_float_array(x)
        out = _round_host(arr, spec, sources, kernel) if arr.size else arr.copy()
        return restore(out) if restore else out
    if library == "torch":
        return torch_engine.with_autograd(x, lambda t: _round_tensor(t, spec, sources))
    if library == "cupy":
        work, give_back = cupy_engine.working_array(x)
        if work.size == 0:
            out = work.copy()
        else:
            out = _run(work, _cupy_call(work, spec, sources), spec, sources)
        return out.astype(give_back) if give_back is not None else out
    if library == "jax":
        work, give_back = jax_engine.working_array(x)
        out = _run(work, _jax_call(work, spec, sources), spec, sources)
        return out.astype(give_back) if give_back is not None else out
    if library == "dask":
        return _round_dask(x, spec, sources)
    if library in ("pandas", "xarray"):  # same type, index and coordinates; the values rounded
        return labelled.chop_labelled(x, lambda values: round_array(values, spec, sources))
    raise unsupported_type_error(x)


_SCALAR_CALL = Call("float", "cpu", True, "float64", 1, "none")

# --- small calls: the route of a (spec, sources, dtype, engine setting) found once ------------------

#: NumPy's own descriptors of native float64 and float32 (what ``np.empty`` and ufuncs give).
_FLOAT64, _FLOAT32 = np.dtype(np.float64), np.dtype(np.float32)
#: (id(spec), id(sources) or 0, dtype char, engine setting, Numba installed) -> (spec, sources, run
#: or None).  The entry holds the spec and the sources, so their ids are not reused while it lives.
_PLANS: dict = {}
_PLANS_MAX = 256
#: Counts the times every plan was forgotten (the compiled kernels loaded): a PreparedRounding
#: made its plans under the count it holds.
_plans_forgotten = 0


def _forget_plans() -> None:
    global _plans_forgotten
    _PLANS.clear()
    _plans_forgotten += 1


compiled.when_loaded(_loaded)  # (at once where the kernels loaded before this module)


class PreparedRounding:
    """:func:`round_array` for one spec and source of numbers, ``prepared(x)``: the kernel call of
    small NumPy arrays found once per dtype and CPU engine setting (and kept until the compiled
    kernels load under ``'auto'``).  The facades keep one per resolved options: a call on a
    small array then costs a dict lookup above its kernel.

    Parameters
    ----------
    spec : RoundingSpec
    sources : RandomSources
        Where the random numbers come from (a call that draws from MATLAB's stream is made
        holding the stream, as for :func:`round_array`).
    """

    __slots__ = ("spec", "sources", "_doubles", "_singles", "_combined", "_made_at")

    def __init__(self, spec: RoundingSpec, sources: RandomSources) -> None:
        self.spec = spec
        self.sources = sources
        self._doubles: dict = {}  # engine setting -> plan (None: round_array's general path)
        self._singles: dict = {}
        self._combined: dict = {}  # (dtype, engine setting) -> compiled.combined_call's function or None
        self._made_at = _plans_forgotten

    def __reduce__(self) -> tuple:  # (the plans hold compiled kernels: made again after unpickling)
        return PreparedRounding, (self.spec, self.sources)

    def __call__(self, x: Any) -> Any:
        """``round_array(x, spec, sources)``."""
        if type(x) is np.ndarray and 1 < x.size < compiled.SERIAL_BELOW:  # (read here: tests lower it)
            dtype = x.dtype
            plans = self._doubles if dtype is _FLOAT64 else self._singles if dtype is _FLOAT32 else None
            if plans is not None:
                if self._made_at != _plans_forgotten:
                    self._doubles.clear()
                    self._singles.clear()
                    self._combined.clear()
                    self._made_at = _plans_forgotten
                engine = get_cpu_engine()
                plan = plans.get(engine, False)
                if plan is False:
                    plan = plans[engine] = _plan(x, self.spec, self.sources)
                if plan is not None:
                    return plan(x)
        return round_array(x, self.spec, self.sources)

    def combined(self, ufunc: Any, a: Any, b: Any) -> Optional[np.ndarray]:
        """``self(ufunc(a, b))`` for ``np.add``, ``np.subtract``, ``np.multiply`` and
        ``np.true_divide`` of two NumPy arrays of one float dtype and shape, in one
        compiled loop, where ``self`` rounds such arrays with the compiled deterministic loop
        (a chopped-array operation, whose two calls cost more than the arithmetic on a small
        array); None otherwise, and where a result may raise a floating-point flag that NumPy
        reports (Inf, NaN, an underflowing product or quotient): the caller then computes
        ``ufunc(a, b)`` and calls ``self``."""
        code = _COMBINED_CODES.get(ufunc)
        if code is None or type(a) is not np.ndarray or type(b) is not np.ndarray or self._made_at != _plans_forgotten:
            return None
        dtype = a.dtype
        if b.dtype is not dtype or a.shape != b.shape or not 1 < a.size < compiled.SERIAL_BELOW:
            return None
        loop = self._combined.get((dtype, get_cpu_engine()), False)
        if loop is False:
            loop = self._combined[dtype, get_cpu_engine()] = _combined_plan(a, self.spec, self.sources)
        return None if loop is None else loop(code, a, b)

    def holding_stream(self, x: Any) -> Any:
        """``self(x)`` with MATLAB's stream held for the whole call, so that its numbers are one
        contiguous run; a small array whose kernel takes all its numbers in one loan of the
        stream's state (the compiled loops: ``draws_at_once``) holds it there only."""
        if type(x) is np.ndarray and 1 < x.size < compiled.SERIAL_BELOW and self._made_at == _plans_forgotten:
            dtype = x.dtype
            plans = self._doubles if dtype is _FLOAT64 else self._singles if dtype is _FLOAT32 else None
            plan = None if plans is None else plans.get(get_cpu_engine())
            if plan is not None and getattr(plan, "draws_at_once", False):
                return plan(x)
        with exclusive_stream():
            return self(x)


#: The operations :meth:`PreparedRounding.combined` computes, by their code in the compiled loop.
_COMBINED_CODES = {np.add: 0, np.subtract: 1, np.multiply: 2, np.true_divide: 3}


def _combined_plan(x: np.ndarray, spec: RoundingSpec, sources: RandomSources) -> Optional[Callable[..., Any]]:
    """:func:`compiled.combined_call` for ``spec`` and ``x``'s dtype where the router rounds
    ``x`` with the compiled loops (see :func:`_plan`), else None."""
    if spec.draws:  # (combined_call takes none; a drawing route depends on the sources)
        return None
    chosen = _routed_kernel(_host_call(x, spec, sources), x, spec, sources)
    return compiled.combined_call(spec, x.dtype) if chosen.name == "numba" else None


def _routed_kernel(call: Call, x: np.ndarray, spec: RoundingSpec, sources: RandomSources) -> Any:
    """The registry's first kernel that takes host array ``x`` (``call``) for ``spec`` and ``sources``."""
    return next(kernel for kernel in REGISTRY if kernel.takes(call, spec, sources, x) is None)


def _planned(x: np.ndarray, spec: RoundingSpec, sources: RandomSources) -> Optional[Callable[[np.ndarray], Any]]:
    """The kernel call that :func:`round_array` makes for ``x`` (a float32 or float64 ndarray in
    NumPy's native descriptor, more than one element, below the compiled engine's parallel
    size), found by the router once per spec, sources, dtype and engine setting; None: not
    planned (the general path then routes the call).

    The sources enter only where the spec draws: a deterministic route does not depend on them.
    """
    dtype = x.dtype
    if not ((dtype is _FLOAT64 or dtype is _FLOAT32) and 1 < x.size < compiled.SERIAL_BELOW):
        return None
    draws = spec.draws
    engine = get_cpu_engine()
    key = (id(spec), id(sources) if draws else 0, dtype.char, engine, engine != "numpy" and compiled.available())
    found = _PLANS.get(key)
    if found is None or found[0] is not spec or (draws and found[1] is not sources):
        if len(_PLANS) >= _PLANS_MAX:
            _PLANS.clear()
        found = _PLANS[key] = (spec, sources, _plan(x, spec, sources))
    return found[2]


def _plan(x: np.ndarray, spec: RoundingSpec, sources: RandomSources) -> Optional[Callable[[np.ndarray], Any]]:
    """The kernel call of the route of ``x`` for every array of its dtype with more than one
    element (see :func:`_planned`), for the kernels whose choice and call depend on nothing
    else; None for the others.  Each call looks its kernel up in its module, where tests spy."""
    if spec.fmt.encoding == "e8m0":
        return None  # (float32 is rounded in float64: round_array's general path)
    call = _host_call(x, spec, sources)
    chosen = _routed_kernel(call, x, spec, sources)
    if chosen.name == "numba":
        return compiled.small_call(spec, sources, x.dtype)
    if chosen.name == "numpy":
        return _timed_while_waiting(lambda a: _run_numpy(a, call, spec, sources, None), call, spec, sources, x)
    if chosen.name == "numba-cpfloat" and not spec.draws:
        return _numba_cpfloat().small_call(spec, x.dtype)
    if chosen.name == "numba-cpfloat" and spec.range_rules == "cpfloat":
        return lambda a: _numba_cpfloat().round_drawn(a, spec, sources)
    if chosen.name == "numpy-cpfloat":
        return _timed_while_waiting(lambda a: numpy_cpfloat.round_array(a, spec), call, spec, sources, x)
    return None


def _round_tensor(t: Any, spec: RoundingSpec, sources: RandomSources) -> Any:
    work, give_back = torch_engine.working_tensor(t)
    if work.numel() == 0:
        out = work.clone()
    elif work.device.type == "cpu" and sources.given is None and not _DEVICE_PATHS.get():
        # A CPU tensor's memory, read in place by the host kernels (the common case, first)
        out = torch_engine.from_host(_round_host(torch_engine.host_view(work), spec, sources), work)
    else:
        if sources.given is not None and hasattr(sources.given, "detach"):  # on the values' device
            sources = given_sources(sources.given.to(work.device))
        call = _tensor_call(work, spec, sources)
        if call.host:
            host_sources = given_sources(torch_engine.from_numbers(sources.given, work)) \
                if call.numbers == "given" else sources
            out = torch_engine.from_host(_round_host(torch_engine.host_view(work), spec, host_sources), work)
        else:
            out = _run(work, call, spec, sources)
    return out.to(give_back) if give_back is not None else out


def _round_dask(x: Any, spec: RoundingSpec, sources: RandomSources) -> Any:
    """A lazy Dask array; each block routed when it is computed (see :mod:`.dask_engine`)."""
    work, give_back = dask_engine.working_dtypes(x.dtype)
    choice = get_cpu_engine()  # the setting in force now serves every block, on any worker
    if not spec.draws:
        func = functools.partial(_round_dask_block, spec=spec, sources=sources, work=work, give_back=give_back,
                                 choice=choice)
        return dask_engine.map_blocks(x, func, give_back, (repr(spec), choice))  # (the engine named: graphs merge)
    _check_dask_numbers(spec, sources)
    dask_engine.check_chunks(x)
    stream = cast(CounterRng, sources.counter).take(int(np.prod(x.shape, dtype=np.int64)))
    func = functools.partial(_round_dask_block_counter, spec=spec, stream=stream, work=work, give_back=give_back)
    return dask_engine.map_blocks(x, func, give_back, (repr(spec), stream.keys, stream.offset))


def _check_dask_numbers(spec: RoundingSpec, sources: RandomSources) -> None:
    """The errors of a Dask array's call that draws: its numbers may depend only on positions."""
    if spec.draws and sources.counter is None:
        raise ValueError(
            "Stochastic rounding and bit flips on a Dask array need numbers that depend only on each "
            "element's position: use Chop(options, rng=<int seed>) (the counter-based generator). "
            "MATLAB's stream, NumPy Generators and options.randfunc draw in chop.m's sequential order.")
    if spec.draws and spec.extended:
        raise ValueError("Stochastic rounding and flips with this format's extended options are not "
                         "supported on Dask arrays; compute the array and use the NumPy engine.")
    if spec.flips and spec.fmt.t < 2:
        raise ValueError(FLIP_PRECISION_ERROR)


def _round_dask_block(block: np.ndarray, spec: RoundingSpec, sources: RandomSources, work: Any, give_back: Any,
                      choice: str) -> np.ndarray:
    if isinstance(block, np.ma.MaskedArray):  # (a block of a masked Dask array: its mask kept, as NumPy's)
        return numpy_engine.on_array_kind(block, functools.partial(
            _round_dask_block, spec=spec, sources=sources, work=work, give_back=give_back, choice=choice))
    values = np.asarray(block, dtype=work)
    with cpu_engine(choice), np.errstate(over="ignore", invalid="ignore"):
        out = _round_host(values, spec, sources) if values.size else values.copy()
    return out.astype(give_back, copy=False)


#: Elements rounded at a time inside a Dask block: the namespace kernel makes a few dozen
#: temporaries, so slices keep a worker's memory near the size of its blocks.
_SLICE = 1 << 16


def _round_dask_block_counter(block: np.ndarray, spec: RoundingSpec, stream: Any, work: Any, give_back: Any,
                              block_info: Any = None) -> np.ndarray:
    if isinstance(block, np.ma.MaskedArray):  # each element's numbers by its position; masked ones kept
        return numpy_engine.on_array_kind(block, functools.partial(
            _round_dask_block_counter, spec=spec, stream=stream, work=work, give_back=give_back,
            block_info=block_info), by_position=True)
    values = np.ascontiguousarray(block, dtype=work).reshape(-1)
    index = dask_engine.global_indices(block_info, block.shape).reshape(-1)
    out = np.empty(values.shape, dtype=give_back)
    call = Call("dask", "cpu", True, values.dtype.name, values.size, "counter", block=True)
    spec = _e8m0_spec(spec, call)
    with np.errstate(over="ignore", invalid="ignore"):
        for start in range(0, values.size, _SLICE):
            piece = slice(start, start + _SLICE)
            out[piece] = _run_namespace(values[piece], call._replace(size=values[piece].size), spec, None, stream,
                                        index[piece])
    return out.reshape(block.shape)


def round_jax(x: Any, spec: RoundingSpec, *, key: Any = None, seed: Optional[int] = None, offset: Any = 0) -> Any:
    """Round a JAX array by ``spec`` with explicit numbers, statelessly: traceable under ``jax.jit``.

    Parameters
    ----------
    x : jax.Array
    spec : RoundingSpec
        A spec the namespace kernel covers (chop's rules on the catalogue's signed formats,
        CPFloat's rules in a deterministic mode).
    key, seed, offset : optional
        The numbers of stochastic rounding and bit flips, as in :func:`pychop_compat.chop_jax`.

    Raises
    ------
    ValueError
        Random modes without ``key`` or ``seed``, both given, or a spec only the host covers.
    TypeError
        ``x`` is not a JAX array, or needs 64-bit types that are off.
    """
    jax = sys.modules.get("jax")
    if jax is None or not isinstance(x, jax.Array):
        raise TypeError(f"chop_jax needs a jax.Array, not {type(x).__name__}; use pychop_compat.chop for others.")
    if key is not None and seed is not None:
        raise ValueError("chop_jax: give key or seed, not both.")
    if seed is not None and (isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer))):
        raise TypeError(f"chop_jax: seed must be an integer, as Chop(rng=<int>)'s, got {seed!r}.")
    if isinstance(offset, (bool, np.bool_)) or not (isinstance(offset, (int, np.integer)) or (
            isinstance(offset, jax.Array) and jax.numpy.issubdtype(offset.dtype, jax.numpy.integer))):
        raise TypeError(f"chop_jax: offset must be an integer (a JAX integer array under jit), got {offset!r}.")
    work, give_back = jax_engine.working_array(x)
    widened = _e8m0_widens(spec) and str(work.dtype) == "float32"
    if spec.fmt.encoding == "e8m0":  # (after: E8M0 widened to float32's range needs no float64)
        spec = correct_spec(spec, str(work.dtype))
    if widened:
        if not jax_engine.x64_enabled():
            raise TypeError(_E8M0_JAX_FLOAT32)
        work = jax_engine.widen_float32(work)
    # correct rounding's random modes take each element's own numbers (key's or the counter's), as the
    # router's namespace route does for Chop(rng=<int>) on a JAX array (_element_kernel)
    correct_stochastic = spec.range_rules == "correct" and spec.stochastic and not spec.flips
    if not (elementwise_covers(spec) or cpfloat_covers(spec) or correct_stochastic) or (spec.flips and spec.extended):
        raise ValueError("chop_jax: this format or option is only supported by the NumPy engine "
                         "(pychop_compat.chop outside jit).")
    if not (jax_engine.x64_enabled() or spec.fmt.t <= 24 or cpfloat_covers(spec) or correct_stochastic):
        raise TypeError("chop_jax: a precision t > 24 needs 64-bit integers: "
                        "jax.config.update('jax_enable_x64', True).")
    numbers: tuple = (None, None, None)
    if spec.draws:
        if key is not None:
            numbers = jax_engine.key_numbers(key, work.shape, spec.stochastic, spec.flips)
        elif seed is not None:
            if not jax_engine.x64_enabled():
                raise TypeError("the counter-based generator on JAX arrays needs 64-bit integers: "
                                "jax.config.update('jax_enable_x64', True).")
            stream = device_counter.CounterStream(device_counter.stream_keys(device_counter.checked_seed(seed)),
                                                  offset)
            index = jax.numpy.arange(work.size, dtype=jax.numpy.int64).reshape(work.shape)
            numbers = _counter_numbers(jax.numpy, spec, stream, index)
        else:
            raise ValueError("stochastic rounding (round = 5, 6) and bit flips need key=<jax.random key> "
                             "or seed=<int> in chop_jax.")
    call = _jax_call(work, spec, given_sources(None))
    out = _run_jax(work, call._replace(numbers="key"), spec, None, numbers)
    if widened:
        out = jax_engine.narrow_to_float32(out)
    return out.astype(give_back) if give_back is not None else out


# --- explain ------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Explanation:
    """Which engine, kernel and random source a call uses, and why the kernels before it passed.

    Attributes
    ----------
    engine : str
        The adapter of the input's type (``'numpy'``, ``'torch'``, ``'cupy'``, ``'jax'``,
        ``'dask'``, ``'pandas'``, ``'xarray'``).
    kernel : str
        The kernel of :data:`REGISTRY` that rounds it (for a Dask array: each block).
    where : str
        The module that implements it.
    source : Source or None
        Where the random numbers come from (None: no random numbers).
    order : str or None
        How the numbers go to the elements (``'column-major'``: chop.m's order;
        ``'row-major index'``: each element its counter).
    passed_over : tuple of (str, str)
        Each kernel tried before, and why it passed.
    call : Call
        What the router knew of the call.
    """

    engine: str
    kernel: str
    where: str
    source: Optional[Source]
    order: Optional[str]
    passed_over: tuple
    call: Call

    def __str__(self) -> str:
        where = " in a block" if self.call.library == "dask" else ""  # (each block is routed)
        lines = [f"engine: {self.engine} ({self.call.dtype}, {self.call.size} element(s){where} on "
                 f"{self.call.device})",
                 f"kernel: {self.kernel} ({self.where})",
                 "random numbers: " + ("none (deterministic rounding)" if self.source is None
                                       else f"{self.source.value}, {self.order} order")]
        if self.passed_over:
            lines.append("passed over:")
            lines.extend(f"  {name}: {reason}" for name, reason in self.passed_over)
        return "\n".join(lines)


#: The sources of the numbers made per element, by :attr:`Call.numbers`.
_PER_ELEMENT = {"given": Source.GIVEN, "counter": Source.SEEDED_COUNTER, "device": Source.DEVICE_COUNTER}


def _source(call: Call, sources: RandomSources) -> tuple:
    if call.numbers == "none":
        return None, None
    if call.numbers in _PER_ELEMENT:
        return _PER_ELEMENT[call.numbers], "row-major index"
    if isinstance(sources.stochastic, CheckedRandfunc):
        return Source.RANDFUNC, "column-major"
    if sources.stochastic is stream_uniform or sources.flip_uniform is stream_uniform:
        return Source.MATLAB_STREAM, "column-major"
    return Source.GENERATOR, "column-major"


def explain(x: Any, spec: RoundingSpec, sources: RandomSources) -> Explanation:
    """How :func:`round_array` would round ``x`` (see :class:`Explanation`); nothing is drawn.

    A call that :func:`round_array` refuses raises its error here (see :func:`route`).  An
    empty array (NumPy's kinds, torch, CuPy, pandas, xarray) is copied without a kernel: its
    ``kernel`` is ``'none'``.  E8M0 rounded in float64 for float32 input says so in
    ``call.dtype``.
    """
    library = array_library(x)
    found = route(x, spec, sources)
    engine = "float" if type(x) is float else library
    if found.call.size == 0 and library not in ("jax", "dask"):  # (JAX runs its kernel; Dask routes each block)
        return Explanation(engine, "none", "round_array copies an empty array: nothing is rounded", None, None,
                           (), found.call)
    call = found.call
    if found.kernel.name == "host":  # (a copy rounded on the host draws as the host does)
        call = call._replace(numbers=_numbers(spec, sources, True, "numpy"))
    source, order = _source(call, sources)
    if found.call.numbers == "host" and sources.stochastic is not stream_uniform and spec.flips \
            and not spec.stochastic:
        source = _flip_source(sources)
    return Explanation(engine, found.kernel.name, found.kernel.where, source, order, found.passed_over, found.call)


def _flip_source(sources: RandomSources) -> Source:
    """The source of bit flips drawn call by call in chop.m's order (without stochastic rounding)."""
    if sources.flip_uniform is stream_uniform:
        return Source.MATLAB_STREAM
    # Chop(flip=1, randfunc=..., rng=<int>): the seeded counter's numbers, call by call (docs/randomness.rst)
    if isinstance(getattr(sources.flip_uniform, "__self__", None), CounterRng):
        return Source.SEEDED_COUNTER
    return Source.GENERATOR
