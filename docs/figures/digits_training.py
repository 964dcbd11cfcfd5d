"""Test accuracy of the digits MLP against epochs, weights stored in bfloat16, fp16 and fp8, updates RN or SR.

Reads ``benchmarks/results/train_digits.json``, written by ``python
examples/train_digits.py`` (the protocol is in that script's docstring); nothing
is trained here: rerun the example to refresh the data.  One panel per weight
format, each with the float32 baseline; a curve is the mean over the seeds, the
band their range.

Run ``python docs/figures/digits_training.py`` (writes ``digits_training.png`` and
``digits_training.json`` here).
"""

from __future__ import annotations

import json
import statistics
import sys

from figure_common import ROOT, plt, save, seed_band

RESULTS = ROOT / "benchmarks" / "results" / "train_digits.json"
COLOURS = {"-": "black", "RN": "tab:red", "SR": "tab:blue"}


def data(quick: bool = False) -> dict:
    """The stored run, as plotted (``quick`` changes nothing: the data are read, not computed)."""
    record = json.loads(RESULTS.read_text())
    curves = []
    for key, histories in record["histories"].items():
        label, rounding = key.split("|")
        finals = [h[-1] for h in histories]
        curves.append({"weights": label, "update": rounding,
                       "final_std": statistics.stdev(finals) if len(finals) > 1 else 0.0, **seed_band(histories)})
    return {"source": RESULTS.relative_to(ROOT).as_posix(), "date": record["date"],
            "versions": record["versions"], "seeds": record["seeds"], "curves": curves}


def caption_facts(d: dict) -> list:
    """The final accuracy of each curve (mean and standard deviation over the seeds), as the caption
    in ``docs/training.rst`` states it."""
    return [f"{c['weights']} {c['update']}: {c['mean'][-1]:.4f} ({c['final_std']:.4f})".replace(" -:", ":")
            for c in d["curves"]]


def main(out_dir=None, quick: bool = False):
    d = data(quick)
    baseline = next(c for c in d["curves"] if c["update"] == "-")
    formats = [c["weights"] for c in d["curves"] if c["update"] == "RN"]
    fig, axes = plt.subplots(1, len(formats), figsize=(13, 4), sharey=True)
    for ax, weights in zip(axes, formats):
        for curve in [baseline] + [c for c in d["curves"] if c["weights"] == weights]:
            epochs = range(1, len(curve["mean"]) + 1)
            name = "float32" if curve is baseline else f"{weights} {curve['update']}"
            colour = COLOURS[curve["update"]]
            ax.plot(epochs, curve["mean"], color=colour, label=name)
            ax.fill_between(epochs, curve["low"], curve["high"], color=colour, alpha=0.15)
        ax.set_title(f"weights in {weights}")
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right")
    axes[0].set_ylabel("test accuracy")
    fig.suptitle("MLP on scikit-learn digits: weight update rounded to nearest (RN) or stochastically (SR); "
                 f"mean and range over {len(d['seeds'])} seeds", fontsize=10)
    fig.tight_layout()
    return [save(fig, "digits_training", out_dir, data=d)]


if __name__ == "__main__":
    print(*main(quick="--quick" in sys.argv[1:]), sep="\n")
