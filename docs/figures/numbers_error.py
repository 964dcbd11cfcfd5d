"""Error of each number format on a standard normal sample: the distribution of |q(x) - x|.

Fixed point, integer quantization (per tensor), block floating point and the
OCP MX formats, all with round to nearest, on the same 2^16 draws from
N(0, 1) (NumPy's generator, seed 0).  Each curve is the fraction of elements
whose absolute error exceeds a given value (a survival function), so lower and
further left is more accurate.

Run ``python docs/figures/numbers_error.py`` (writes ``numbers_error.png`` here).
"""

from __future__ import annotations

import sys

import numpy as np

from figure_common import plt, save

from pychop_compat import block_quantize, fixed_point, int_quantize, mx_quantize  # noqa: E402

FORMATS = [
    ("fixed point wl=8, fl=5", lambda x: fixed_point(x, 8, 5)),
    ("int8, per tensor", lambda x: int_quantize(x, 8)),
    ("int4, per tensor", lambda x: int_quantize(x, 4)),
    ("BFP, 7 bits, blocks of 32", lambda x: block_quantize(x, 7, block_size=32)),
    ("MXFP8 E4M3", lambda x: mx_quantize(x, "e4m3")),
    ("MXFP8 E5M2", lambda x: mx_quantize(x, "e5m2")),
    ("MXFP6 E2M3", lambda x: mx_quantize(x, "e2m3")),
    ("MXFP6 E3M2", lambda x: mx_quantize(x, "e3m2")),
    ("MXFP4 E2M1", lambda x: mx_quantize(x, "e2m1")),
    ("MXINT8", lambda x: mx_quantize(x, "int8")),
]


def main(out_dir=None, quick: bool = False):
    n = 2 ** 12 if quick else 2 ** 16
    x = np.random.default_rng(0).standard_normal(n)
    fig, ax = plt.subplots(figsize=(8, 5))
    for label, quantize in FORMATS:
        error = np.sort(np.abs(quantize(x) - x))
        survival = 1.0 - np.arange(n) / n
        rms = np.sqrt(np.mean(error ** 2))
        ax.loglog(np.maximum(error, 1e-12), survival, label=f"{label} (rms {rms:.1e})")
    ax.set_xlabel("absolute error |q(x) - x|  (x ~ N(0, 1))")
    ax.set_ylabel("fraction of elements with a larger error")
    ax.set_xlim(1e-6, 2)
    ax.set_ylim(1 / n, 1.05)
    ax.legend(fontsize=8, loc="lower left")
    ax.set_title(f"Number formats on {n} normal draws, round to nearest")
    fig.tight_layout()
    return [save(fig, "numbers_error", out_dir)]


if __name__ == "__main__":
    print(*main(quick="--quick" in sys.argv[1:]), sep="\n")
