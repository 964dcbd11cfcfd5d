"""Check the block-FMA presets against the outputs GPUs returned, and print the table.

The data are those of the anchor's ``model_validation/`` folder
(github north-numerical-computing/MATLAB-tensor-core, Khattak and Mikaitis): per GPU
and input format, rows of A (``a_*``), columns of B (``b_*``), addends (``c_*``) and
the results the GPU returned (``d_*``), one inner product per line.

    python tools/hardware_validation.py                # the table (docs/hardware.rst)
    python tools/hardware_validation.py --mismatches 5 # and up to 5 disagreements per pair, with inputs
    python tools/hardware_validation.py --extract GITDIR
        # rebuild tests/data/hardware/model_validation.npz from a clone's git directory

The stored file keeps every line of the anchor's files, once per distinct file
(files shared between GPUs are stored once); inputs as the high bits of their
binary32 encodings (the rest are zero), addends and results as binary32 encodings.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "hardware" / "model_validation.npz"
COMMIT = "b12b5a700957655375a1b0c1d0c26e76065da015"
FOLDERS = {"fp16": "fp16", "bf16": "bf16", "tf32": "tf32", "e4m3": "E4M3", "e5m2": "E5M2"}
# Low bits of the binary32 encodings that are zero for each input format.
DROPPED_BITS = {"fp16": 13, "tf32": 13, "bf16": 16, "e4m3": 16, "e5m2": 16}


def _show(gitdir: str, path: str) -> str | None:
    result = subprocess.run(["git", f"--git-dir={gitdir}", "show", f"{COMMIT}:{path}"],
                            capture_output=True, text=True)
    return result.stdout if result.returncode == 0 else None


def extract(gitdir: str) -> None:
    """Read the anchor's files and write the compressed test data."""
    listing = subprocess.run(["git", f"--git-dir={gitdir}", "ls-tree", "-r", "--name-only", COMMIT,
                              "model_validation"], capture_output=True, text=True, check=True).stdout.split()
    arrays: dict[str, np.ndarray] = {}
    manifest = []

    def store(text: str, shift: int) -> str:
        key = hashlib.sha1(text.encode()).hexdigest()[:10]
        if key not in arrays:
            if all(len(token) == 32 for token in text.split()[:3]):
                words = np.array([int(token, 2) for token in text.split()], dtype=np.uint32)
                rows = words[:, None]
            else:
                rows = np.array([[int(token, 16) for token in line.split()] for line in text.splitlines()
                                 if line.strip()], dtype=np.uint32)
            assert not (rows & np.uint32((1 << shift) - 1)).any()
            rows = rows >> np.uint32(shift)
            arrays[key] = rows.astype(np.uint16) if rows.max() < 1 << 16 else rows
        return key

    for gpu in sorted({path.split("/")[1] for path in listing if path.count("/") == 3}):
        for inputs, folder in FOLDERS.items():
            base = f"model_validation/{gpu}/{folder}/"
            a_text = _show(gitdir, f"{base}a_{gpu}_{folder}.txt")
            if a_text is None or gpu == "CUDA":
                continue
            b_text = _show(gitdir, f"{base}b_{gpu}_{folder}.txt")
            c_text = _show(gitdir, f"{base}c_{gpu}_fp32.txt")
            assert b_text is not None and c_text is not None
            for output in ("fp16", "fp32"):
                d_text = _show(gitdir, f"{base}d_{gpu}_{output}.txt")
                if d_text is None:
                    continue
                # H100 and H200 ran fp8 with fp32 output through WGMMA with D = A*B + D, D zero
                # (Validate_TC_models.m); fp16 output through mma.sync with C (CUDA/mma_fp8_output_fp16.cu).
                zero_addend = gpu in ("H100", "H200") and inputs in ("e4m3", "e5m2") and output == "fp32"
                manifest.append({"gpu": gpu, "inputs": inputs, "output": output,
                                 "a": store(a_text, DROPPED_BITS[inputs]), "b": store(b_text, DROPPED_BITS[inputs]),
                                 "c": None if zero_addend else store(c_text, 0), "d": store(d_text, 0)})
    DATA.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(DATA, manifest=np.array(json.dumps(manifest)), **arrays)
    print(f"wrote {DATA} ({DATA.stat().st_size} bytes, {len(manifest)} GPU/format pairs)")


def load_cases(path: Path = DATA) -> list[dict]:
    """One dict per GPU and format pair: gpu, inputs, output, a, b (float64, one
    inner product per row), c (float64) and d (the GPU's results, float32)."""
    with np.load(path) as stored:
        manifest = json.loads(str(stored["manifest"]))
        cases = []
        for entry in manifest:
            shift = np.uint32(DROPPED_BITS[entry["inputs"]])

            def as_float(key: str, dropped: np.uint32 = shift) -> np.ndarray:
                return (stored[key].astype(np.uint32) << dropped).view(np.float32).astype(np.float64)
            a, b = as_float(entry["a"]), as_float(entry["b"])
            c = np.zeros(len(a)) if entry["c"] is None else as_float(entry["c"], np.uint32(0))[:, 0]
            d = stored[entry["d"]].astype(np.uint32).view(np.float32)[:, 0]
            cases.append(dict(entry, a=a, b=b, c=c, d=d))
    return cases


def anchor_parameters(gpu: str, inputs: str, output: str):
    """The model a pair is checked with: the preset, else (fp8 inputs with fp16 output,
    which have none) the parameters of the anchor's model file as they stand."""
    from pychop_compat import hardware

    if (gpu, inputs, output) in hardware.PRESETS:
        return hardware.PRESETS[gpu, inputs, output], "preset"
    fp32 = hardware.model(gpu, inputs, "fp32")
    if gpu == "B200":  # B200TC.m sets the output to fp32 for fp8 inputs
        return fp32, "anchor's (fp32, no preset)"
    return fp32.replace(output_format="fp16", rounding="rne"), "anchor's (no preset)"


def agreement(case: dict):
    """The model's results for one case (float32), a mask of bitwise agreement, and
    which model was used."""
    from pychop_compat import hardware
    from pychop_compat.rounding import round_to_format

    spec, source = anchor_parameters(case["gpu"], case["inputs"], case["output"])
    c = case["c"]
    if spec.output_format == "fp16":  # the GPU ran with C rounded to fp16 (to nearest)
        c = round_to_format(c, "fp16")
    result = hardware.block_dot(case["a"], case["b"], c, spec).astype(np.float32)
    same = result.view(np.uint32) == case["d"].view(np.uint32)
    return result, same, source


def table(cases: list[dict], mismatches: int = 0) -> str:
    """The agreement table (reStructuredText), after up to ``mismatches``
    disagreements per pair as comment lines with their inputs."""
    lines, rows = [], []
    for case in cases:
        result, same, source = agreement(case)
        rows.append((case["gpu"], case["inputs"], case["output"], source, same.size, int(same.sum())))
        for index in np.flatnonzero(~same)[:mismatches]:
            lines.append(f"# {case['gpu']} {case['inputs']}->{case['output']} line {index + 1}: "
                         f"a={case['a'][index].tolist()} b={case['b'][index].tolist()} c={float(case['c'][index])!r} "
                         f"gpu={float(case['d'][index])!r} model={float(result[index])!r}")
    lines += [".. list-table::", "   :header-rows: 1", "   :class: wide", "   :widths: 12 12 12 30 17 17", ""]
    for row in [("GPU", "inputs", "output", "model", "outputs checked", "agreeing")] + rows:
        lines += [f"   * - {row[0]}"] + [f"     - {cell}" for cell in row[1:]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extract", metavar="GITDIR")
    parser.add_argument("--mismatches", type=int, default=0)
    args = parser.parse_args(argv)
    if args.extract:
        extract(args.extract)
        return 0
    print(table(load_cases(), args.mismatches))
    return 0


if __name__ == "__main__":
    sys.exit(main())
