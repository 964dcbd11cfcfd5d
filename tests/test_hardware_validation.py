"""The block-FMA presets against the results GPUs returned (the anchor's model_validation data,
tests/data/hardware/), bit for bit, by the compiled kernel and by NumPy; and the table of docs/hardware.rst is what the script prints."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    spec = importlib.util.spec_from_file_location("hardware_validation", ROOT / "tools" / "hardware_validation.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TOOL = _tool()
CASES = TOOL.load_cases()
# Pairs where the anchor's published parameters disagree with the GPU (docs/hardware.rst, "Disagreements").
DISAGREE = {("B200", "e4m3", "fp32"), ("B200", "e5m2", "fp32")}


def _ids(case):
    return f"{case['gpu']}-{case['inputs']}-{case['output']}"


PRESET_CASES = [case for case in CASES if TOOL.anchor_parameters(case["gpu"], case["inputs"], case["output"])[1]
                == "preset" and (case["gpu"], case["inputs"], case["output"]) not in DISAGREE]


def test_the_data_hold_every_pair_of_the_anchor():
    assert len(CASES) == 48 and all(len(case["d"]) == 5000 for case in CASES)
    assert len(PRESET_CASES) == 40


@pytest.mark.parametrize("case", PRESET_CASES, ids=_ids)
def test_presets_agree_bit_for_bit(case):
    every_fifth = {key: value[::5] if isinstance(value, np.ndarray) else value for key, value in case.items()}
    _, same, _ = TOOL.agreement(every_fifth)
    assert same.all(), np.flatnonzero(~same)[:5] * 5 + 1


@pytest.mark.parametrize("engine", ["numpy", "numba"])
def test_presets_agree_bit_for_bit_on_either_cpu_engine(engine):
    # The test above runs the default engine (compiled where Numba is installed); this one
    # each of them, every 25th line of every pair.
    if engine == "numba":
        pytest.importorskip("numba")
    from pychop_compat.kernels.compiled import cpu_engine

    with cpu_engine(engine):
        for case in PRESET_CASES:
            every_25th = {key: value[::25] if isinstance(value, np.ndarray) else value for key, value in case.items()}
            _, same, _ = TOOL.agreement(every_25th)
            assert same.all(), (_ids(case), np.flatnonzero(~same)[:5] * 25 + 1)


@pytest.mark.slow
def test_the_docs_table_is_what_the_script_prints():
    text = (ROOT / "docs" / "hardware.rst").read_text()
    assert TOOL.table(CASES) in text
