"""The CuPy engine: chop.m's rounding on ``cupy.ndarray``, one fused CUDA kernel per dtype.

The kernel does the whole of ``reference.chop_vector`` for one element per
thread: exponent, scaling by two exact power-of-two factors, the six rounding
modes, the bit flip, the scaling back and the range limits.  Every decision
that chop.m makes on a block (which random number an element gets) is made
beforehand and handed to the kernel as per-element arrays:

* ``draws[i]``: the uniform number for stochastic rounding of element ``i``;
* ``flip_bits[i]``: ``2**(bit-1)`` for an element whose bit is flipped, else 0.

With MATLAB's stream (or ``randfunc``) the kernel first runs in a
classification phase that marks each element's block and whether it needs a
draw; the counts go to the host, the host draws in chop.m's order
(:func:`~pychop_compat.engines.torch_engine.host_draw_plan`) and the numbers
are scattered to their elements in column-major order.  Without ``randfunc``
the kernel computes each element's numbers itself from the counter-based
generator of :mod:`pychop_compat.engines.device_random` (seeded by
:func:`seed_device`): one pass over memory, and the same numbers as torch's
engine computes for a tensor.

The kernel is compiled without flush-to-zero and with IEEE division and
without contracting multiply-adds, so that subnormals survive and every
product is rounded once, as on the CPU.  CuPy is imported lazily.
"""

from __future__ import annotations

import functools
from typing import Optional

import numpy as np

from ..options import ChopSpec
from ..randomness import RandomSources
from . import device_random
from .device_random import CounterStream, seed_device
from .torch_engine import (_FLIP_PRECISION_ERROR, _clamp_exponent, draws_on_device, host_draw_plan,
                           matlab_stream_on_device)

__all__ = ["chop_cupy", "chop_device_array", "seed_device", "matlab_stream_on_device"]

_COMPILE_OPTIONS = ("--ftz=false", "--prec-div=true", "--prec-sqrt=true", "--fmad=false")
_THREADS = 256

_TYPES = {
    "float64": dict(REAL="double", BITS="long long", MANT="52", BIAS="1023", FIELD="0x7FF",
                    WIDTH="64", ABS_MASK="0x7FFFFFFFFFFFFFFFLL", TO_BITS="__double_as_longlong",
                    FROM_BITS="__longlong_as_double", CLZ="__clzll", FLOOR="floor", CEIL="ceil",
                    RINT="rint", TRUNC="trunc", FABS="fabs"),
    "float32": dict(REAL="float", BITS="int", MANT="23", BIAS="127", FIELD="0xFF",
                    WIDTH="32", ABS_MASK="0x7FFFFFFF", TO_BITS="__float_as_int",
                    FROM_BITS="__int_as_float", CLZ="__clz", FLOOR="floorf", CEIL="ceilf",
                    RINT="rintf", TRUNC="truncf", FABS="fabsf"),
}

_KERNEL = r"""
// 2^k for k in the normal range of REAL, from its bit pattern (exact).
__device__ __forceinline__ REAL pow2(int k) {
    return FROM_BITS(((BITS)(k + BIAS)) << MANT);
}

__device__ __forceinline__ bool is_finite(REAL v) {
    return (TO_BITS(v) & ABS_MASK) < ((BITS)FIELD << MANT);
}

// e with |v| = 2^e * 1.f (exact for subnormals); -1 for 0, Inf and NaN, as NumPy's frexp.
__device__ __forceinline__ int exponent_of(REAL v) {
    const BITS a = TO_BITS(v) & ABS_MASK;
    const int biased = (int)(a >> MANT);
    if (a == 0 || biased == FIELD) return -1;
    if (biased == 0) return (WIDTH - 1 - CLZ(a)) - (BIAS - 1 + MANT);
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
__device__ REAL range_limits(REAL c, const REAL v, const int mode, const int keep_sub,
                             const double xmax, const double xboundary,
                             const double min_rep, const double min_rep_half) {
    const double xd = (double)v;
    const double inf = __longlong_as_double(0x7FF0000000000000LL);
    if (mode == 1 || mode == 6) {
        if (xd >= xboundary) c = (REAL)inf;
        else if (xd <= -xboundary) c = (REAL)(-inf);
    } else if (mode == 2) {
        if (xd > xmax) c = (REAL)inf;
        else if (xd < -xmax && xd != -inf) c = (REAL)(-xmax);
    } else if (mode == 3) {
        if (xd > xmax && xd != inf) c = (REAL)xmax;
        else if (xd < -xmax) c = (REAL)(-inf);
    } else {
        if (xd > xmax && xd != inf) c = (REAL)xmax;
        else if (xd < -xmax && xd != -inf) c = (REAL)(-xmax);
    }
    const double ac = fabs((double)c);
    if (ac < min_rep) {
        if (mode == 1 && (keep_sub ? ac > min_rep_half : ac >= min_rep_half))
            c = (REAL)(c < 0 ? -min_rep : min_rep);
        else if (mode == 2 && c > 0) c = (REAL)min_rep;
        else if (mode == 3 && c < 0) c = (REAL)(-min_rep);
        else c = (REAL)0;
    }
    return c;
}

// phase 0: flags[i] = (in the subnormal block) | 2 * (needs a stochastic draw).
// phase 1: out[i] = chop(x[i]) with draws[i] and flip_bits[i] (see cupy_engine.py), or
// with counted = 1 the numbers u_s(offset + i) of the keys (device_random.py).
extern "C" __global__ void chop_kernel(
        const REAL* __restrict__ x, REAL* __restrict__ out, unsigned char* __restrict__ flags,
        const double* __restrict__ draws, const long long* __restrict__ flip_bits,
        const long long n, const int phase, const int t, const int emin, const int emins,
        const int mode, const int limits, const int keep_sub, const int use_flips,
        const int draws_normal, const int draws_sub, const double xmax, const double xboundary,
        const double min_rep, const double min_rep_half, const int counted,
        const unsigned long long key_round, const unsigned long long key_choice,
        const unsigned long long key_bit, const unsigned long long offset, const double p) {
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const REAL v = x[i];
        const int e = exponent_of(v);
        const bool sub = limits && e < emin && e >= emins;
        // Scale to integers with two exact factors (2^s alone overflows for s up to 1126).
        const int s = t - 1 - (sub ? emin : e);
        const int s1 = s >> 1;
        const int s2 = s - s1;
        const REAL y = (v * pow2(s1)) * pow2(s2);
        const REAL mag = FABS(y);
        const REAL fl = FLOOR(mag);
        const REAL frac = mag - fl;
        const bool need = mode >= 5 && !(frac == (REAL)0);  // NaN != 0: Inf and NaN draw too
        if (phase == 0) {
            flags[i] = (unsigned char)((sub ? 1 : 0) | (need ? 2 : 0));
            continue;
        }
        REAL r;
        if (mode == 1) r = RINT(y);  // ties to even
        else if (mode == 2) r = CEIL(y);
        else if (mode == 3) r = FLOOR(y);
        else if (mode == 4) r = TRUNC(y);
        else if (!(sub ? draws_sub : draws_normal)) r = y;  // chop.m copies a block without draws
        else {
            REAL m = fl;
            // Compared in the input's class, as MATLAB does for single.
            const double u = counted ? counter_uniform(key_round, offset + i) : draws[i];
            if (need && (REAL)u <= (mode == 5 ? frac : (REAL)0.5)) m = CEIL(mag);
            r = y < 0 ? -m : m;
        }
        if (use_flips) {
            long long bit = 0;
            if (!counted) bit = flip_bits[i];
            else if (counter_uniform(key_choice, offset + i) <= p)  // bit 1 + floor((t-1) u)
                bit = 1LL << (long long)floor((double)(t - 1) * counter_uniform(key_bit, offset + i));
            if (bit != 0 && is_finite(r)) {
                const long long m = ((long long)FABS(r)) ^ bit;
                r = (REAL)(r < 0 ? -(double)m : (double)m);
            }
        }
        // The first factor keeps the value normal (exact); the second rounds once, as ldexp.
        REAL c = (r * pow2(-s1)) * pow2(-s2);
        if (limits) c = range_limits(c, v, mode, keep_sub, xmax, xboundary, min_rep, min_rep_half);
        out[i] = c;
    }
}
"""


def _cupy():
    import cupy

    return cupy


def kernel_source(dtype_name: str) -> str:
    """The CUDA source of the kernel for ``'float32'`` or ``'float64'`` (no CuPy needed)."""
    defines = "".join(f"#define {k} {v}\n" for k, v in _TYPES[dtype_name].items())
    return defines + _KERNEL


@functools.lru_cache(maxsize=None)
def _kernel(dtype_name: str):
    return _cupy().RawKernel(kernel_source(dtype_name), "chop_kernel", options=_COMPILE_OPTIONS)


# --- orchestration ---------------------------------------------------------------------------

def _launch(vector, spec: ChopSpec, phase: int, draws=None, flip_bits=None,
            draws_normal=True, draws_sub=True, stream: Optional[CounterStream] = None):
    """Run the kernel on the contiguous 1-D float32/float64 ``vector``.

    Random numbers come from ``draws``/``flip_bits`` or, given ``stream``, are
    computed in the kernel.
    """
    cupy = _cupy()
    n = vector.size
    fmt = spec.fmt
    min_rep = np.float64(fmt.xmins if spec.keeps_subnormals else fmt.xmin)
    out = cupy.empty_like(vector) if phase == 1 else cupy.empty(1, dtype=vector.dtype)
    flags = cupy.empty(n, dtype=np.uint8) if phase == 0 else cupy.empty(1, dtype=np.uint8)
    use_flips = flip_bits is not None or (stream is not None and spec.flips)
    keys, offset = (stream.keys, stream.offset) if stream is not None else ((0, 0, 0), 0)
    if draws is None:
        draws = cupy.zeros(1, dtype=np.float64)  # unread: the kernel needs a pointer
    if flip_bits is None:
        flip_bits = cupy.zeros(1, dtype=np.int64)
    blocks = min((n + _THREADS - 1) // _THREADS, 1 << 20)
    _kernel(vector.dtype.name)(
        (blocks,), (_THREADS,),
        (vector, out, flags, draws, flip_bits, np.int64(n), np.int32(phase),
         np.int32(fmt.t), np.int32(_clamp_exponent(fmt.emin)), np.int32(_clamp_exponent(fmt.emins)),
         np.int32(spec.round), np.int32(spec.limits_exponent), np.int32(spec.keeps_subnormals),
         np.int32(use_flips), np.int32(draws_normal), np.int32(draws_sub),
         np.float64(fmt.xmax), np.float64(fmt.xboundary), min_rep, np.float64(min_rep / 2),
         np.int32(stream is not None), *(np.uint64(k) for k in keys), np.uint64(offset), np.float64(spec.p)))
    return flags if phase == 0 else out


def _host_draws(vector, spec: ChopSpec, sources: RandomSources):
    """Per-element ``(draws, flip_bits, draws_normal, draws_sub)`` from the host, in chop.m's order.

    ``vector`` is in column-major order; the kernel's phase 0 tells each
    element's block and whether it needs a stochastic draw.
    """
    cupy = _cupy()
    n = vector.size
    flags = _launch(vector, spec, phase=0)
    sub = (flags & 1).astype(bool)
    need = (flags & 2).astype(bool)
    normal = ~sub
    n_sub = int(sub.sum())
    counts = (int((need & normal).sum()), int((need & sub).sum())) if spec.round >= 5 else (0, 0)
    plan = host_draw_plan(spec, sources, (n - n_sub, n_sub), counts)

    def scatter(values, masks, dtype):
        out = cupy.zeros(n, dtype=dtype)
        for block_values, mask in zip(values, masks):
            if block_values is not None and block_values.size:
                out[mask] = cupy.asarray(block_values)  # boolean-mask assignment keeps the order
        return out

    draws = flip_bits = None
    if spec.round >= 5:
        draws = scatter([p[0] for p in plan], (need & normal, need & sub), np.float64)
    if spec.flips:
        flip_bits = scatter([p[1] for p in plan], (normal, sub), np.int64)
    return draws, flip_bits, counts[0] > 0, counts[1] > 0


def chop_device_array(x, spec: ChopSpec, sources: RandomSources, stream: Optional[CounterStream] = None):
    """chop on a non-empty float32/float64 cupy array: a new C-contiguous array of its shape.

    Parameters
    ----------
    x : cupy.ndarray
    spec : ChopSpec
    sources : RandomSources
        Host sources, used when ``stream`` is None.
    stream : CounterStream, optional
        The call's numbers from :mod:`~pychop_compat.engines.device_random`,
        computed in the kernel for each element in row-major order, instead
        of ``sources``.
    """
    cupy = _cupy()
    with x.device:
        if (spec.round <= 4 and not spec.flips) or stream is not None:
            if stream is not None and spec.flips and spec.fmt.t < 2:
                raise ValueError(_FLIP_PRECISION_ERROR)
            # Order does not matter: one pass over memory.
            flat = cupy.ascontiguousarray(x).ravel()
            return _launch(flat, spec, 1, stream=stream).reshape(x.shape)
        vector = cupy.ascontiguousarray(x.ravel(order="F"))  # MATLAB's element order
        draws, flip_bits, draws_normal, draws_sub = _host_draws(vector, spec, sources)
        out = _launch(vector, spec, 1, draws, flip_bits, draws_normal, draws_sub)
        return cupy.ascontiguousarray(out.reshape(x.shape, order="F"))


def chop_cupy(x, spec: ChopSpec, sources: RandomSources):
    """Round the cupy array ``x`` by ``spec``, like :func:`pychop_compat.chop`.

    Parameters
    ----------
    x : cupy.ndarray
        float64 and float32 are rounded in their own precision, float16 in
        float32 and cast back, integers and bool as float64.  Any shape.
    spec : ChopSpec
    sources : RandomSources
        Used when ``randfunc`` is given (or by :func:`matlab_stream_on_device`);
        otherwise random numbers come from the device (see :func:`seed_device`).

    Returns
    -------
    cupy.ndarray
        A new C-contiguous array with the shape, device and dtype of ``x``
        (float64 for integer and bool input).  ``x`` is not modified.
    """
    if x.dtype.kind == "c":
        raise ValueError("Chop requires a real input array.")
    give_back = None
    if x.dtype in (np.float64, np.float32):
        work = x
    elif x.dtype == np.float16:
        work, give_back = x.astype(np.float32), x.dtype  # no MATLAB class is half
    elif x.dtype.kind in "biu":
        work = x.astype(np.float64)
    else:
        raise TypeError(f"chop supports float64, float32 and float16 arrays (and integers), not {x.dtype}.")
    if work.size == 0:
        out = work.copy()
    elif getattr(spec, "extended", False):
        # Specs beyond chop.m: the NumPy engine through the host (slow; no device kernel yet).
        from .numpy_engine import chop_array

        import cupy

        with work.device:
            out = cupy.asarray(np.ascontiguousarray(chop_array(cupy.asnumpy(work), spec, sources)))
    else:
        with work.device:
            stream = None
            if (spec.round >= 5 or spec.flips) and draws_on_device(spec, sources):
                stream = device_random.take(f"cuda:{work.device.id}", work.size)
            out = chop_device_array(work, spec, sources, stream)
    return out.astype(give_back) if give_back is not None else out
