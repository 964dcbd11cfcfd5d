"""The CuPy engine: chop.m's rounding on ``cupy.ndarray``, one fused CUDA kernel per call.

The kernel, its compilation (NVRTC without flush-to-zero) and its launch live
in :mod:`pychop_compat.kernels.cuda`; what a device engine derives from a spec
(the random-number policy, the host draws in chop.m's order) in
:mod:`pychop_compat.kernels.device_plan`.  This module maps cupy dtypes onto
the kernel's float32/float64 and picks where random numbers come from:

* without ``randfunc`` (and outside :func:`matlab_stream_on_device`), each
  element's numbers are computed in the kernel from the counter-based
  generator of :mod:`pychop_compat.random.counter` (seeded by
  :func:`seed_device`): one pass over memory, the same numbers as torch's
  engine computes for a tensor;
* otherwise the host draws them in chop.m's order and the kernel gets them
  as per-element arrays.

For a spec beyond chop.m's semantics (``spec.extended``): chop's rules on an
OCP/ML format in a deterministic mode, or in stochastic rounding with numbers
made on the device, run as elementwise CuPy operations on the device
(:func:`.elementwise.chop_elementwise`, the format's encoding included), and
CPFloat's rules as integer CuPy operations on the bit patterns
(:func:`.elementwise_cpfloat.round_cpfloat_elementwise`; in its stochastic
modes with numbers drawn by the host);
the rest make a round trip through the NumPy engine on the host
(slow; see docs/engines.rst).
CuPy is imported lazily.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..spec import RoundingSpec
from ..random.sources import RandomSources
from ..random import counter as device_counter
from ..kernels.cuda import chop_device_array, kernel_source
from ..kernels.device_plan import elementwise_covers
from ..random.sources import draws_on_device, matlab_stream_on_device
from ..spec import FLIP_PRECISION_ERROR
from ..kernels.elementwise import Namespace, chop_elementwise
from ..kernels.xp import namespace_of
from ..random.counter import uniform
from ..kernels.elementwise_cpfloat import cpfloat_covers, cpfloat_inexact, host_numbers, round_cpfloat_elementwise
from ..random.counter import seed_device

__all__ = ["chop_cupy", "chop_device_array", "seed_device", "matlab_stream_on_device", "kernel_source"]


def _cupy():
    import cupy

    return cupy


def _namespace(cupy) -> Namespace:
    """CuPy as the array library of :func:`.elementwise.chop_elementwise`."""
    return Namespace(cupy, lambda a, dtype: a.view(dtype))


def chop_cupy(x: Any, spec: RoundingSpec, sources: RandomSources) -> Any:
    """Round the cupy array ``x`` by ``spec``, like :func:`pychop_compat.chop`.

    Parameters
    ----------
    x : cupy.ndarray
        float64 and float32 are rounded in their own precision, float16 in
        float32 and cast back, integers and bool as float64.  Any shape.
    spec : RoundingSpec
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
        out = _chop_extended(work, spec, sources)
    else:
        with work.device:
            out = chop_device_array(work, spec, sources, _device_stream(work, spec, sources))
    return out.astype(give_back) if give_back is not None else out


def _device_stream(work: Any, spec: RoundingSpec, sources: RandomSources) -> Any:
    """The counter numbers of the random modes: ``Chop(rng=<int>)``'s counter (every engine),
    or the device generator where chop's numbers are drawn on the device
    (:func:`.device_plan.draws_on_device`); None otherwise (deterministic modes, host sources)."""
    if not spec.draws:
        return None
    counter = getattr(sources, "counter", None)
    if counter is not None:
        if spec.flips and spec.fmt.t < 2:
            raise ValueError(FLIP_PRECISION_ERROR)
        return counter.take(work.size)
    if draws_on_device(sources):
        return device_counter.take(f"cuda:{work.device.id}", work.size)
    return None


def _chop_extended(work: Any, spec: RoundingSpec, sources: RandomSources) -> Any:
    """A spec beyond chop.m's semantics on the float32/float64 array ``work``.

    On the device, as elementwise CuPy operations (float operations touch only normal numbers,
    so CuPy's flush-to-zero compilation cannot change a result): chop's rules on an OCP/ML
    format with its encoding applied to the bit patterns, in the deterministic modes and in
    stochastic rounding with numbers made on the device (element ``i`` in row-major order gets
    counter ``offset + i``, as in the kernel); CPFloat's rules in its deterministic modes
    (integer operations only), and in its stochastic modes with numbers drawn by the host for the
    inexact elements in column-major order (as the NumPy engine draws them).  The rest (chop's
    numbers from the host in chop.m's order, bit flips, limited random bits under chop's rules,
    E8M0 under chop's rules): the NumPy engine on the host, and back.
    """
    cupy = _cupy()
    namespace = _namespace(cupy)
    with work.device:
        if elementwise_covers(spec) and spec.round <= 4:
            return cupy.ascontiguousarray(chop_elementwise(namespace, work, spec))
        if cpfloat_covers(spec):
            return cupy.ascontiguousarray(round_cpfloat_elementwise(namespace, work, spec))
        xp = namespace.xp
        if cpfloat_covers(spec, stochastic=True):  # numbers from the host in column-major order
            order = xp.flatnonzero(cpfloat_inexact(namespace, work, spec).ravel(order="F"))
            u = xp.full(work.size, 2.0, dtype=xp.float64)
            if order.size:
                u[order] = xp.asarray(host_numbers(sources, spec, int(order.size)))
            u = u.reshape(work.shape, order="F")
            return cupy.ascontiguousarray(round_cpfloat_elementwise(namespace, work, spec, u))
        stream = _device_stream(work, spec, sources) if elementwise_covers(spec) else None
        if stream is not None:
            index = xp.arange(work.size, dtype=xp.int64).reshape(work.shape)
            u_round = uniform(namespace_of(work).xp, stream.keys[0], stream.offset, index)
            return cupy.ascontiguousarray(chop_elementwise(namespace, work, spec, u_round))
        from .numpy_engine import chop_array

        return cupy.asarray(np.array(chop_array(cupy.asnumpy(work), spec, sources), order="C"))
