"""Engines bind the rounding semantics to an array library.

The input's type picks the engine.  cupy and torch are looked up in
``sys.modules`` only, so they are never imported unless the caller already
passed one of their arrays.
"""

from __future__ import annotations

import sys


def array_library(x) -> str:
    """``'cupy'``, ``'torch'`` or ``'numpy'`` (anything else is converted by NumPy)."""
    module = type(x).__module__.partition(".")[0]
    if module == "cupy" and "cupy" in sys.modules and isinstance(x, sys.modules["cupy"].ndarray):
        return "cupy"
    if module == "torch" and "torch" in sys.modules and isinstance(x, sys.modules["torch"].Tensor):
        return "torch"
    return "numpy"


def available_engines() -> list[str]:
    """Engines usable here: ``'numpy'`` always; ``'numba'`` (the compiled CPU engine for
    NumPy arrays) if numba is installed; ``'torch'`` (CPU) if torch imports;
    ``'torch-cuda'`` and ``'cupy'`` when a CUDA GPU is visible to them."""
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
    return names


def from_numpy(x, engine: str):
    """``x`` (a NumPy array) as an array of ``engine``'s library, on its device."""
    if engine in ("numpy", "numba"):
        return x
    if engine in ("torch", "torch-cuda"):
        import numpy as np
        import torch

        t = torch.from_numpy(np.array(x, order="C"))  # a copy; keeps 0-d arrays 0-d
        return t.cuda() if engine == "torch-cuda" else t
    if engine == "cupy":
        import cupy

        return cupy.asarray(x)
    raise ValueError(f"Unknown engine {engine!r}.")


def to_numpy(y):
    """Any engine's array as a NumPy array (copied to the host if needed)."""
    library = array_library(y)
    if library == "torch":
        return y.detach().cpu().numpy()
    if library == "cupy":
        return sys.modules["cupy"].asnumpy(y)
    return y
