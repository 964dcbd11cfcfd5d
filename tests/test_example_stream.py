"""examples/stochastic_rounding_rng.py: its key claims hold."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from pychop_compat import rand, rng

EXAMPLE = Path(__file__).parent.parent / "examples" / "stochastic_rounding_rng.py"


def _bfloat16_neighbours(x):
    """Round-down and round-up bfloat16 neighbours of positive float64 x, from float32 bit patterns."""
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    down = ((bits >> 16) << 16).astype(np.uint32).view(np.float32).astype(np.float64)
    down = np.where(down > x, down - np.ldexp(1.0, np.frexp(down)[1] - 8), down)  # float32 rounded up
    up = down + np.ldexp(1.0, np.frexp(down)[1] - 8)
    return down, up


def test_example_output(capsys):
    spec = importlib.util.spec_from_file_location("example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    c, d = module.main()
    assert len(capsys.readouterr().out.splitlines()) == 6
    rng(2026)
    x = rand(3, 4) / 3
    down, up = _bfloat16_neighbours(x)
    assert np.all((c == down) | (c == up))
    # fp16(pi) = 3.140625 = 1.1001001000b * 2; a flip changes one of its 10 fraction bits (or none).
    changed = np.abs(d - 3.140625)
    assert np.all((changed == 0) | np.isin(np.log2(changed, where=changed > 0, out=np.zeros_like(changed)),
                                            np.arange(-9, 1)))
