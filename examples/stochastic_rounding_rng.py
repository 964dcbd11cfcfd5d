"""Stochastic rounding to bfloat16 and bit flips, reproducible with rng.

A line-for-line port of stochastic_rounding_rng.m: it prints the same numbers
as MATLAB, because rng, rand and chop's random draws follow MATLAB's stream.
"""

import numpy as np

from pychop_compat import chop, clear_chop, rand, rng


def main():
    rng(2026)
    x = rand(3, 4) / 3
    clear_chop()
    c = chop(x, {"format": "b", "round": 5})
    for row in c:
        print(" ".join(f"{v:.10f}" for v in row))
    options = {"format": "h", "flip": 1, "p": 0.25}
    d = chop(np.pi * np.ones((2, 3)), options)
    for row in d:
        print(" ".join(f"{v:.10f}" for v in row))
    print(f"next rand: {rand():.15f}")
    return c, d


if __name__ == "__main__":
    main()
