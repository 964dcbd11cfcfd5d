"""Run your own NumPy function in fp16, bfloat16 and fp8 by changing one line.

``small_network`` below is ordinary NumPy code (a two-layer network with a
softmax).  To run it in simulated low precision, wrap the inputs with
``chopped``: every operation inside it -- ``@`` (inner products rounded after
every multiplication and addition), ``tanh``, ``exp``, ``max``, ``sum``, the
division -- is then rounded to the format, as on a machine that computes in
that format.  Nothing inside the function changes.

Run::

    python examples/chopped_user_function.py
"""

from __future__ import annotations

import numpy as np

from pychop_compat import chopped


def small_network(x, w1, w2):
    """A user's function: plain NumPy, knows nothing about rounding."""
    h = np.tanh(x @ w1)
    logits = h @ w2
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def inputs(seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((8, 16)), rng.standard_normal((16, 32)) / 4, rng.standard_normal((32, 5)) / 4


FORMATS = {"fp16": "h", "bfloat16": "b", "fp8-e4m3": "q43"}


def main(verbose: bool = True) -> dict:
    """The function's output in double and in each format; returns ``{name: output}``."""
    x, w1, w2 = inputs()
    results = {"double": small_network(x, w1, w2)}
    for name, fmt in FORMATS.items():
        # The one changed line: the inputs become chopped arrays.
        x_, w1_, w2_ = (chopped(a, fmt) for a in (x, w1, w2))
        results[name] = small_network(x_, w1_, w2_).values
    if verbose:
        exact = results["double"]
        print(f"{'format':>10}  max |p - p_double|   row sums")
        for name in FORMATS:
            p = results[name]
            print(f"{name:>10}  {np.max(np.abs(p - exact)):.3e}          "
                  f"{np.min(p.sum(axis=1)):.4f} .. {np.max(p.sum(axis=1)):.4f}")
    return results


if __name__ == "__main__":
    main()
