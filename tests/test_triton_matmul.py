"""The fused Triton kernel of chopped ``matmul`` (``linalg/triton_matmul.py``), without a GPU.

* Its PTX for sm_90, compiled with the engine's launch options: no
  instruction flushes subnormals (``.ftz``), no multiply and add are fused
  (``fma``), no library calls.
* Its results, run on CPU tensors by Triton's interpreter on the route a CUDA
  tensor takes (``triton_matmul_interpreted_cases.py``, in a subprocess), bit for
  bit against the NumPy path.
"""

from __future__ import annotations

import re

import pytest

triton = pytest.importorskip("triton")
torch = pytest.importorskip("torch")

from triton_checks import assert_imports_no_triton, assert_plain_ptx, run_interpreted, sm90_ptx  # noqa: E402


@pytest.mark.parametrize("round_products", [True, False], ids=["recursive", "fma"])
@pytest.mark.parametrize("wide", [False, True], ids=["float32", "float64"])
@pytest.mark.parametrize("mode", range(1, 5))
def test_matmul_ptx_has_no_ftz_fma_or_calls(wide, mode, round_products):
    from pychop_compat.kernels import triton_matmul

    real = "*fp64" if wide else "*fp32"
    signature = {"a_ptr": real, "b_ptr": real, "c_ptr": real, "flag_ptr": "*i32", "M": "i64", "N": "i64",
                 "K": "i64", "sam": "i64", "sak": "i64", "sbk": "i64", "sbn": "i64"}
    for which in ("p", "s"):
        signature.update({f"{which}_{name}": "i64" if name in ("low", "high", "xmins", "tiny_cut") else "i32"
                          for name in triton_matmul.ROUNDING})
    constexprs = {"P_MODE": mode, "S_MODE": mode, "ROUND_PRODUCTS": int(round_products), "WIDE": int(wide),
                  "BLOCK_M": triton_matmul.BLOCK_M, "BLOCK_N": triton_matmul.BLOCK_N}
    ptx = sm90_ptx(triton_matmul.build_kernel(), signature, constexprs)
    assert_plain_ptx(ptx)
    assert re.search(r"\bmul\.[\w.]*f(32|64)\b", ptx), "the products are formed"


@pytest.mark.heavy
@pytest.mark.slow  # Triton's interpreter: minutes of CPU (CI's slow step; on a GPU, pytest -m gpu runs the kernel)
def test_triton_matmul_in_the_interpreter():
    """Runs ``triton_matmul_interpreted_cases.py`` with ``TRITON_INTERPRET=1`` in a fresh process."""
    run_interpreted("triton_matmul_interpreted_cases.py")


def test_cpu_tensors_take_the_generic_path():
    """Without the test routing, CPU tensors never build the kernel (and import no Triton)."""
    code = ("import sys, torch\n"
            "from pychop_compat import linalg\n"
            "A = torch.linspace(-3, 3, 12, dtype=torch.float64).reshape(3, 4)\n"
            "linalg.matmul(A, A.T, 'h')\n"
            "print('triton' in sys.modules)\n")
    assert_imports_no_triton(code)
