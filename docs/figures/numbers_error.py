"""Error of each number format on a standard normal sample: the distribution of |q(x) - x|.

Fixed point, integer quantization (per tensor), block floating point and the
OCP MX formats, all with round to nearest, on the same 2^16 draws from
N(0, 1) (NumPy's generator, seed 0).  Each curve is the fraction of elements
whose absolute error exceeds a given value (a survival function), so lower and
further left is more accurate.  The curve is drawn through about 400 of the
sorted errors, denser at both ends, where the log axes need them.

Two pairs of formats give (nearly) the same errors: MXINT8 and BFP with 7
bits in blocks of 32 are the same rounding, and MXFP6 E3M2 differs from
MXFP8 E5M2 only on the smallest values of a block.  The second curve of each
pair is drawn dashed with markers on top of the first, and the data records
on how many elements the pair differs (the caption in ``docs/numbers.rst``
says so).

Run ``python docs/figures/numbers_error.py`` (writes ``numbers_error.png`` and
``numbers_error.json`` here).
"""

from __future__ import annotations

import sys

from figure_common import plt, save  # first: it pins OpenBLAS's kernels

import numpy as np

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
# (drawn first, drawn on top of it): pairs whose curves lie on each other
OVERLAPPING = [("BFP, 7 bits, blocks of 32", "MXINT8"), ("MXFP8 E5M2", "MXFP6 E3M2")]


def _sample_positions(n: int, per_end: int = 200) -> np.ndarray:
    """Indices into the n sorted errors: geometrically spaced from either end, both ends included."""
    ends = np.geomspace(1, n / 2, per_end)
    positions = np.concatenate([[0], np.round(ends) - 1, n - np.round(ends), [n - 1]])
    return np.unique(positions.clip(0, n - 1).astype(int))


def data(quick: bool = False) -> dict:
    """The survival function of |q(x) - x| of each format, sampled, with its rms and the overlaps."""
    n = 2 ** 12 if quick else 2 ** 16
    x = np.random.default_rng(0).standard_normal(n)
    positions = _sample_positions(n)
    quantized = {label: quantize(x) for label, quantize in FORMATS}
    curves = []
    for label, _ in FORMATS:
        error = np.sort(np.abs(quantized[label] - x))
        curves.append({"label": label, "rms": float(np.sqrt(np.mean(error ** 2))),
                       "error": error[positions].tolist()})
    overlaps = [{"below": first, "on_top": second,
                 "elements_that_differ": int(np.count_nonzero(quantized[first] != quantized[second]))}
                for first, second in OVERLAPPING]
    return {"n": n, "fraction_above": (1.0 - positions / n).tolist(), "curves": curves, "overlaps": overlaps}


def caption_facts(d: dict) -> list:
    """Phrases the figure's caption in ``docs/numbers.rst`` must contain: how each overlapping pair differs."""
    facts = []
    for pair in d["overlaps"]:
        differ = pair["elements_that_differ"]
        how = "identical" if differ == 0 else f"{differ} of {d['n']} elements differ"
        facts.append(f"{pair['on_top']} ({how})")
    return facts


def main(out_dir=None, quick: bool = False):
    d = data(quick)
    on_top = {pair["on_top"]: pair["below"] for pair in d["overlaps"]}
    fig, ax = plt.subplots(figsize=(8, 5))
    colours = dict(zip((c["label"] for c in d["curves"]), plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    for curve in sorted(d["curves"], key=lambda c: c["label"] in on_top):  # the pairs' second curves last
        label = f"{curve['label']} (rms {curve['rms']:.1e})"
        style = {"lw": 2.5 if curve["label"] in on_top.values() else 1.5}
        if curve["label"] in on_top:
            label += f", on {on_top[curve['label']]}"
            style = {"lw": 1.2, "ls": (0, (4, 3)), "marker": "o", "markersize": 3.5, "markevery": 0.07,
                     "markerfacecolor": "none"}
        ax.loglog(np.maximum(curve["error"], 1e-12), d["fraction_above"], color=colours[curve["label"]],
                  label=label, **style)
    ax.set_xlabel("absolute error |q(x) - x|  (x ~ N(0, 1))")
    ax.set_ylabel("fraction of elements with a larger error")
    ax.set_xlim(1e-6, 2)
    ax.set_ylim(1 / d["n"], 1.05)
    ax.legend(fontsize=7.5, loc="lower left")
    ax.set_title(f"Number formats on {d['n']} normal draws, round to nearest")
    fig.tight_layout()
    return [save(fig, "numbers_error", out_dir, data=d)]


if __name__ == "__main__":
    print(*main(quick="--quick" in sys.argv[1:]), sep="\n")
