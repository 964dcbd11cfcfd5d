"""Engines bind the rounding semantics to an array library.

The input's type picks the engine.  cupy, torch, jax, dask, pandas and xarray
are looked up in ``sys.modules`` only, so they are never imported unless the
caller already passed one of their arrays.
"""

from __future__ import annotations

from typing import Any

import numbers
import sys

import numpy as np


#: Types :func:`pychop_compat.chop` converts with NumPy (documented array-likes).
ARRAY_LIKES = "NumPy arrays (and subclasses), NumPy scalars, Python real numbers, lists and tuples"


def _instance_of(x, module: str, *names: str) -> bool:
    """``isinstance(x, module.name1.name2...)``, only when ``module`` is already imported."""
    obj = sys.modules.get(module)
    for name in names:
        obj = getattr(obj, name, None)
    return obj is not None and isinstance(x, obj)


def array_library(x) -> str:
    """The library that owns ``x``: ``'numpy'``, ``'torch'``, ``'cupy'``, ``'jax'``, ``'dask'``,
    ``'pandas'``, ``'xarray'``, or ``'unsupported'``.

    ``'numpy'`` covers NumPy arrays (subclasses included), NumPy scalars,
    Python numbers, lists, tuples and ``None``: what chop converts with NumPy.
    Anything else (an object with ``__array__`` or ``__dlpack__`` of another
    library, a string, a dict, ...) is ``'unsupported'``: chop refuses it
    rather than converting it silently (see :func:`unsupported_type_error`).
    """
    if isinstance(x, (np.ndarray, np.generic, numbers.Number, list, tuple)) or x is None:
        return "numpy"
    module = type(x).__module__.partition(".")[0]
    if module == "cupy" and _instance_of(x, "cupy", "ndarray"):
        return "cupy"
    if module == "torch" and _instance_of(x, "torch", "Tensor"):
        return "torch"
    if module in ("jax", "jaxlib") and _instance_of(x, "jax", "Array"):
        return "jax"
    if module == "dask" and _instance_of(x, "dask.array", "Array"):
        return "dask"
    if module == "pandas" and (_instance_of(x, "pandas", "Series") or _instance_of(x, "pandas", "DataFrame")):
        return "pandas"
    if module == "xarray" and _instance_of(x, "xarray", "DataArray"):
        return "xarray"
    return "unsupported"


#: Libraries whose arrays are rounded by an engine of their own (see :func:`chop_on_engine`).
ENGINE_LIBRARIES = ("torch", "cupy", "jax", "dask")


def chop_on_engine(x: Any, spec: Any, sources: Any, library: str) -> Any:
    """Round ``x``, an array of ``library`` (one of :data:`ENGINE_LIBRARIES`), on its engine.

    The one place that maps a library to its engine, for every facade
    (``chop``, ``cpfloat``, ``round_to_format``); each engine module is
    imported only when one of its arrays is passed.
    """
    if library == "torch":
        from . import torch_engine

        return torch_engine.chop_tensor(x, spec, sources)
    if library == "cupy":
        from . import cupy_engine

        return cupy_engine.chop_cupy(x, spec, sources)
    if library == "jax":
        from . import jax_engine

        return jax_engine.chop_jax_array(x, spec, sources)
    if library == "dask":
        from . import dask_engine

        return dask_engine.chop_dask(x, spec, sources)
    raise ValueError(f"no engine for {library!r}; engines exist for {', '.join(ENGINE_LIBRARIES)}")


def unsupported_type_error(x) -> TypeError:
    """The error for an input of no supported library (never converted silently)."""
    kind = f"{type(x).__module__}.{type(x).__qualname__}"
    hint = ""
    if hasattr(x, "__dlpack__"):
        hint = (" It supports DLPack: pass numpy.from_dlpack(x) (host memory) or torch.from_dlpack(x) "
                "to choose where the result lives.")
    elif hasattr(x, "__array__"):
        hint = " Pass numpy.asarray(x) to round a NumPy copy of it."
    return TypeError(f"chop does not support {kind} input: it takes {ARRAY_LIKES}, torch tensors, CuPy, JAX "
                     f"and Dask arrays, pandas Series/DataFrames and xarray DataArrays.{hint}")


def available_engines() -> list[str]:
    """Engines usable here: ``'numpy'`` always; ``'numba'`` (the compiled CPU engine for
    NumPy arrays) if numba is installed; ``'torch'`` (CPU) if torch imports;
    ``'torch-cuda'`` and ``'cupy'`` when a CUDA GPU is visible to them; ``'jax'``
    (on JAX's default device) if jax imports."""
    import importlib.util

    names = ["numpy"]
    if importlib.util.find_spec("numba") is not None:
        names.append("numba")  # the compiled CPU engine for NumPy arrays
    if importlib.util.find_spec("torch") is not None:
        import torch

        names.append("torch")
        if torch.cuda.is_available():
            names.append("torch-cuda")
    if importlib.util.find_spec("cupy") is not None:
        try:
            import cupy

            if cupy.cuda.runtime.getDeviceCount() > 0:
                names.append("cupy")
        except Exception:  # no driver or no device: cupy is unusable here
            pass
    if importlib.util.find_spec("jax") is not None:
        names.append("jax")
    return names


def from_numpy(x, engine: str):
    """``x`` (a NumPy array) as an array of ``engine``'s library, on its device."""
    if engine in ("numpy", "numba"):
        return x
    if engine in ("torch", "torch-cuda"):
        import torch

        t = torch.from_numpy(np.array(x, order="C"))  # a copy; keeps 0-d arrays 0-d
        return t.cuda() if engine == "torch-cuda" else t
    if engine == "cupy":
        import cupy

        return cupy.asarray(x)
    if engine == "jax":
        import jax

        x = np.array(x)  # a copy
        if x.dtype.itemsize == 8 and not jax.config.read("jax_enable_x64"):
            raise ValueError(f"JAX would turn this {x.dtype} array into a 32-bit one: enable "
                             "jax.config.update('jax_enable_x64', True) first.")
        return jax.numpy.asarray(x)
    raise ValueError(f"Unknown engine {engine!r}.")


def to_numpy(y):
    """Any engine's array as a NumPy array (copied to the host if needed)."""
    library = array_library(y)
    if library == "torch":
        return y.detach().cpu().numpy()
    if library == "cupy":
        return sys.modules["cupy"].asnumpy(y)
    if library in ("jax", "pandas", "xarray"):
        return np.asarray(y)
    if library == "dask":
        return np.asarray(y.compute())
    return y
