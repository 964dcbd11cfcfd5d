"""The Triton kernel of CUDA tensors without CuPy (``engines/triton_kernel.py``), without a GPU.

* Its PTX for sm_90, compiled by Triton with the engine's launch options (no
  GPU needed): no instruction flushes subnormals (``.ftz``), no multiply and
  add are fused (``fma``), and nothing calls a library function (libdevice).
* Its logic, run on CPU tensors by Triton's interpreter (``TRITON_INTERPRET=1``)
  on the route a CUDA tensor takes (``triton_interpreted_cases.py``, in a
  subprocess: the interpreter must be chosen before Triton is imported).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

triton = pytest.importorskip("triton")
torch = pytest.importorskip("torch")

_FLOAT_FMA = re.compile(r"\b(fma|mad)\.[\w.]*f(16|32|64)\b")


@pytest.mark.parametrize("wide", [False, True], ids=["float32", "float64"])
@pytest.mark.parametrize("mode", range(1, 7))
def test_triton_ptx_has_no_ftz_fma_or_calls(wide, mode):
    from triton.backends.compiler import GPUTarget

    from pychop_compat.kernels import triton_kernel

    triton_kernel.build_kernel.cache_clear()
    real = "fp64" if wide else "fp32"
    signature = {"x_ptr": "*" + real, "out_ptr": "*" + real, "count_ptr": "*i32", "n": "i64", "low": "i64",
                 "high": "i64", "mask": "i64", "shift": "i32", "xmins": "i64", "tiny_cut": "i64",
                 "emin_field": "i32", "signed_zero": "i32", "key": "i64", "offset": "i64",
                 "scale": "fp32", "MODE": "constexpr", "WIDE": "constexpr", "BLOCK": "constexpr"}
    source = triton.compiler.ASTSource(fn=triton_kernel.build_kernel(), signature=signature,
                                       constexprs={"MODE": mode, "WIDE": int(wide), "BLOCK": triton_kernel.BLOCK})
    try:
        compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32), options=dict(triton_kernel.LAUNCH_OPTIONS))
    except triton.compiler.errors.CompilationError:  # the kernel's own source: a failure, not a skip
        raise
    except Exception as exc:  # a Triton without its CUDA backend tools
        pytest.skip(f"Triton cannot compile for sm_90 here: {exc}")
    ptx = compiled.asm["ptx"]
    assert "st.global" in ptx and "atom.global" in ptx
    assert ".ftz" not in ptx
    assert not _FLOAT_FMA.search(ptx), _FLOAT_FMA.search(ptx)
    assert not re.search(r"^\s*call", ptx, re.M), "no library calls (libdevice) on the rounding path"
    if mode <= 4:
        assert not re.search(r"\b(add|mul|sub|div|cvt\.rn)\.[\w.]*f(32|64)\b", ptx), "integer operations only"


@pytest.mark.parametrize("profile", [pytest.param("not slow", id="sample"),
                                     pytest.param("slow", id="rest-of-matrix", marks=pytest.mark.slow)])
def test_triton_kernel_logic_in_the_interpreter(profile):
    """Runs ``triton_interpreted_cases.py`` (the engine matrix through the Triton route) with
    ``TRITON_INTERPRET=1`` in a fresh process: the matrix's sample in the default profile,
    the rest of it under ``-m slow``."""
    here = Path(__file__).parent
    env = dict(os.environ, TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m", profile,
                           str(here / "triton_interpreted_cases.py")], cwd=here.parent, env=env,
                          capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout.splitlines()[-1], done.stdout[-2000:]


def test_triton_is_imported_only_for_cuda_tensors():
    """Importing the package and rounding CPU tensors (every mode) imports no Triton."""
    code = ("import sys, torch, pychop_compat\n"
            "x = torch.linspace(-3, 3, 50)\n"
            "for mode in range(1, 7):\n"
            "    pychop_compat.chop(x, {'format': 'h', 'round': mode})\n"
            "print('triton' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).parent.parent)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
