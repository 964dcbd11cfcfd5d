"""The CuPy engine: chop.m's rounding on ``cupy.ndarray``, one fused CUDA kernel per call.

The kernel, its compilation (NVRTC without flush-to-zero) and its launch live
in :mod:`pychop_compat.engines.cuda`; what a device engine derives from a spec
(the random-number policy, the host draws in chop.m's order) in
:mod:`pychop_compat.engines.device_plan`.  This module maps cupy dtypes onto
the kernel's float32/float64 and picks where random numbers come from:

* without ``randfunc`` (and outside :func:`matlab_stream_on_device`), each
  element's numbers are computed in the kernel from the counter-based
  generator of :mod:`pychop_compat.engines.device_random` (seeded by
  :func:`seed_device`): one pass over memory, the same numbers as torch's
  engine computes for a tensor;
* otherwise the host draws them in chop.m's order and the kernel gets them
  as per-element arrays.

For a spec beyond chop.m's semantics (``spec.extended``): chop's rules on an
OCP/ML format in a deterministic mode run as elementwise CuPy operations on
the device (:func:`.elementwise.chop_elementwise`, the format's encoding
included), and CPFloat's rules in its deterministic modes as integer CuPy
operations on the bit patterns (:func:`.elementwise_cpfloat.round_cpfloat_elementwise`);
the rest make a round trip through the NumPy engine on the host
(slow; see docs/engines.rst).
CuPy is imported lazily.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..options import ChopSpec
from ..randomness import RandomSources
from . import device_random
from .cuda import chop_device_array, kernel_source
from .device_plan import FLIP_PRECISION_ERROR, draws_on_device, elementwise_covers, matlab_stream_on_device
from .elementwise import Namespace, chop_elementwise
from .elementwise_cpfloat import cpfloat_covers, round_cpfloat_elementwise
from .device_random import seed_device

__all__ = ["chop_cupy", "chop_device_array", "seed_device", "matlab_stream_on_device", "kernel_source"]


def _cupy():
    import cupy

    return cupy


def _namespace(cupy) -> Namespace:
    """CuPy as the array library of :func:`.elementwise.chop_elementwise`."""
    return Namespace(cupy, lambda a, dtype: a.view(dtype))


def chop_cupy(x: Any, spec: ChopSpec, sources: RandomSources) -> Any:
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
    elif getattr(spec, "extended", False) and spec.round <= 4 and elementwise_covers(spec):
        # chop's rules on an OCP/ML format: elementwise CuPy operations on the device, the
        # format's encoding applied to the bit patterns (float operations touch only normal
        # numbers, so CuPy's flush-to-zero compilation cannot change a result).
        cupy = _cupy()
        with work.device:
            out = cupy.ascontiguousarray(chop_elementwise(_namespace(cupy), work, spec))
    elif getattr(spec, "extended", False) and cpfloat_covers(spec):
        # CPFloat's rules in a deterministic mode: integer operations on the bit patterns on the
        # device (no float operation, so flush-to-zero cannot change a result).
        cupy = _cupy()
        with work.device:
            out = cupy.ascontiguousarray(round_cpfloat_elementwise(_namespace(cupy), work, spec))
    elif getattr(spec, "extended", False):
        # Other semantics beyond chop.m: the NumPy engine on the host, and back (slow).
        from .numpy_engine import chop_array

        cupy = _cupy()
        with work.device:
            out = cupy.asarray(np.array(chop_array(cupy.asnumpy(work), spec, sources), order="C"))
    else:
        with work.device:
            stream = None
            counter = getattr(sources, "counter", None)  # Chop(rng=<int>): the counter generator, every engine
            if (spec.round >= 5 or spec.flips) and counter is not None:
                if spec.flips and spec.fmt.t < 2:
                    raise ValueError(FLIP_PRECISION_ERROR)
                stream = counter.take(work.size)
            elif (spec.round >= 5 or spec.flips) and draws_on_device(spec, sources):
                stream = device_random.take(f"cuda:{work.device.id}", work.size)
            out = chop_device_array(work, spec, sources, stream)
    return out.astype(give_back) if give_back is not None else out
