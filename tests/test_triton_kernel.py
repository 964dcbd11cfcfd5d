"""The Triton kernel of CUDA tensors without CuPy (``engines/triton_kernel.py``), without a GPU.

* Its PTX for sm_90, compiled by Triton with the engine's launch options (no
  GPU needed): no instruction flushes subnormals (``.ftz``), no multiply and
  add are fused (``fma``), and nothing calls a library function (libdevice).
* Its logic, run on CPU tensors by Triton's interpreter (``TRITON_INTERPRET=1``)
  on the route a CUDA tensor takes (``triton_interpreted_cases.py``, in a
  subprocess: the interpreter must be chosen before Triton is imported).
"""

from __future__ import annotations

import re

import pytest

triton = pytest.importorskip("triton")
torch = pytest.importorskip("torch")

from triton_checks import assert_imports_no_triton, assert_plain_ptx, run_interpreted, sm90_ptx  # noqa: E402


@pytest.mark.parametrize("wide", [False, True], ids=["float32", "float64"])
@pytest.mark.parametrize("mode", range(1, 7))
def test_triton_ptx_has_no_ftz_fma_or_calls(wide, mode):
    from pychop_compat.kernels import triton_kernel

    triton_kernel.build_kernel.cache_clear()
    real = "fp64" if wide else "fp32"
    signature = {"x_ptr": "*" + real, "out_ptr": "*" + real, "count_ptr": "*i32", "n": "i64", "low": "i64",
                 "high": "i64", "mask": "i64", "shift": "i32", "xmins": "i64", "tiny_cut": "i64",
                 "emin_field": "i32", "signed_zero": "i32", "key": "i64", "offset": "i64", "scale": "fp32"}
    ptx = sm90_ptx(triton_kernel.build_kernel(), signature, {"MODE": mode, "WIDE": int(wide), "BLOCK": triton_kernel.BLOCK})
    assert_plain_ptx(ptx)
    assert "atom.global" in ptx
    if mode <= 4:
        assert not re.search(r"\b(add|mul|sub|div|cvt\.rn)\.[\w.]*f(32|64)\b", ptx), "integer operations only"


@pytest.mark.parametrize("profile", [pytest.param("not slow", id="sample"),
                                     pytest.param("slow", id="rest-of-matrix", marks=pytest.mark.slow)])
def test_triton_kernel_logic_in_the_interpreter(profile):
    """Runs ``triton_interpreted_cases.py`` (the engine matrix through the Triton route) with
    ``TRITON_INTERPRET=1`` in a fresh process: the matrix's sample in the default profile,
    the rest of it under ``-m slow``."""
    run_interpreted("triton_interpreted_cases.py", "-m", profile, timeout=1200)


def test_triton_is_imported_only_for_cuda_tensors():
    """Importing the package and rounding CPU tensors (every mode) imports no Triton."""
    code = ("import sys, torch, pychop_compat\n"
            "x = torch.linspace(-3, 3, 50)\n"
            "for mode in range(1, 7):\n"
            "    pychop_compat.chop(x, {'format': 'h', 'round': mode})\n"
            "print('triton' in sys.modules)\n")
    assert_imports_no_triton(code)
