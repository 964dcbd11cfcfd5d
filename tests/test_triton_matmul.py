"""The fused Triton kernel of chopped ``matmul`` (``linalg/triton_matmul.py``), without a GPU.

* Its PTX for sm_90, compiled with the engine's launch options: no
  instruction flushes subnormals (``.ftz``), no multiply and add are fused
  (``fma``), no library calls.
* Its results, run on CPU tensors by Triton's interpreter on the route a CUDA
  tensor takes (``triton_matmul_interpreted_cases.py``, in a subprocess), bit for
  bit against the NumPy path.
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


@pytest.mark.parametrize("round_products", [True, False], ids=["recursive", "fma"])
@pytest.mark.parametrize("wide", [False, True], ids=["float32", "float64"])
@pytest.mark.parametrize("mode", range(1, 5))
def test_matmul_ptx_has_no_ftz_fma_or_calls(wide, mode, round_products):
    from triton.backends.compiler import GPUTarget

    from pychop_compat.kernels import triton_kernel
    from pychop_compat.kernels import triton_matmul

    real = "*fp64" if wide else "*fp32"
    signature = {"a_ptr": real, "b_ptr": real, "c_ptr": real, "flag_ptr": "*i32", "M": "i64", "N": "i64",
                 "K": "i64", "sam": "i64", "sak": "i64", "sbk": "i64", "sbn": "i64"}
    for which in ("p", "s"):
        signature.update({f"{which}_{name}": "i64" if name in ("low", "high", "xmins", "tiny_cut") else "i32"
                          for name in triton_matmul.ROUNDING})
    constexprs = {"P_MODE": mode, "S_MODE": mode, "ROUND_PRODUCTS": int(round_products), "WIDE": int(wide),
                  "BLOCK_M": triton_matmul.BLOCK_M, "BLOCK_N": triton_matmul.BLOCK_N}
    signature.update({name: "constexpr" for name in constexprs})
    source = triton.compiler.ASTSource(fn=triton_matmul.build_kernel(), signature=signature, constexprs=constexprs)
    try:
        compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32), options=dict(triton_kernel.LAUNCH_OPTIONS))
    except triton.compiler.errors.CompilationError:  # the kernel's own source: a failure, not a skip
        raise
    except Exception as exc:  # a Triton without its CUDA backend tools
        pytest.skip(f"Triton cannot compile for sm_90 here: {exc}")
    ptx = compiled.asm["ptx"]
    assert "st.global" in ptx
    assert re.search(r"\bmul\.[\w.]*f(32|64)\b", ptx), "the products are formed"
    assert ".ftz" not in ptx
    assert not _FLOAT_FMA.search(ptx), _FLOAT_FMA.search(ptx)
    assert not re.search(r"^\s*call", ptx, re.M), "no library calls (libdevice)"


@pytest.mark.heavy
@pytest.mark.slow  # Triton's interpreter: minutes of CPU (CI's slow step; on a GPU, pytest -m gpu runs the kernel)
def test_triton_matmul_in_the_interpreter():
    """Runs ``triton_matmul_interpreted_cases.py`` with ``TRITON_INTERPRET=1`` in a fresh process."""
    here = Path(__file__).parent
    env = dict(os.environ, TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                           str(here / "triton_matmul_interpreted_cases.py")], cwd=here.parent, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    last = done.stdout.strip().splitlines()[-1]
    assert " passed" in last and "skipped" not in last, done.stdout[-2000:]


def test_cpu_tensors_take_the_generic_path():
    """Without the test routing, CPU tensors never build the kernel (and import no Triton)."""
    code = ("import sys, torch\n"
            "from pychop_compat import linalg\n"
            "A = torch.linspace(-3, 3, 12, dtype=torch.float64).reshape(3, 4)\n"
            "linalg.matmul(A, A.T, 'h')\n"
            "print('triton' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).parent.parent)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
