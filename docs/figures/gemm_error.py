"""Error of a GEMM on a GPU's matrix units against the inner dimension n, by hardware model.

The shape of the experiments of the MATLAB tensor-core models (Khattak and Mikaitis,
north-numerical-computing/MATLAB-tensor-core, ``experiments/matmul_test.m``): C = A @ B
with A of size 10 x n and B of size n x 10, for growing n.  Here the inputs are
uniform on [0, 1) (NumPy's generator, seed 0; no cancellation, so every rounding of
a partial sum shows), rounded to the input format by
:func:`pychop_compat.hardware.matmul` itself, and the error is measured against the
exact product of those rounded inputs: ``max |D - A_in @ B_in| / |A_in @ B_in|``
over the 100 outputs.  The reference product is computed in binary64 (its own
relative error is below n * 2^-53, under 2e-12 here, far below every curve).

Left: fp16 inputs, fp32 output; right: E4M3 inputs, fp32 output.  Each panel has two
GPU models (:data:`pychop_compat.hardware.PRESETS`) and "one rounding": the exact
product rounded once to fp32 (to nearest), what exact accumulation in fp32 gives.

Run ``python docs/figures/gemm_error.py`` (writes ``gemm_error.png`` and
``gemm_error.json`` here).
"""

from __future__ import annotations

import sys

from figure_common import plt, save  # first: it pins OpenBLAS's kernels

import numpy as np

from pychop_compat import hardware  # noqa: E402
from pychop_compat.rounding import round_to_format  # noqa: E402

PANELS = [("fp16", ["V100", "H100"]), ("e4m3", ["L40S", "H100"])]
M = Q = 10


def _errors(inputs: str, gpus: list, sizes: list) -> dict:
    rng = np.random.default_rng(0)
    curves: dict = {gpu: [] for gpu in gpus + ["one rounding"]}
    for n in sizes:
        A, B = rng.random((M, n)), rng.random((n, Q))
        A_in, B_in = _round_inputs(A, inputs), _round_inputs(B, inputs)
        exact = A_in @ B_in
        for gpu in gpus:
            D = hardware.matmul(A, B, model=gpu, inputs=inputs).astype(np.float64)
            curves[gpu].append(float(np.max(np.abs(D - exact) / exact)))
        once = exact.astype(np.float32).astype(np.float64)
        curves["one rounding"].append(float(np.max(np.abs(once - exact) / exact)))
    return curves


def _round_inputs(X: np.ndarray, inputs: str) -> np.ndarray:
    """X rounded to the input format to nearest, as :func:`hardware.matmul` rounds fp16 and fp8 inputs."""
    return round_to_format(X, hardware.INPUT_FORMATS[inputs])


def data(quick: bool = False) -> dict:
    """Each panel's relative errors by model and size."""
    sizes = [2 ** k for k in range(4, 9 if quick else 15)]
    return {"sizes": sizes, "panels": [{"inputs": inputs, "curves": _errors(inputs, gpus, sizes)}
                                       for inputs, gpus in PANELS]}


def caption_facts(d: dict) -> list:
    """The largest error of each curve, as the caption in ``docs/hardware.rst`` states it."""
    facts = []
    for panel in d["panels"]:
        for label, errors in panel["curves"].items():
            facts.append(f"{label} {panel['inputs']}: {max(errors):.1e}")
    return facts


def main(out_dir=None, quick: bool = False):
    d = data(quick)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), sharey=True)
    for ax, panel in zip(axes, d["panels"]):
        for label, errors in panel["curves"].items():
            style = {"ls": "--", "color": "k"} if label == "one rounding" else {"marker": "o", "markersize": 3}
            ax.loglog(d["sizes"], np.maximum(errors, 1e-12), label=label, **style)
        ax.set_xlabel("inner dimension n  (A: 10 x n, B: n x 10, uniform [0, 1))")
        ax.set_title(f"{panel['inputs']} inputs, fp32 output")
        ax.legend(fontsize=8)
    axes[0].set_ylabel("max relative error of D against the exact product")
    fig.tight_layout()
    return [save(fig, "gemm_error", out_dir, data=d)]


if __name__ == "__main__":
    print(*main(quick="--quick" in sys.argv[1:]), sep="\n")
