"""The CUDA kernel of the device engines: its source, its compilation and its launch.

One kernel, specialised per :class:`Variant`, does ``reference.chop_vector`` for one
element per thread; NVRTC compiles it with :data:`COMPILE_OPTIONS` (CuPy's own compilers
add ``-ftz=true``) and the PTX is cached in memory and on disk (:func:`cache_dir`).
See docs/engines.rst, "The CUDA kernel".
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np

from ..random.counter import CounterStream
from ..random.sources import RandomSources, host_draw_plan
from ..spec import FLIP_PRECISION_ERROR, RoundingSpec
from .device_plan import carrier_for, clamp_exponent, regular_range

__all__ = ["COMPILE_OPTIONS", "THREADS", "Variant", "variant_for", "kernel_source", "compile_options",
           "compile_ptx", "compile_cubin", "cache_dir", "cached_ptx", "chop_device_array"]

#: NVRTC options of every kernel: no flush-to-zero, IEEE division and square root, no
#: contraction of a multiply and an add into an fma (each product rounded once, as on the CPU).
COMPILE_OPTIONS = ("--ftz=false", "--prec-div=true", "--prec-sqrt=true", "--fmad=false")
#: Threads per block.
THREADS = 256
#: Bumped whenever the generated source's meaning changes without the text changing.
_CACHE_FORMAT = "pychop_compat-cuda-2"

_SOURCES = {"none": 0, "host": 1, "device": 2}


@dataclass(frozen=True)
class Variant:
    """What the kernel is specialised for at compile time: ``dtype`` (``'float32'``,
    ``'float64'``), chop's ``mode`` (1-6), ``limits`` (explim), ``keep_subnormals``, ``flips`` and
    ``random``: ``'none'``, ``'host'`` (per-element arrays) or ``'device'`` (the counter)."""

    dtype: str
    mode: int
    limits: bool
    keep_subnormals: bool
    flips: bool
    random: str

    def __post_init__(self):
        if self.dtype not in ("float32", "float64"):
            raise ValueError(f"dtype must be 'float32' or 'float64', not {self.dtype!r}.")
        if self.mode not in range(1, 7):
            raise ValueError(f"mode must be 1 to 6, not {self.mode!r}.")
        if self.random not in _SOURCES:
            raise ValueError(f"random must be one of {sorted(_SOURCES)}, not {self.random!r}.")


def variant_for(spec: RoundingSpec, dtype_name: str, random: str) -> Variant:
    """The :class:`Variant` for ``spec`` on a ``dtype_name`` array with numbers from ``random``."""
    return Variant(dtype_name, int(spec.round), bool(spec.limits_exponent), bool(spec.keeps_subnormals),
                   bool(spec.flips), random if spec.draws else "none")


_TYPES = {
    "float64": dict(REAL="double", BITS="long long", UBITS="unsigned long long", MANT="52", BIAS="1023",
                    FIELD="0x7FF", WIDTH="64", ABS_MASK="0x7FFFFFFFFFFFFFFFULL",
                    SIGN_MASK="0x8000000000000000ULL", TO_BITS="__double_as_longlong",
                    FROM_BITS="__longlong_as_double", CLZ="__clzll", FLOOR="floor", CEIL="ceil",
                    RINT="rint", TRUNC="trunc", FABS="fabs"),
    "float32": dict(REAL="float", BITS="int", UBITS="unsigned int", MANT="23", BIAS="127", FIELD="0xFF",
                    WIDTH="32", ABS_MASK="0x7FFFFFFFU", SIGN_MASK="0x80000000U", TO_BITS="__float_as_int",
                    FROM_BITS="__int_as_float", CLZ="__clz", FLOOR="floorf", CEIL="ceilf",
                    RINT="rintf", TRUNC="truncf", FABS="fabsf"),
}

_KERNEL = r"""
// 2^k for k in the normal range of REAL, from its bit pattern (exact).
__device__ __forceinline__ REAL pow2(int k) {
    return FROM_BITS(((BITS)(k + BIAS)) << MANT);
}

__device__ __forceinline__ bool is_finite(REAL v) {
    return (TO_BITS(v) & ABS_MASK) < ((UBITS)FIELD << MANT);
}

// e with |v| = 2^e * 1.f (exact for subnormals); -1 for 0, Inf and NaN, as NumPy's frexp.
__device__ __forceinline__ int exponent_of(REAL v) {
    const UBITS a = (UBITS)TO_BITS(v) & ABS_MASK;
    const int biased = (int)(a >> MANT);
    if (a == 0 || biased == FIELD) return -1;
    if (biased == 0) return (WIDTH - 1 - CLZ((BITS)a)) - (BIAS - 1 + MANT);
    return biased - BIAS;
}

// u(j) of device_random.py: SplitMix64's finaliser on key + j * G, an odd multiple of 2^-53.
__device__ __forceinline__ double counter_uniform(const unsigned long long key, const unsigned long long j) {
    unsigned long long z = key + j * 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return ((double)(z >> 12) + 0.5) * 2.220446049250313080847263336181640625e-16;
}

// chop.m's overflow rules (on the input v) and underflow rules (on c), compared in double.
__device__ __forceinline__ REAL range_limits(REAL c, const REAL v, const double xmax, const double xboundary,
                                             const double min_rep, const double min_rep_half) {
    const double xd = (double)v;
    const double inf = __longlong_as_double(0x7FF0000000000000LL);
#if MODE == 1 || MODE == 6
    if (xd >= xboundary) c = (REAL)inf;
    else if (xd <= -xboundary) c = (REAL)(-inf);
#elif MODE == 2
    if (xd > xmax) c = (REAL)inf;
    else if (xd < -xmax && xd != -inf) c = (REAL)(-xmax);
#elif MODE == 3
    if (xd > xmax && xd != inf) c = (REAL)xmax;
    else if (xd < -xmax) c = (REAL)(-inf);
#else
    if (xd > xmax && xd != inf) c = (REAL)xmax;
    else if (xd < -xmax && xd != -inf) c = (REAL)(-xmax);
#endif
    const double ac = fabs((double)c);
    if (ac < min_rep) {
#if MODE == 1
        if (KEEP_SUB ? ac > min_rep_half : ac >= min_rep_half) c = (REAL)(c < 0 ? -min_rep : min_rep);
        else c = (REAL)0;
#elif MODE == 2
        c = (REAL)(c > 0 ? min_rep : 0.0);
#elif MODE == 3
        c = (REAL)(c < 0 ? -min_rep : 0.0);
#else
        c = (REAL)0;
#endif
    }
    return c;
}

// The scaled value of v: y = v 2^s (an integer at the format's precision when rounded), with
// s = t - 1 - e, or t - 1 - emin in chop.m's subnormal block.
struct scaled_t { REAL y; int s1; int s2; bool sub; };

__device__ __forceinline__ scaled_t scale(const REAL v, const int t, const int emin, const int emins) {
    scaled_t r;
    const int e = exponent_of(v);
    r.sub = LIMITS && e < emin && e >= emins;
    // Two exact factors: 2^s alone overflows for s up to 1126.
    const int s = t - 1 - (r.sub ? emin : e);
    r.s1 = s >> 1;
    r.s2 = s - r.s1;
    r.y = (v * pow2(r.s1)) * pow2(r.s2);
    return r;
}

// flags[i] = (in the subnormal block) | 2 * (needs a stochastic draw): chop.m's blocks and draws.
extern "C" __global__ void chop_classify(const REAL* __restrict__ x, unsigned char* __restrict__ flags,
                                         const long long n, const int t, const int emin, const int emins) {
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const scaled_t sc = scale(x[i], t, emin, emins);
        const REAL mag = FABS(sc.y);
        const bool need = MODE >= 5 && !(mag - FLOOR(mag) == (REAL)0);  // NaN != 0: Inf and NaN draw too
        flags[i] = (unsigned char)((sc.sub ? 1 : 0) | (need ? 2 : 0));
    }
}

// out[i] = chop(x[i]).  Random numbers (RANDOM): 1: draws[i] and flip_bits[i]; 2: u_s(offset + i)
// of the keys (device_random.py).  Regular elements (magnitude bits in [low, high]) drop the
// low `shift` bits of their pattern; the others take the general path.
extern "C" __global__ void chop_kernel(
        const REAL* __restrict__ x, REAL* __restrict__ out,
        const double* __restrict__ draws, const long long* __restrict__ flip_bits,
        const long long n, const int t, const int emin, const int emins,
        const int shift, const long long low, const long long high,
        const int draws_normal, const int draws_sub, const double xmax, const double xboundary,
        const double min_rep, const double min_rep_half,
        const unsigned long long key_round, const unsigned long long key_choice,
        const unsigned long long key_bit, const unsigned long long offset, const double p) {
    const long long stride = (long long)blockDim.x * gridDim.x;
    const UBITS mask = shift ? (((UBITS)1 << shift) - 1) : (UBITS)0;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const REAL v = x[i];
#if !FLIPS
        {
            const UBITS b = (UBITS)TO_BITS(v);
            const UBITS a = b & ABS_MASK;
            if ((long long)a >= low && (long long)a <= high) {
                UBITS r = a;
#if MODE == 1
                // Ties to even: half an ulp, minus one unless the kept lsb is odd (t = 1: the
                // kept significand is the hidden bit, odd).
                if (shift) r = a + (mask >> 1) + ((shift == MANT) ? (UBITS)1 : ((a >> shift) & 1));
#elif MODE == 2
                if (!(b & SIGN_MASK)) r = a + mask;
#elif MODE == 3
                if (b & SIGN_MASK) r = a + mask;
#elif MODE >= 5
                const UBITS dropped = a & mask;
#if RANDOM == 2
                const double u = counter_uniform(key_round, offset + i);
#else
                const double u = draws[i];
#endif
                // The dropped bits as the scaled value's fraction (exact); compared in REAL, as
                // MATLAB does for single.
#if MODE == 5
                const bool up = dropped != 0 && (REAL)u <= (REAL)dropped * pow2(-shift);
#else
                const bool up = dropped != 0 && (REAL)u <= (REAL)0.5;
#endif
                if (up) r = a + mask + 1;
#endif
                out[i] = FROM_BITS((BITS)((r & ~mask) | (b & SIGN_MASK)));
                continue;
            }
        }
#endif
        const scaled_t sc = scale(v, t, emin, emins);
        const REAL y = sc.y;
        REAL r;
#if MODE == 1
        r = RINT(y);  // ties to even
#elif MODE == 2
        r = CEIL(y);
#elif MODE == 3
        r = FLOOR(y);
#elif MODE == 4
        r = TRUNC(y);
#else
        {
            const REAL mag = FABS(y);
            const REAL fl = FLOOR(mag);
            const bool need = !(mag - fl == (REAL)0);  // NaN != 0: Inf and NaN draw too
#if RANDOM == 2
            const double u = counter_uniform(key_round, offset + i);
            const bool drawn = true;
#else
            const double u = draws[i];
            const bool drawn = sc.sub ? draws_sub : draws_normal;  // chop.m copies a block without draws
#endif
            if (!drawn) r = y;
            else {
                REAL m = fl;
                if (need && (REAL)u <= (MODE == 5 ? mag - fl : (REAL)0.5)) m = CEIL(mag);
                r = y < 0 ? -m : m;
            }
        }
#endif
#if FLIPS
        {
#if RANDOM == 2
            long long bit = 0;
            if (counter_uniform(key_choice, offset + i) <= p)  // bit 1 + floor((t-1) u)
                bit = 1LL << (long long)floor((double)(t - 1) * counter_uniform(key_bit, offset + i));
#else
            const long long bit = flip_bits[i];
#endif
            if (bit != 0 && is_finite(r)) {
                const long long m = ((long long)FABS(r)) ^ bit;
                r = (REAL)(r < 0 ? -(double)m : (double)m);
            }
        }
#endif
        // The first factor keeps the value normal (exact); the second rounds once, as ldexp.
        REAL c = (r * pow2(-sc.s1)) * pow2(-sc.s2);
#if LIMITS
        c = range_limits(c, v, xmax, xboundary, min_rep, min_rep_half);
#endif
        out[i] = c;
    }
}
"""


def kernel_source(variant: Any) -> str:
    """The CUDA source of the kernel for ``variant`` (no CuPy needed); a dtype name gives round
    to nearest with limits and subnormals, no flips."""
    if isinstance(variant, str):
        variant = Variant(variant, 1, True, True, False, "none")
    defines = dict(_TYPES[variant.dtype], MODE=str(variant.mode), LIMITS=str(int(variant.limits)),
                   KEEP_SUB=str(int(variant.keep_subnormals)), FLIPS=str(int(variant.flips)),
                   RANDOM=str(_SOURCES[variant.random]))
    return "".join(f"#define {k} {v}\n" for k, v in defines.items()) + _KERNEL


# --- compilation: NVRTC directly, PTX cached in memory and on disk ----------------------------

def _cupy():
    import cupy

    return cupy


def compile_options(arch: str) -> tuple:
    """The exact NVRTC options for a device of compute capability ``arch`` (e.g. ``'90'``)."""
    return (*COMPILE_OPTIONS, f"-arch=compute_{arch}")


def compile_ptx(source: str, arch: str, nvrtc: Any = None) -> str:
    """PTX of ``source`` for compute capability ``arch`` (e.g. ``'90'``) from NVRTC with
    :func:`compile_options` only; ``nvrtc``: ``cupy.cuda.nvrtc`` (default) or a stand-in.

    Raises
    ------
    RuntimeError
        When NVRTC rejects the source (with its log).
    """
    ptx = _nvrtc_compile(source, compile_options(arch), "getPTX", nvrtc)
    if isinstance(ptx, bytes):
        ptx = ptx.decode()
    return ptx.rstrip("\x00")


def compile_cubin(source: str, arch: str, nvrtc: Any = None) -> bytes:
    """A CUBIN of ``source`` for ``sm_<arch>`` from NVRTC, with the options of :func:`compile_ptx`
    but ``-arch=sm_<arch>``: for a driver that does not accept NVRTC's PTX version."""
    options = (*COMPILE_OPTIONS, f"-arch=sm_{arch}")
    return bytes(_nvrtc_compile(source, options, "getCUBIN", nvrtc))


def _nvrtc_compile(source: str, options: tuple, getter: str, nvrtc=None):
    nvrtc = _cupy().cuda.nvrtc if nvrtc is None else nvrtc
    program = nvrtc.createProgram(source, "pychop_compat_chop.cu", (), ())
    try:
        try:
            nvrtc.compileProgram(program, options)
        except Exception as exc:
            raise RuntimeError(f"NVRTC could not compile chop's kernel:\n{nvrtc.getProgramLog(program)}") from exc
        return getattr(nvrtc, getter)(program)
    finally:
        nvrtc.destroyProgram(program)


def nvrtc_version(nvrtc=None) -> str:
    """NVRTC's version as ``'major.minor'``."""
    nvrtc = _cupy().cuda.nvrtc if nvrtc is None else nvrtc
    return ".".join(str(v) for v in nvrtc.getVersion())


def device_arch(compute_capability: str, nvrtc=None) -> str:
    """The architecture to compile for: the device's, or the newest NVRTC knows below it."""
    nvrtc = _cupy().cuda.nvrtc if nvrtc is None else nvrtc
    wanted = int(compute_capability)
    try:
        supported = [int(a) for a in nvrtc.getSupportedArchs()]
    except Exception:  # an NVRTC before 11.2: trust the device
        return str(wanted)
    below = [a for a in supported if a <= wanted]
    return str(max(below)) if below else str(wanted)


def cache_dir() -> Path:
    """The folder of compiled kernels: ``$PYCHOP_COMPAT_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/pychop_compat/cuda``, else ``~/.cache/pychop_compat/cuda``."""
    explicit = os.environ.get("PYCHOP_COMPAT_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pychop_compat" / "cuda"


def _cache_key(source: str, arch: str, version: str) -> str:
    text = "\0".join((_CACHE_FORMAT, source, *compile_options(arch), arch, version))
    return hashlib.sha256(text.encode()).hexdigest()


def _framed(key: str, ptx: str) -> str:
    digest = hashlib.sha256(ptx.encode()).hexdigest()
    return f"// pychop_compat key={key} sha256={digest}\n{ptx}\n// pychop_compat end\n"


def _unframed(key: str, text: str) -> Optional[str]:
    """The PTX in a cache file's text, or None if the file is not a whole one for ``key``."""
    head, _, rest = text.partition("\n")
    prefix = f"// pychop_compat key={key} sha256="
    if not head.startswith(prefix) or not rest.endswith("\n// pychop_compat end\n"):
        return None
    ptx = rest[: -len("\n// pychop_compat end\n")]
    return ptx if hashlib.sha256(ptx.encode()).hexdigest() == head[len(prefix):] else None


_private_dir: Optional[Path] = None
_lock = threading.Lock()


def _private_folder() -> Path:
    """A temporary folder of this process, for kernels that the cache cannot hold."""
    global _private_dir
    with _lock:
        if _private_dir is None:
            _private_dir = Path(tempfile.mkdtemp(prefix="pychop_compat-cuda-"))
    return _private_dir


def _write(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically; where that fails, to a private temporary folder."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".ptx")
        with os.fdopen(handle, "w") as stream:
            stream.write(text)
        os.replace(temporary, path)
        return path
    except OSError:
        fallback = _private_folder() / path.name
        fallback.write_text(text)
        return fallback


def cached_ptx(source: str, arch: str, nvrtc: Any = None) -> Path:
    """The path of a file holding the PTX of ``source`` for ``arch``: from the disk cache, else
    compiled now (in a private temporary folder when the cache cannot be written)."""
    nvrtc = _cupy().cuda.nvrtc if nvrtc is None else nvrtc
    key = _cache_key(source, arch, nvrtc_version(nvrtc))
    path = cache_dir() / f"chop-{key[:40]}.ptx"
    try:
        if _unframed(key, path.read_text()) is not None:
            return path
    except (OSError, UnicodeDecodeError):
        pass
    return _write(path, _framed(key, compile_ptx(source, arch, nvrtc)))


_kernel_cache: dict = {}


def _kernels(variant: Variant, device_id: int):
    """``(chop_kernel, chop_classify)`` of ``variant`` on device ``device_id``, loaded from PTX."""
    key = (variant, device_id)
    kernels = _kernel_cache.get(key)
    if kernels is None:
        cupy = _cupy()
        source = kernel_source(variant)
        with cupy.cuda.Device(device_id) as device:
            arch = device_arch(device.compute_capability)
            path = cached_ptx(source, arch)
            try:
                module = cupy.RawModule(path=str(path))  # loads the PTX: no compiler, no -ftz=true
                kernels = (module.get_function("chop_kernel"), module.get_function("chop_classify"))
            except Exception as exc:  # e.g. a driver older than NVRTC's PTX: NVRTC's own CUBIN
                cubin = _private_folder() / f"{path.stem}-sm_{arch}.cubin"
                cubin.write_bytes(compile_cubin(source, arch))
                try:
                    module = cupy.RawModule(path=str(cubin))
                    kernels = (module.get_function("chop_kernel"), module.get_function("chop_classify"))
                except Exception as second:
                    raise second from exc
        _kernel_cache[key] = kernels
    return kernels


# --- launch -------------------------------------------------------------------------------------

def _blocks(n: int) -> int:
    return max(1, min((n + THREADS - 1) // THREADS, 1 << 20))


@functools.lru_cache(maxsize=256)
def _format_arguments(spec: RoundingSpec, dtype_name: str) -> tuple:
    """The kernel's arguments from the spec: ``(t, emin, emins, shift, low, high)`` and
    ``(xmax, xboundary, min_rep, min_rep/2, p)``, typed as the kernel reads them."""
    fmt = spec.fmt
    regular = regular_range(spec, carrier_for(dtype_name))
    min_rep = np.float64(fmt.xmins if spec.keeps_subnormals else fmt.xmin)
    integers = (np.int32(fmt.t), np.int32(clamp_exponent(fmt.emin)), np.int32(clamp_exponent(fmt.emins)),
                np.int32(regular.shift), np.int64(regular.low), np.int64(regular.high))
    reals = (np.float64(fmt.xmax), np.float64(fmt.xboundary), min_rep, np.float64(min_rep / 2), np.float64(spec.p))
    return integers, reals


_placeholders: dict = {}


def _placeholder(cupy, device_id: int, dtype):
    """A one-element device array for a pointer argument the variant never reads (made once)."""
    key = (device_id, np.dtype(dtype).name, id(cupy))
    array = _placeholders.get(key)
    if array is None:
        array = _placeholders[key] = cupy.zeros(1, dtype=dtype)
    return array


def _launch(vector, spec: RoundingSpec, variant: Variant, device_id: int, draws=None, flip_bits=None,
            draws_normal=True, draws_sub=True, stream: Optional[CounterStream] = None):
    """Run the kernel on the contiguous 1-D float32/float64 ``vector``: a new vector."""
    cupy = _cupy()
    n = vector.size
    (t, emin, emins, shift, low, high), (xmax, xboundary, min_rep, half, p) = _format_arguments(spec, variant.dtype)
    out = cupy.empty_like(vector)
    keys, offset = (stream.keys, stream.offset) if stream is not None else ((0, 0, 0), 0)
    if draws is None:
        draws = _placeholder(cupy, device_id, np.float64)
    if flip_bits is None:
        flip_bits = _placeholder(cupy, device_id, np.int64)
    _kernels(variant, device_id)[0](
        (_blocks(n),), (THREADS,),
        (vector, out, draws, flip_bits, np.int64(n), t, emin, emins, shift, low, high,
         np.int32(draws_normal), np.int32(draws_sub), xmax, xboundary, min_rep, half,
         *(np.uint64(k) for k in keys), np.uint64(offset), p))
    return out


def _host_draws(vector, spec: RoundingSpec, variant: Variant, device_id: int, sources: RandomSources):
    """Per-element ``(draws, flip_bits, draws_normal, draws_sub)`` from the host, in chop.m's
    order, for the column-major ``vector`` (blocks and needs from ``chop_classify``)."""
    cupy = _cupy()
    n = vector.size
    flags = cupy.empty(n, dtype=np.uint8)  # 1: in the subnormal block | 2: needs a draw
    (t, emin, emins, *_), _ = _format_arguments(spec, variant.dtype)
    _kernels(variant, device_id)[1]((_blocks(n),), (THREADS,), (vector, flags, np.int64(n), t, emin, emins))
    sub = (flags & 1).astype(bool)
    need = (flags & 2).astype(bool)
    normal = ~sub
    n_sub = int(sub.sum())
    counts = (int((need & normal).sum()), int((need & sub).sum())) if spec.stochastic else (0, 0)
    plan = host_draw_plan(spec, sources, (n - n_sub, n_sub), counts)

    def scatter(values, masks, dtype):
        out = cupy.zeros(n, dtype=dtype)
        for block_values, mask in zip(values, masks):
            if block_values is not None and block_values.size:
                out[mask] = cupy.asarray(block_values)  # boolean-mask assignment keeps the order
        return out

    draws = flip_bits = None
    if spec.stochastic:
        draws = scatter([p[0] for p in plan], (need & normal, need & sub), np.float64)
    if spec.flips:
        flip_bits = scatter([p[1] for p in plan], (normal, sub), np.int64)
    return draws, flip_bits, counts[0] > 0, counts[1] > 0


def chop_device_array(x: Any, spec: RoundingSpec, sources: RandomSources, stream: Optional[CounterStream] = None) -> Any:
    """chop on a non-empty float32/float64 cupy array (any shape): a new C-contiguous array.
    ``stream``: the call's counter numbers (computed in the kernel, row-major) instead of the
    host ``sources``."""
    cupy = _cupy()
    device_id = x.device.id
    with x.device:
        if (spec.round <= 4 and not spec.flips) or stream is not None:
            if stream is not None and spec.flips and spec.fmt.t < 2:
                raise ValueError(FLIP_PRECISION_ERROR)
            variant = variant_for(spec, x.dtype.name, "device")
            # Order does not matter: one pass over memory.
            flat = cupy.ascontiguousarray(x).ravel()
            return _launch(flat, spec, variant, device_id, stream=stream).reshape(x.shape)
        variant = variant_for(spec, x.dtype.name, "host")
        vector = cupy.ascontiguousarray(x.ravel(order="F"))  # MATLAB's element order
        draws, flip_bits, draws_normal, draws_sub = _host_draws(vector, spec, variant, device_id, sources)
        out = _launch(vector, spec, variant, device_id, draws, flip_bits, draws_normal, draws_sub)
        # Not ascontiguousarray: it makes a 0-d array 1-d (NumPy's and CuPy's rule).
        result = out.reshape(x.shape, order="F")
        return result if result.flags.c_contiguous else result.copy(order="C")
