"""Train the digits MLP with its products computed as an H100's fp8 tensor cores compute them.

The network, data and training of ``train_digits.py`` (64 -> 64 -> 10 MLP, plain SGD,
learning rate 0.1, batch 32, 20 epochs, seeds 0, 1, 2), with the weights kept in
float32, and the forward pass of training and of every evaluation run under
:func:`pychop_compat.nn.simulate`.  Run from the repository root::

    python examples/train_digits_hardware.py          # the protocol; writes the results JSON
    python examples/train_digits_hardware.py --quick  # a smoke run (1 seed, 2 epochs, nothing written)

The protocol, fixed before the first run:

* configurations: float32 (no simulation); the operands of both linear layers
  rounded to fp8 E4M3 (``'float8_e4m3fn'``, to nearest, no scaling: inputs in [0, 1],
  weights of torch's initialisation) with their products accumulated exactly and
  rounded once to fp32 (``accumulate='single'``); the same operands through the
  H100's fp8 model (``hardware='H100'``: blocks of 32 products aligned to 13
  fraction bits, truncated, as measured on H100/H200 GPUs; see docs/hardware.rst);
* only the forward products are simulated: the gradients are torch's float32
  products of the same rounded operands (the straight-through estimator of
  ``simulate``); the bias is the addend of the first block under the model;
* recorded: the test accuracy after each epoch, per seed; the figure
  (``docs/figures/digits_hardware.py``) shows the mean and the range over
  the seeds, and the caption the final means.

The inner dimensions here are 64 (first layer, two blocks of 32) and 64: the
alignment truncation of a long fp8 GEMM (``docs/figures/gemm_error.py``) has
little room to act, which is what this experiment measures.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from pychop_compat.nn import simulate  # noqa: E402
from train_digits import BATCH, EPOCHS, LR, SEEDS, load_data, save_results, summary_row  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "train_digits_hardware.json"
#: label -> keyword arguments of ``simulate`` (None: plain float32).
CONFIGURATIONS = {
    "float32": None,
    "fp8 E4M3, exact sums rounded once to fp32": dict(format="float8_e4m3fn", accumulate="single"),
    "fp8 E4M3, H100 tensor-core model": dict(format="float8_e4m3fn", hardware="H100"),
}


def _context(settings):
    if settings is None:
        return contextlib.nullcontext()
    settings = dict(settings)
    return simulate(settings.pop("format"), **settings)


def run(data, settings, seed: int, epochs: int = EPOCHS) -> list:
    """Test accuracy after each epoch for one configuration and seed."""
    x_train, y_train, x_test, y_test = data
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    batches = torch.Generator().manual_seed(seed)
    loss_fn = nn.CrossEntropyLoss()
    history = []
    for _ in range(epochs):
        order = torch.randperm(len(x_train), generator=batches)
        for start in range(0, len(order), BATCH):
            index = order[start:start + BATCH]
            optimizer.zero_grad()
            with _context(settings):
                loss = loss_fn(model(x_train[index]), y_train[index])
            loss.backward()
            optimizer.step()
        with torch.no_grad(), _context(settings):
            history.append(float((model(x_test).argmax(1) == y_test).double().mean()))
    return history


def main(seeds=SEEDS, epochs: int = EPOCHS, results_path=RESULTS, verbose: bool = True) -> dict:
    """Run the protocol; returns {label: [history per seed]} and writes it to ``results_path``."""
    torch.set_num_threads(1)
    data = load_data()
    started = time.perf_counter()
    histories = {}
    for label, settings in CONFIGURATIONS.items():
        histories[label] = [run(data, settings, seed, epochs) for seed in seeds]
        if verbose:
            print(summary_row([label], histories[label]), flush=True)
    seconds = time.perf_counter() - started
    if verbose:
        print(f"({len(seeds)} seeds x {epochs} epochs per row; {seconds:.0f} s in all)")
    if results_path is not None:
        save_results(results_path, "python examples/train_digits_hardware.py", seeds, epochs, seconds, histories)
    return histories


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 seed, 2 epochs, nothing written")
    args = parser.parse_args()
    print("| products | final test accuracy (mean) | std over seeds |")
    print("|---|---|---|")
    if args.quick:
        main(seeds=(0,), epochs=2, results_path=None)
    else:
        main()
