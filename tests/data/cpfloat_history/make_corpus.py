"""Build tests/data/cpfloat_history from CPFloat's public history (see README.md).

    python make_corpus.py calls OUT            # OUT/inputs.bin and OUT/calls_<layout>.txt
    python make_corpus.py collect WORK RUNS    # group the runs into states, write the corpus here

build.sh calls both: WORK/days.txt lists the commits (one a day), RUNS/<commit>/ holds what
driver.m wrote with the interface built at that commit.  CPFLOAT_GIT: CPFloat's git directory.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

import numpy as np

HERE = Path(__file__).parent
GIT_DIR = os.environ.get("CPFLOAT_GIT", "/work/.mirror/north-numerical-computing+cpfloat/repo")
DETERMINISTIC_MODES = (-1, 0, 1, 2, 3, 4, 7, 8)
NAMED = ("h", "b", "t", "s", "d", "E4M3", "q52")
ALIASES = ("half", "q43", "fp8-e4m3", "fp8-e5m2", "E5M2", "bfloat16", "bf16", "tf32", "single")
# Custom formats as (t, emin, emax): written [t, emax] (emin = 1 - emax) before 2024-05-08,
# [t, emax, emin] from 2024-05-08 to 2024-05-27, [t, emin, emax] since.
CUSTOM = ((5, -6, 7), (3, -2, 3), (11, -14, 15), (8, -126, 127), (25, -1022, 1023), (26, -1022, 1023),
          (40, -200, 201), (4, -1022, 1023), (2, 0, 1), (6, -1023, 1024), (12, -126, 127))
LAYOUTS = ("t,emax", "t,emax,emin", "t,emin,emax")


def inputs() -> np.ndarray:
    """Powers of two times significands that are ties for p = 1..12, signs alternating, with
    random values, zeros, infinities and NaN."""
    significands = np.array([1, 1.5, 1.25, 1.125, 1 + 2**-4, 1 + 2**-5, 1 + 2**-8, 1 + 2**-11,
                             1 + 3 * 2**-12, 1.75, 2 - 2**-9, 2 - 2**-30, 1 + 2**-24])
    exponents = np.r_[-152:-119, -26:18, 118:131]
    grid = (significands[None, :] * np.exp2(exponents)[:, None]).ravel()
    grid *= np.where(np.arange(grid.size) % 2 == 0, 1.0, -1.0)
    rng = np.random.default_rng(20261127)
    random = rng.choice([-1.0, 1.0], 150) * np.exp2(rng.uniform(-160, 140, 150))
    wide = np.array([2.0**-1074, 2.0**-1060, 2.0**-1022 * 1.5, 2.0**-1000, 2.0**1000, 2.0**1023 * 1.75,
                     np.finfo(np.float64).max, 2.0**-149, 2.0**-126 * 0.75, 3.4e38, 3.5e38])
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1 / 3, -2 / 3, 0.1, 480, 464, 496, 512, 240,
                        248, 57344, 61440, 65504, 65520, 65536, -1e5])
    return np.concatenate([special, wide, -wide, grid, random])


def params_for(layout: str, t: int, emin: int, emax: int) -> list:
    return {"t,emax": [t, emax], "t,emax,emin": [t, emax, emin], "t,emin,emax": [t, emin, emax]}[layout]


def sequences(layout: str) -> list:
    """Lists of (input, options) calls; each list starts from a cleared cpfloat."""
    seqs = []
    for fmt in NAMED:
        for mode in DETERMINISTIC_MODES:
            if fmt != "d" or mode not in (-1, 0, 1):  # CPFloat's p_eq_storage defect (README)
                seqs.append([("double", {"format": fmt, "round": mode})])
        if fmt not in ("s", "d"):  # 's' on single input: p_eq_storage; 'd': an error
            seqs.append([("single", {"format": fmt})])
    for fmt in ALIASES:
        seqs.append([("double", {"format": fmt})])
    for fmt in ("h", "b", "E4M3", "q52", "s"):
        for mode in (1, 2):
            for subnormal in (None, 0, 1):
                for explim in (None, 0):
                    for extra in ({}, {"saturation": 1}, {"infinity": 0}, {"saturation": 1, "infinity": 0}):
                        opts = {"format": fmt, "round": mode, **extra}
                        if subnormal is not None:
                            opts["subnormal"] = subnormal
                        if explim is not None:
                            opts["explim"] = explim
                        seqs.append([("double", opts)])
    for t, emin, emax in CUSTOM:
        params = params_for(layout, t, emin, emax)
        for mode in (1, 2, 7):
            for kind in ("double", "single"):
                seqs.append([(kind, {"format": "c", "params": params, "round": mode})])
        seqs.append([("double", {"format": "custom", "params": params, "subnormal": 0, "explim": 0})])
    h = params_for(layout, 11, -14, 15)
    # Sequences: what persists from one call to the next.
    seqs += [
        [("double", None), ("double", {"round": 2}), ("double", None)],
        [("double", {"format": "b"}), ("double", {"round": 2}), ("double", {"format": "h"})],
        [("double", {"format": "h", "subnormal": 0}), ("double", {"format": "s"}), ("double", {"round": 3})],
        [("double", {"format": "b", "subnormal": 1}), ("double", {"format": "b"}), ("double", {"format": "t"})],
        [("double", {"format": "E4M3"}), ("double", {"format": "h"}), ("double", {"round": 1}),
         ("double", {"format": "h", "infinity": 1}), ("double", {"format": "b"})],
        [("double", {"format": "h", "infinity": 0}), ("double", {"format": "s"}), ("double", {"format": "q52"})],
        [("double", {"format": "h", "saturation": 1}), ("double", {"format": "b"}), ("double", {"round": 4})],
        [("double", {"format": "h", "round": 3}), ("double", {"format": "b"}), ("double", {"format": "c", "params": h})],
        [("double", {"format": "h", "explim": 0}), ("double", {"format": "s"}), ("double", {})],
        [("double", {"format": "c", "params": h, "round": 2}), ("double", {"round": 1})],
        [("double", {"format": "c", "params": h, "round": 2}), ("double", None), ("double", "empty")],
        [("double", {"format": "h"}), ("double", "empty"), ("none", {"format": "b"}), ("double", None)],
        [("double", {"format": "b", "params": h}), ("double", {"format": "c", "params": h, "subnormal": 0})],
        [("double", {"format": "E4M3", "saturation": 1}), ("double", {"format": "q52"}),
         ("double", {"format": "q43", "infinity": 1}), ("double", {"format": "fp8-e4m3"})],
        [("double", {"format": "zz"}), ("double", None)],
        [("single", {"format": "d"}), ("none", None), ("single", {"format": "h"})],
        [("double", {"format": "h", "drcheck": 0}), ("double", {"format": "c", "params": params_for(layout, 30, -14, 15)})],
    ]
    return seqs


def write_calls(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    inputs().astype("<f8").tofile(out / "inputs.bin")
    for layout in LAYOUTS:
        lines = []
        for number, seq in enumerate(sequences(layout)):
            for kind, opts in seq:
                text = "none" if opts is None else opts if isinstance(opts, str) else json.dumps(opts)
                lines.append(f"{number}\t{kind}\t{text}\n")
        (out / f"calls_{layout.replace(',', '_')}.txt").write_text("".join(lines))


def layout_of(commit: str) -> str:
    """How the interface at ``commit`` reads ``params``."""
    source = git("show", f"{commit}:mex/cpfloat.c")
    if "mxGetData(tmp))[2]" not in source:
        return "t,emax"
    return "t,emax,emin" if "emin = ((double *)mxGetData(tmp))[2]" in source else "t,emin,emax"


def git(*args: str) -> str:
    return subprocess.run(["git", f"--git-dir={GIT_DIR}", *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def collect(builds: Path, runs: Path, first_day: str = "2021-01-27") -> None:
    """Group consecutive days with the same results into states; write index.json.gz and outputs.npz.

    A result is ``[output, options]`` (indices into the lists ``outputs`` and ``options``; output -1:
    no array returned) or the error identifier, a string."""
    n = inputs().size
    outputs: dict = {}
    options: dict = {}
    states: list = []
    for line in (builds / "days.txt").read_text().splitlines():
        commit, day = line.split()
        if day < first_day:
            continue
        full, date, subject = git("log", "-1", "--format=%H%n%ad%n%s", "--date=short", commit).split("\n")
        layout = layout_of(commit)
        calls = [row.split("\t") for row in (runs / f"calls_{layout.replace(',', '_')}.txt").read_text().splitlines()]
        results: Optional[list] = None
        log = runs / commit / "log.txt"
        if log.exists() and len(log.read_text().splitlines()) == len(calls):
            flat = np.fromfile(runs / commit / "outputs.bin", dtype="<f8")
            results, offset = [], 0
            for (_, kind, _), row in zip(calls, (runs / commit / "log.txt").read_text().splitlines()):
                status, identifier, rest = (row.split("\t") + ["", ""])[:3]
                if status != "ok":
                    results.append(identifier)
                    continue
                size = 0 if kind == "none" else n  # x = []: no output
                out = flat[offset:offset + size]
                offset += size
                key = out.tobytes()
                output = -1 if kind == "none" else outputs.setdefault(key, len(outputs))
                results.append([output, options.setdefault(rest, len(options))])
            assert len(results) == len(calls) and offset == flat.size, commit
        if states and states[-1]["results"] == results and states[-1]["layout"] == layout:
            states[-1]["same_as"].append(f"{full[:7]} {date}")
            continue
        states.append({"commit": full[:7], "date": date, "subject": subject, "layout": layout,
                       "builds": results is not None, "results": results, "same_as": []})
    index = {"source": "github.com/north-numerical-computing/cpfloat: mex/cpfloat.c built for GNU Octave "
                       "at the last commit of each day that touched mex/cpfloat.c or src/*.h (README.md)",
             "calls": {layout: [row.split("\t") for row in
                                (runs / f"calls_{layout.replace(',', '_')}.txt").read_text().splitlines()]
                       for layout in LAYOUTS},
             "options": list(options), "states": states}
    with gzip.open(HERE / "index.json.gz", "wt") as stream:
        json.dump(index, stream, separators=(",", ":"))
    np.savez_compressed(HERE / "outputs.npz", inputs=inputs(),
                        outputs=np.array([np.frombuffer(key, dtype="<f8") for key in outputs]))


if __name__ == "__main__":
    if sys.argv[1] == "calls":
        write_calls(Path(sys.argv[2]))
    else:
        collect(Path(sys.argv[2]), Path(sys.argv[3]))
