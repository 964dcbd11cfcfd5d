"""Engines: one thin adapter per array type, and one router for all of them.

:mod:`.dispatch` routes every call (see ``docs/engines.rst``); the adapters
(:mod:`.numpy_engine`, :mod:`.torch_engine`, :mod:`.cupy_engine`,
:mod:`.jax_engine`, :mod:`.dask_engine`, :mod:`.labelled`) know their array
type and nothing of rounding.  Their libraries are looked up in
``sys.modules`` only, never imported unless the caller passed one of their arrays.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ..libraries import ARRAY_LIKES, array_library, unsupported_type_error

__all__ = ["array_library", "unsupported_type_error", "ARRAY_LIKES", "available_engines", "from_numpy",
           "to_numpy"]


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


def from_numpy(x: np.ndarray, engine: str) -> Any:
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


def to_numpy(y: Any) -> np.ndarray:
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
