"""A fused Triton kernel for chopped ``matmul`` on CUDA torch tensors (recursive and fma methods).

Each program keeps a ``BLOCK_M x BLOCK_N`` tile of ``C`` in registers and runs,
for ``k`` in order, the NumPy path's sequence (:func:`pychop_compat.linalg.matmul`):
``s = fl_p(a_i1 b_1j)``, then ``s = fl_s(s + fl_p(a_ik b_kj))`` (recursive) or
``s = fl_s(s + a_ik b_kj)`` (fma), in the data's type, ``fl`` being
:func:`.triton_kernel.build_round_helper`'s integer rounding, fp fusion off.
A tile that meets a value the helper leaves is recomputed by the generic path.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

__all__ = ["BLOCK_M", "BLOCK_N", "ENABLED", "available", "build_kernel", "fused_matmul", "wanted"]

if TYPE_CHECKING:  # the kernel's annotations name ``tl.constexpr``
    import triton
    import triton.language as tl
else:
    triton = tl = None  # set by build_kernel
round_bits: Any = None  # set by build_kernel

#: Rows of C per Triton program.
BLOCK_M = 32
#: Columns of C per Triton program.
BLOCK_N = 32

#: Use the fused kernel where it applies (False: always the generic path; for benchmarks).
ENABLED = True
#: Route CPU tensors as if CUDA (Triton's interpreter; set by the tests only).
CPU_TENSORS_AS_CUDA = False


def available() -> bool:
    """True when Triton can be imported."""
    from . import triton_kernel

    return triton_kernel.available()


@functools.lru_cache(maxsize=None)
def build_kernel():
    """The ``@triton.jit`` matmul kernel (built on first use)."""
    global triton, tl, round_bits
    import triton
    import triton.language as tl

    from . import triton_kernel

    round_bits = triton_kernel.build_round_helper()

    @triton.jit(do_not_specialize=["M", "N", "K"] + [which + name for which in ("p_", "s_") for name in ROUNDING])
    def chopped_matmul_kernel(a_ptr, b_ptr, c_ptr, flag_ptr, M, N, K, sam, sak, sbk, sbn,
                              p_low, p_high, p_shift, p_xmins, p_tiny_cut, p_emin_field, p_signed_zero,
                              s_low, s_high, s_shift, s_xmins, s_tiny_cut, s_emin_field, s_signed_zero,
                              P_MODE: tl.constexpr, S_MODE: tl.constexpr, ROUND_PRODUCTS: tl.constexpr,
                              WIDE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        rows = pid_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M).to(tl.int64)
        cols = pid_n.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N).to(tl.int64)
        in_rows = rows < M
        in_cols = cols < N
        a = tl.load(a_ptr + rows * sam, mask=in_rows, other=0.0)
        b = tl.load(b_ptr + cols * sbn, mask=in_cols, other=0.0)
        t = a[:, None] * b[None, :]
        if ROUND_PRODUCTS:
            s, bad = round_bits(t, p_low, p_high, p_shift, p_xmins, p_tiny_cut, p_emin_field,
                                   p_signed_zero, P_MODE, WIDE)
        else:
            s, bad = round_bits(t, s_low, s_high, s_shift, s_xmins, s_tiny_cut, s_emin_field,
                                   s_signed_zero, S_MODE, WIDE)
        for k in range(1, K):
            # Offsets in int64 (k itself is 32-bit): ``rows * 0 + k`` is an int64 vector.
            a = tl.load(a_ptr + rows * sam + (rows * 0 + k) * sak, mask=in_rows, other=0.0)
            b = tl.load(b_ptr + (cols * 0 + k) * sbk + cols * sbn, mask=in_cols, other=0.0)
            t = a[:, None] * b[None, :]
            if ROUND_PRODUCTS:
                t, bad_t = round_bits(t, p_low, p_high, p_shift, p_xmins, p_tiny_cut, p_emin_field,
                                         p_signed_zero, P_MODE, WIDE)
                bad = bad | bad_t
            s, bad_s = round_bits(s + t, s_low, s_high, s_shift, s_xmins, s_tiny_cut, s_emin_field,
                                         s_signed_zero, S_MODE, WIDE)
            bad = bad | bad_s
        inside = in_rows[:, None] & in_cols[None, :]
        tl.store(c_ptr + rows[:, None] * N + cols[None, :], s, mask=inside)
        flagged = tl.max(tl.max(tl.where(inside, bad, 0), axis=1), axis=0)
        tl.store(flag_ptr + pid_m * tl.num_programs(1) + pid_n, flagged)

    return chopped_matmul_kernel


def wanted(A: Any, B: Any) -> bool:
    """Whether the torch tensors ``A``, ``B`` take the fused kernel: on CUDA (or routed there by
    the tests) with Triton installed, both float32 or both float64."""
    return (ENABLED and (A.device.type == "cuda" or CPU_TENSORS_AS_CUDA) and available()
            and str(A.dtype) in ("torch.float32", "torch.float64") and A.dtype == B.dtype)


#: The rounding constants of the kernel, in its argument order (``p_`` or ``s_`` before each).
ROUNDING = ("low", "high", "shift", "xmins", "tiny_cut", "emin_field", "signed_zero")


def _constants(spec: Any, carrier: Any) -> tuple:
    """``ROUNDING``'s values for ``spec`` on ``carrier``, then the mode."""
    from .device_plan import regular_range, subnormal_block, zero_keeps_sign

    regular = regular_range(spec, carrier)
    block = subnormal_block(spec, carrier)
    below = (block.xmins, block.tiny_cut, block.emin_field) if block is not None else (0, 0, 0)
    return (regular.low, regular.high, regular.shift) + below + (int(zero_keeps_sign(spec)), int(spec.round))


def fused_matmul(A: Any, B: Any, product_spec: Optional[Any], sum_spec: Any) -> tuple:
    """``C`` of the recursive sequence (``product_spec`` None: products not rounded, as ``fma``).

    Parameters
    ----------
    A, B : torch.Tensor
        Operands ``(m, n)``, ``(n, p)`` with ``n >= 1``, of one float dtype, already rounded.
    product_spec, sum_spec : RoundingSpec or None
        Rounding of the products and of the sums: modes 1 to 4 of chop.m's formats, no flips
        (the caller checks).

    Returns
    -------
    tuple
        ``(C, tiles)``: ``C`` contiguous ``(m, p)``; ``tiles``: ``(rows, columns)`` slices to redo.
    """
    import torch

    from . import triton_kernel
    from .device_plan import carrier_for

    carrier = carrier_for(str(A.dtype).rpartition(".")[2])
    (m, n), p = A.shape, B.shape[1]
    C = torch.empty((m, p), dtype=A.dtype, device=A.device)
    grid = (-(-m // BLOCK_M), -(-p // BLOCK_N))
    flags = torch.zeros(grid[0] * grid[1], dtype=torch.int32, device=A.device)
    sums = _constants(sum_spec, carrier)
    products = _constants(product_spec, carrier) if product_spec is not None else sums
    build_kernel()[grid](A, B, C, flags, m, p, n, A.stride(0), A.stride(1), B.stride(0), B.stride(1),
                         *products[:7], *sums[:7], P_MODE=products[7], S_MODE=sums[7],
                         ROUND_PRODUCTS=product_spec is not None,
                         WIDE=carrier.np_float == np.float64, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                         **triton_kernel.LAUNCH_OPTIONS)
    tiles = []
    for index in torch.nonzero(flags).flatten().tolist():
        i, j = divmod(index, grid[1])
        tiles.append((slice(i * BLOCK_M, min(m, (i + 1) * BLOCK_M)), slice(j * BLOCK_N, min(p, (j + 1) * BLOCK_N))))
    return C, tiles
