"""Train a small MLP on scikit-learn's digits with its weights stored in low precision.

The weight update ``w <- fl(w - lr * g)`` is rounded to the weight format
either to nearest (RN) or stochastically (SR), with :class:`pychop_compat.nn.OptimLP`;
forward and backward passes compute in float32 from the stored weights.
Run from the repository root::

    python examples/train_digits.py                 # the protocol below; writes the results JSON
    python examples/train_digits.py --quick         # a smoke run (1 seed, 3 epochs, nothing written)

The results (every seed's test accuracy after each epoch) go to
``benchmarks/results/train_digits.json``, which ``docs/figures/digits_training.py`` draws.

The protocol, fixed before the first run:

* data: ``sklearn.datasets.load_digits`` (1797 8x8 images), pixels / 16, a
  stratified 70/30 train/test split with ``random_state=0``;
* model: 64 -> 64 (ReLU) -> 10, torch's default initialisation from
  ``torch.manual_seed(seed)``, then rounded to nearest in the weight format;
* training: plain SGD, learning rate 0.1, batch size 32, 20 epochs, the
  batches shuffled by a ``torch.Generator`` seeded with the seed; cross-entropy loss;
* weight formats: float32 (the baseline: no rounding), bfloat16 ('b'), fp16
  ('h') and fp8 as the OCP format ``'float8_e4m3fn'`` (E4M3, xmax 448, no
  infinities), each with RN and with SR (``round = 5``) of the weight update;
  SR takes torch's generator (one number per element) for every format;
* 3 seeds (0, 1, 2) per configuration; the figure shows the mean test accuracy
  after each epoch and the range over the seeds; the table gives the mean and
  the standard deviation of the final test accuracy.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from torch import nn  # noqa: E402

import pychop_compat  # noqa: E402
from pychop_compat.nn import OptimLP, Rounder  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "train_digits.json"

#: (label, weight format or None for float32).  fp8 is the OCP format 'float8_e4m3fn'
#: (E4M3, xmax 448, no Inf); earlier versions of this example used chop's IEEE-like 'q43'.
FORMATS = [("float32", None), ("bfloat16", "b"), ("fp16", "h"), ("fp8 e4m3fn", "float8_e4m3fn")]
LR, BATCH, EPOCHS, SEEDS = 0.1, 32, 20, (0, 1, 2)


def load_data():
    """(x_train, y_train, x_test, y_test) as float32/int64 tensors (the protocol's split)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = digits.data.astype("float32") / 16.0
    x_train, x_test, y_train, y_test = train_test_split(
        x, digits.target, test_size=0.3, stratify=digits.target, random_state=0)
    return (torch.from_numpy(x_train), torch.from_numpy(y_train).long(),
            torch.from_numpy(x_test), torch.from_numpy(y_test).long())


def accuracy(model, x, y) -> float:
    with torch.no_grad():
        return float((model(x).argmax(1) == y).double().mean())


def run(data, weight_format, rounding, seed, epochs=EPOCHS):
    """Test accuracy after each epoch (a list of ``epochs`` numbers) for one configuration."""
    x_train, y_train, x_test, y_test = data
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    sgd = torch.optim.SGD(model.parameters(), lr=LR)
    if weight_format is None:
        optimizer = sgd
    else:
        with torch.no_grad():  # the initial weights are stored in the format too
            for p in model.parameters():
                p.copy_(Rounder(weight_format)(p))
        optimizer = OptimLP(sgd, weight=Rounder(weight_format, rounding))
    batches = torch.Generator().manual_seed(seed)
    loss_fn = nn.CrossEntropyLoss()
    history = []
    for _ in range(epochs):
        order = torch.randperm(len(x_train), generator=batches)
        for start in range(0, len(order), BATCH):
            index = order[start:start + BATCH]
            optimizer.zero_grad()
            loss_fn(model(x_train[index]), y_train[index]).backward()
            optimizer.step()
        history.append(accuracy(model, x_test, y_test))
    return history


def summary_row(cells, histories) -> str:
    """A table row: ``cells``, then the mean and standard deviation of the final accuracies."""
    finals = [h[-1] for h in histories]
    spread = statistics.stdev(finals) if len(finals) > 1 else 0.0
    return "| " + " | ".join(cells) + f" | {statistics.mean(finals):.4f} | {spread:.4f} |"


def save_results(path, command: str, seeds, epochs: int, seconds: float, histories: dict) -> None:
    """Write a run as JSON: the command, seeds, epochs, date, time, versions and the histories."""
    record = {"command": command, "seeds": list(seeds), "epochs": epochs,
              "date": time.strftime("%Y-%m-%d", time.gmtime()), "seconds": round(seconds, 1),
              "versions": f"pychop_compat {pychop_compat.__version__}, torch {torch.__version__}, "
                          f"Python {platform.python_version()}",
              "histories": histories}
    Path(path).write_text(json.dumps(record, indent=1) + "\n")


def main(seeds=SEEDS, epochs=EPOCHS, results_path=RESULTS, verbose=True):
    """Run the protocol; returns {(label, rounding): [history per seed]} and writes it to
    ``results_path`` (rows keyed ``"label|rounding"``)."""
    torch.set_num_threads(1)  # small matrices: threads only add overhead
    data = load_data()
    results = {}
    started = time.perf_counter()
    for label, fmt in FORMATS:
        for rounding in ((None,) if fmt is None else ("nearest", "stochastic")):
            key = (label, "-" if rounding is None else ("RN" if rounding == "nearest" else "SR"))
            results[key] = [run(data, fmt, rounding, seed, epochs) for seed in seeds]
            if verbose:
                print(summary_row(key, results[key]), flush=True)
    seconds = time.perf_counter() - started
    if verbose:
        print(f"({len(seeds)} seeds x {epochs} epochs per row; {seconds:.0f} s in all)")
    if results_path is not None:
        save_results(results_path, "python examples/train_digits.py", seeds, epochs, seconds,
                     {f"{label}|{rounding}": h for (label, rounding), h in results.items()})
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 seed, 3 epochs, nothing written")
    args = parser.parse_args()
    print("| weights | update | final test accuracy (mean) | std over seeds |")
    print("|---|---|---|---|")
    if args.quick:
        main(seeds=(0,), epochs=3, results_path=None)
    else:
        main()
