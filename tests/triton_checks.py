"""What the tests of the three Triton kernels (chop's, chopped matmul's, the block-FMA model's) check
alike, written once: their PTX for sm_90 compiled without a GPU, the PTX rules every kernel keeps, a
case file run by Triton's interpreter in a fresh process, and that CPU work imports no Triton."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
#: A fused multiply-add of floats in PTX: none may appear (NumPy rounds each operation).
FLOAT_FMA = re.compile(r"\b(fma|mad)\.[\w.]*f(16|32|64)\b")


def sm90_ptx(kernel, signature: dict, constexprs: dict) -> str:
    """The PTX of ``kernel`` for sm_90 with the engines' launch options (skips where this Triton has
    no CUDA backend tools; a compilation error of the kernel's own source fails)."""
    import triton
    from triton.backends.compiler import GPUTarget

    from pychop_compat.kernels import triton_kernel

    signature = dict(signature, **{name: "constexpr" for name in constexprs})
    source = triton.compiler.ASTSource(fn=kernel, signature=signature, constexprs=constexprs)
    try:
        compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32), options=dict(triton_kernel.LAUNCH_OPTIONS))
    except triton.compiler.errors.CompilationError:
        raise
    except Exception as exc:  # a Triton without its CUDA backend tools
        pytest.skip(f"Triton cannot compile for sm_90 here: {exc}")
    return compiled.asm["ptx"]


def assert_plain_ptx(ptx: str) -> None:
    """The rules of every kernel: it stores, flushes no subnormal (``.ftz``), fuses no multiply
    and add, calls no library (libdevice)."""
    assert "st.global" in ptx
    assert ".ftz" not in ptx
    assert not FLOAT_FMA.search(ptx), FLOAT_FMA.search(ptx)
    assert not re.search(r"^\s*call", ptx, re.M), "no library calls (libdevice)"


def run_interpreted(case_file: str, *pytest_args: str, timeout: int = 600, **env: str) -> str:
    """``case_file`` (in tests/) run by pytest with ``TRITON_INTERPRET=1`` in a fresh process (the
    variable must be set before Triton is imported); asserts every selected test passed."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *pytest_args,
                           str(TESTS / case_file)], cwd=TESTS.parent, env=dict(os.environ, TRITON_INTERPRET="1", **env),
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    last = done.stdout.strip().splitlines()[-1]
    assert " passed" in last and "skipped" not in last, done.stdout[-2000:]
    return done.stdout


def assert_imports_no_triton(code: str) -> None:
    """``code`` (which ends by printing ``'triton' in sys.modules``) run in a fresh process prints False."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=TESTS.parent)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
