"""Test accuracy of the digits MLP against epochs, products in float32, fp8 with exact sums, fp8 on the H100 model.

Reads ``benchmarks/results/train_digits_hardware.json``, written by
``python examples/train_digits_hardware.py`` (the protocol is in that script's
docstring); nothing is trained here: rerun the example to refresh the data.
Each curve is the mean over the seeds, the band the range.

Run ``python docs/figures/digits_hardware.py`` (writes
``digits_hardware.png`` and ``digits_hardware.json`` here).
"""

from __future__ import annotations

import json
import sys

from figure_common import ROOT, plt, save, seed_band

RESULTS = ROOT / "benchmarks" / "results" / "train_digits_hardware.json"
STYLES = [("black", "-"), ("tab:blue", "--"), ("tab:red", ":")]


def data(quick: bool = False) -> dict:
    """The stored run, as plotted (``quick`` changes nothing: the data are read, not computed)."""
    record = json.loads(RESULTS.read_text())
    curves = []
    for label, histories in record["histories"].items():
        curves.append({"label": label, **seed_band(histories)})
    return {"source": RESULTS.relative_to(ROOT).as_posix(), "date": record["date"],
            "versions": record["versions"], "seeds": record["seeds"], "curves": curves}


def caption_facts(d: dict) -> list:
    """The final mean accuracy of each curve, as the caption in ``docs/training.rst`` states it."""
    return [f"{curve['label']}: {curve['mean'][-1]:.4f}" for curve in d["curves"]]


def main(out_dir=None, quick: bool = False):
    d = data(quick)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for curve, (colour, style) in zip(d["curves"], STYLES):
        epochs = range(1, len(curve["mean"]) + 1)
        ax.plot(epochs, curve["mean"], color=colour, ls=style, label=curve["label"])
        ax.fill_between(epochs, curve["low"], curve["high"], color=colour, alpha=0.12)
    ax.set_xlabel("epoch")
    ax.set_ylabel("test accuracy")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title(f"Digits MLP, forward products simulated; mean and range over {len(d['seeds'])} seeds",
                 fontsize=10)
    fig.tight_layout()
    return [save(fig, "digits_hardware", out_dir, data=d)]


if __name__ == "__main__":
    print(*main(quick="--quick" in sys.argv[1:]), sep="\n")
